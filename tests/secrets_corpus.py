"""The recall corpus (issue 14): secrets of every kind, in every shape a trace meets them; shared by the redaction
tests.
"""

from __future__ import annotations

import json

# Secrets recognizable by their format alone: they may appear anywhere, bare.
FORMAT_SECRETS = [
    "sk-ant-api03-Zq8vK2mP4xR7tY1uW3eN6bH9cJ0dL5fG8hA2sD4fG6hJ8kL0zX2cV4bN6mQ8wE0rT2y-AbCdEfAA",
    "sk-proj-T3stOnlyK3yAbcdefghijklmnopqrstuvwxyz0123456789ABCD",
    "sk-1234567890abcdefghijklmnopqrstuvwxyzABCDEFGH",
    "ghp_R4nd0mT0k3nV4lu3F0rT3st1ngOnly12345",
    "gho_16C7e42F292c6912E7710c838347Ae178B4a",
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ012345",
    "AKIAIOSFODNN7EXAMPLE",
    "ASIAY34FZKBOKMUTVV7A",
    "xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "xoxp-2234567890-2234567890123-2234567890123-abcdef0123456789abcdef0123456789",
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkFkYSJ9.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
    "glpat-xK9mZ2pQ7vR4tY8wN3bJ",
    "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "sk_live_51HqLyjWDarjtT1zdp7dc0123456789",
    "rk_test_4eC39HqLyjWDarjtT1zdp7dc",
    "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",
    "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
    "pypi-AgEIcHlwaS5vcmcCJGE0ZTA5ZGM4LTk1NzQtNGRhYy04ZTg3LWQ4NTliYjI3OTYzNgACJXsicGVybWlzc2lvbnMiOiAidXNlciJ9",
]
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAtestonlykeymaterialnotrealAbCdEfGhIjKlMnOpQrStUvWx\n"
    "yz0123456789PemBodyLineTwoForTheRedactionCorpusOnly+/=\n"
    "-----END RSA PRIVATE KEY-----"
)
PEM_BODY = "MIIEowIBAAKCAQEAtestonlykeymaterialnotrealAbCdEfGhIjKlMnOpQrStUvWx"
# Secrets that look like any text: only their field name (or a label) says what they are.
NAMED_SECRETS = {
    "password": "Tr0ub4dor&3xyz",
    "passwd": "qwerty-Secret-77",
    "db_pass": "pg-admin-4471",
    "user_pwd": "letmein-2026!",
    "passphrase": "correct horse battery staple",
    "api_key": "live_a1b2c3d4e5f6",
    "apiKey": "k-99887766554433",
    "x-api-key": "xk-55667788aabb",
    "access_token": "at.8f7e6d5c4b3a",
    "refresh_token": "rt_0a9b8c7d6e5f4",
    "id_token": "idt-77aa88bb99cc",
    "client_secret": "cs_5550001112223",
    "aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "private_key": "pk-material-0099887766",
    "session_id": "sess-4f4f4f4f4f4f",
    "Authorization": "Basic YWRhOmh1bnRlcjI=",
    "cookie": "sessionid=9a8b7c6d5e4f3a2b",
    "Set-Cookie": "remember_token=zz11yy22xx33; HttpOnly",
    "webhook_secret": "whsec_77665544332211",
    "signing_key": "sgk-0f1e2d3c4b5a",
    "otp": "913462",
    "DATABASE_PASSWORD": "Pr0d-DB-p4ss",
}
URL_SECRETS = {
    "postgres://app:Sup3rS3cretPg@db.internal:5432/shop": "Sup3rS3cretPg",
    "redis://:r3d1sP4ssw0rd@cache:6379/0": "r3d1sP4ssw0rd",
    "https://deploy:gh-d3ploy-pw@git.example.com/repo.git": "gh-d3ploy-pw",
}
BEARER = "Bearer ya29.a0AfH6SMBexampleOAuthAccessToken0123"
ALL = (
    FORMAT_SECRETS
    + [PEM_BODY]
    + [v for v in NAMED_SECRETS.values() if len(v) >= 6]
    + list(URL_SECRETS.values())
    + ["ya29.a0AfH6SMBexampleOAuthAccessToken0123"]
)


def everywhere() -> dict:
    """Every secret as an object: format secrets bare, named ones under their names, URLs, a PEM block."""
    return {
        **NAMED_SECRETS,
        "notes": " ".join(FORMAT_SECRETS),
        "dsn": list(URL_SECRETS),
        "headers": {"auth": BEARER, "extra": f"Authorization: {BEARER}"},
        "cert": {"pem": PEM},
    }


ENV_FILE = "\n".join(
    [f"{k}={v}" for k, v in NAMED_SECRETS.items() if " " not in v]
    + [f'{k}: "{v}"' for k, v in NAMED_SECRETS.items() if " " in v]
    + list(URL_SECRETS)
    + FORMAT_SECRETS
    + [PEM, f"Authorization: {BEARER}"]
)
"""Every secret as a ``.env`` file or a config dump holds them, one per line."""


def shapes() -> list:
    """Every secret of the corpus as a run's events or an import meet it: in blocks, tool inputs, results, JSON text."""
    payload = everywhere()
    return [
        payload,
        [{"type": "text", "text": ENV_FILE}],
        [{"type": "tool_use", "id": "toolu_1", "name": "deploy", "input": payload}],
        [{"type": "tool_result", "tool_use_id": "toolu_1", "content": ENV_FILE}],
        [{"type": "tool_result", "tool_use_id": "toolu_1", "content": json.dumps({"deep": [{"inner": payload}]})}],
        {"role": "user", "content": [{"type": "text", "text": f"use {s} for it"} for s in FORMAT_SECRETS]},
        {"result": ENV_FILE, "args": payload},
    ]


# Words that start redaction rules, look like secrets or change under lower-casing, and JSON's escapes: the
# common vocabulary of the property tests that compare a fast path with the walk (each adds its own).
RULE_WORDS = [
    "password",
    "api_key",
    "token",
    "tokens",
    '"key"',
    "key",
    "Bearer",
    "://",
    "@",
    "=",
    '"',
    "\\",
    "\n",
    "é",
    "😀",
    "İ",
    "\u212aey",  # the Kelvin sign lower-cases to "k": "Key"
    "scroll_down",
]
