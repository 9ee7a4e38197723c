"""Secrets never reach a trace file, whatever shape they arrive in (issue 14)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentlab as al
from agentlab import reply
from agentlab.errors import describe
from agentlab.redact import (
    REDACTED,
    Redactor,
    add_secret_names,
    add_secret_patterns,
)

from .secrets_corpus import ALL, BEARER, FORMAT_SECRETS, NAMED_SECRETS, PEM, URL_SECRETS, everywhere

FIXTURES = Path(__file__).parent / "fixtures" / "recorded"


def test_the_corpus_is_large_enough():
    assert len(set(ALL)) >= 40


def test_no_secret_in_any_position_reaches_the_trace_bytes(tmp_path):
    """Args, result dict, result JSON string, nested, model text and error messages: none of 40+ secrets is written."""
    payload = everywhere()

    @al.tool(mode="read")
    def fetch_config(section: str) -> dict:
        """Read the deployment config."""
        return {"config": payload}

    @al.tool(mode="read")
    def fetch_config_json(section: str) -> str:
        """Read it as JSON text."""
        return json.dumps({"section": section, "deep": [{"inner": payload}]})

    @al.tool(mode="read")
    def fetch_env(section: str) -> str:
        """Read it as an env file."""
        lines = [f"{k}={v}" for k, v in NAMED_SECRETS.items() if " " not in v]
        lines += [f'{k}: "{v}"' for k, v in NAMED_SECRETS.items() if " " in v]
        return "\n".join(lines + list(URL_SECRETS) + FORMAT_SECRETS + [PEM])

    @al.tool(mode="write")
    def login(section: str) -> str:
        """Log in (fails, quoting what it was given)."""
        raise ConnectionError(
            f"login failed for {list(URL_SECRETS)[0]} password={NAMED_SECRETS['password']} "
            f"token {FORMAT_SECRETS[0]} header Authorization: {BEARER}"
        )

    @al.tool(mode="write")
    def login2(section: str) -> str:
        """Log in again (a recoverable error that quotes a key)."""
        raise al.ToolError(f"key {FORMAT_SECRETS[3]} rejected; api_key={NAMED_SECRETS['api_key']}")

    fetch_config_kw = al.tool(mode="read", name="fetch_config_kw")(lambda section, config: "ok")
    repeat = " ".join(v for v in NAMED_SECRETS.values())
    model = al.ScriptedModel(
        [
            reply(
                f"Using {FORMAT_SECRETS[1]} and password: {NAMED_SECRETS['password']}",
                ("fetch_config_kw", {"section": "prod", "config": payload}),
                ("fetch_config_json", {"section": "prod"}),
            ),
            reply(
                None,
                ("fetch_env", {"section": "prod"}),
                ("login2", {"section": "prod"}),
                ("fetch_config", {"section": "prod"}),
            ),
            reply("the password is hunter2-ish", ("login", {"section": "prod"})),
            reply(f"Done. For the record the secrets were: {repeat} {' '.join(URL_SECRETS)} {PEM}"),
        ]
    )
    result = al.run(
        "deploy",
        [fetch_config, fetch_config_json, fetch_env, login, login2, fetch_config_kw],
        model=model,
        trace=tmp_path,
        max_cost=None,
        clock=al.FakeClock(),
    )
    data = (tmp_path / f"{result.run_id}.jsonl").read_bytes()
    text = data.decode("utf-8")
    found = [s for s in ALL if s in text or json.dumps(s)[1:-1] in text]
    assert found == []
    assert "hunter2-ish" not in text
    assert text.count(REDACTED) > 40
    trace = al.load_run(result.run_id, tmp_path)
    assert trace.calls["tool"].tolist()[:2] == ["fetch_config_kw", "fetch_config_json"]
    assert trace.calls["args"].iloc[0]["section"] == "prod"  # what is not secret stays readable


def test_an_error_message_that_quotes_a_secret_is_redacted_before_the_model_sees_it():
    """describe() is the one path from an exception to the trace and the model."""
    exc = RuntimeError("connect postgres://svc:pw-Xy7781@db/x failed; header x-api-key: raw-1234abcd")
    text = describe(exc)
    assert "pw-Xy7781" not in text and "raw-1234abcd" not in text
    assert text.startswith("RuntimeError: connect postgres://svc:") and REDACTED in text


def test_users_add_secret_names_and_patterns():
    """A company's own field names and token formats are redacted once registered."""
    r = Redactor(env=False)
    record = {"args": {"vault_ticket": "vt-0042-abcdef", "note": "ticket ACME-7f3a9c21d0 issued"}}
    assert r.redact(record) == record
    add_secret_names("vault_ticket")
    add_secret_patterns(r"ACME-[0-9a-f]{10}")
    r = Redactor(env=False)
    assert r.needs_redaction(json.dumps(record))
    assert r.redact(record) == {"args": {"vault_ticket": REDACTED, "note": f"ticket {REDACTED} issued"}}
    assert "ACME-" not in describe(ValueError("bad ticket ACME-7f3a9c21d0"))
    assert Redactor(env=False, names=["shopPin"]).redact({"shop_pin": "4242-9"}) == {"shop_pin": REDACTED}
    assert Redactor(env=False).needs_redaction(json.dumps({"args": {"vault_ticket": "vt-0042"}}))  # the name alone


def test_a_user_added_name_alone_keeps_its_value_out_of_a_real_trace(tmp_path):
    add_secret_names("vault_ticket")
    lookup = al.tool(mode="read", name="lookup")(lambda vault_ticket: "ok")
    model = al.ScriptedModel([reply(None, ("lookup", {"vault_ticket": "vt-0042-abcdef"})), reply("done")])
    result = al.run("q", [lookup], model=model, trace=tmp_path, max_cost=None)
    assert "vt-0042-abcdef" not in (tmp_path / f"{result.run_id}.jsonl").read_text()


def test_redaction_keeps_ordinary_data_readable():
    """Token counts, a bare key, ids and prose are not secrets."""
    r = Redactor(env=False)
    record = {
        "usage": {"input_tokens": 12, "max_tokens": 1024},
        "key": "order-7",
        "text": "The password reset page",
        "url": "https://example.com/a@b",
        "email": "ada@example.com",
        "keys": ["a", "b"],
    }
    assert r.redact(record) == record


def test_a_bad_user_pattern_is_a_clear_error():
    with pytest.raises(ValueError, match="not a valid regular expression"):
        add_secret_patterns("(unclosed")
    with pytest.raises(ValueError, match="does not match empty text"):
        add_secret_patterns("x*")


# ------------------------------------------------------------ streamed fragments (issue 24)
STREAM_KEY = "sk-ant-api03-StreamSplitK3yAbCdEfGhIjKlMnOpQrStUvWx-0123456789"
STREAM_PASSWORD = "Zx9-Qw7!plm"
STREAM_TEXT = (
    f"Connecting now.\nUse the key {STREAM_KEY} for the API, and password: {STREAM_PASSWORD} for the db; "
    "the dsn is postgres://app:Pg-Str3am-77@db:5432/x and then we are done."
)
STREAM_INPUT = json.dumps({"host": "db", "password": STREAM_PASSWORD, "note": f"key {STREAM_KEY}"})
STREAM_SECRETS = [STREAM_KEY, STREAM_PASSWORD, "Pg-Str3am-77"]


def _delta_lines(tmp_path, run_id, pieces, kind="text"):
    """Feed ``pieces`` through a real TraceWriter(deltas=True) as one block, then the assembled reply; the lines."""
    from agentlab.events import Event
    from agentlab.trace import TraceWriter

    writer = TraceWriter(tmp_path, deltas=True, redactor=Redactor(env=False))
    seq = 0
    for p in pieces:
        seq += 1
        writer(Event("model_delta", run_id, 1, seq, 0.1 * seq, {"index": 0, "type": kind, "text": p}))
    writer(Event("model_called", run_id, 1, seq + 1, 9.0, {"content": [], "stop_reason": "end_turn"}))
    writer.close()
    return [json.loads(x) for x in (tmp_path / f"{run_id}.jsonl").read_text().splitlines()]


def _leaks(lines):
    joined = "".join(r.get("text") or "" for r in lines if r["kind"] == "model_delta")
    raw = json.dumps(lines)
    return [s for s in STREAM_SECRETS if s in joined or s in raw or json.dumps(s)[1:-1] in raw], joined


@pytest.mark.parametrize("kind, text", [("text", STREAM_TEXT), ("tool_input", STREAM_INPUT)])
def test_a_secret_split_across_two_fragments_at_every_position_never_reaches_the_file(tmp_path, kind, text):
    """One line per fragment, in order; joined they are the redacted block; no split rebuilds a secret."""
    for cut in range(1, len(text)):
        lines = _delta_lines(tmp_path, f"{kind}-{cut}", [text[:cut], text[cut:]], kind)
        assert [r["kind"] for r in lines] == ["model_delta", "model_delta", "model_called"]
        leaks, joined = _leaks(lines)
        assert leaks == [], (cut, joined)
        assert joined.count(REDACTED) >= 2
        if kind == "text":
            assert joined.startswith("Connecting now.\nUse the key ") and joined.endswith(" and then we are done.")
        else:
            assert json.loads(joined)["host"] == "db"


def test_a_secret_in_many_small_fragments_is_held_back_and_the_rest_flows(tmp_path):
    """Three-character fragments: text before the secrets is released as it comes, the tail once the block ends."""
    from agentlab.redact import StreamRedactor

    pieces = [STREAM_TEXT[i : i + 3] for i in range(0, len(STREAM_TEXT), 3)]
    lines = _delta_lines(tmp_path, "small", pieces)
    leaks, joined = _leaks(lines)
    assert leaks == [] and len([r for r in lines if r["kind"] == "model_delta"]) == len(pieces)
    stream = StreamRedactor(Redactor(env=False))
    prose = "A plain paragraph with nothing to hide, " * 40
    released = "".join(stream.feed("b", prose[i : i + 7]) for i in range(0, len(prose), 7))
    assert len(released) > len(prose) - 40 and prose.startswith(released)  # only the last word waits
    assert released + stream.flush("b") == prose


def test_a_streamed_run_with_a_key_and_a_password_keeps_them_out_of_the_delta_lines(tmp_path):
    """The real SDK streaming from the local server in 3-character fragments, text and tool input."""
    from agentlab.models.anthropic import AnthropicModel
    from agentlab.testing import MessagesServer, streamed
    from agentlab.trace import TraceWriter

    from .helpers import PRICES

    login = al.tool(mode="read", name="login")(lambda host, password, note: "ok")
    first = {
        "role": "assistant",
        "stop_reason": "tool_use",
        "content": [
            {"type": "text", "text": STREAM_TEXT},
            {"type": "tool_use", "id": "toolu_01", "name": "login", "input": json.loads(STREAM_INPUT)},
        ],
    }
    writer = TraceWriter(tmp_path, deltas=True)
    with MessagesServer(
        [streamed(first, chunk=3), streamed(reply(f"Logged in with {STREAM_PASSWORD}."), chunk=3)]
    ) as server:
        result = al.run(
            "log in",
            [login],
            model=AnthropicModel(client=server.client()),
            subscribers=[writer],
            clock=al.FakeClock(),
            trace=False,
            prices=PRICES,
        )
    writer.close()
    assert isinstance(result, al.Done), result
    lines = [json.loads(x) for x in (tmp_path / f"{result.run_id}.jsonl").read_text().splitlines()]
    deltas = [r for r in lines if r["kind"] == "model_delta"]
    assert len(deltas) > 60
    leaks, _ = _leaks(lines)
    assert leaks == []
    tool_input = "".join(r["text"] for r in deltas if r["type"] == "tool_input")
    assert json.loads(tool_input)["password"] == REDACTED


# ------------------------------------------------------------ deep nesting (issue 24)
def _deep(depth: int, leaf: str = '"x"') -> str:
    return '{"a":' * depth + leaf + "}" * depth


def test_a_tool_result_nested_1000_deep_keeps_its_tool_finished_in_the_trace(tmp_path):
    """JSON too deep for the parser is redacted as text: the run ends Done and the trace has the result."""
    deep = _deep(1000, '"password=Zq7-deep-Secret"')
    dig = al.tool(mode="read", name="dig")(lambda where: deep)
    model = al.ScriptedModel([reply(None, ("dig", {"where": "here"})), reply("done")])
    result = al.run("dig", [dig], model=model, trace=tmp_path, max_cost=None, clock=al.FakeClock())
    assert isinstance(result, al.Done), result
    trace = al.load_run(result.run_id, tmp_path)
    finished = [e for e in trace.records if e["kind"] == "tool_finished"]
    assert len(finished) == 1 and finished[0]["result"].startswith('{"a":{"a":')
    assert "Zq7-deep-Secret" not in (tmp_path / f"{result.run_id}.jsonl").read_text()


def test_agentlab_import_of_a_tool_input_nested_1000_deep_does_not_crash(tmp_path):
    """A Claude Code call whose input nests 1,000 levels: imported, readable, its password redacted."""
    import io

    from agentlab.cli import main

    src = (FIXTURES / "claude_code" / "tool_heavy.jsonl").read_text().splitlines()
    lines, done = [], False
    for line in src:
        d = json.loads(line)
        content = (d.get("message") or {}).get("content")
        if not done and d.get("type") == "assistant" and isinstance(content, list):
            for b in content:
                if b.get("type") == "tool_use":
                    b["input"] = {"nested": "@DEEP@", "password": "Zq7-deep-Secret"}
                    done = True
                    break
            line = json.dumps(d).replace('"@DEEP@"', _deep(1000))
        lines.append(line)
    session = tmp_path / "deep.jsonl"
    session.write_text("\n".join(lines) + "\n")
    out, err = io.StringIO(), io.StringIO()
    assert main(["import", str(session), "--out", str(tmp_path / "runs")], out=out, err=err) == 0, err.getvalue()
    text = (tmp_path / "runs" / "deep.jsonl").read_text()
    assert "Zq7-deep-Secret" not in text
    trace = al.load_run("deep", tmp_path / "runs")
    args = [a for a in trace.calls["args"] if isinstance(a, dict) and "nested" in a]
    assert len(args) == 1 and args[0]["password"] == REDACTED
    flat = json.dumps(args[0]["nested"]).replace('\\"', '"')  # levels past the writer's depth are kept as JSON text
    assert flat.count('"a"') == 1000


# ------------------------------------------------------------ the panel's saved widget state (issue 24)
def test_the_panels_saved_widget_state_holds_no_streamed_key_or_password(tmp_path):
    """A real panel over a streamed run (the SDK, 3-character fragments): the widget state a notebook saves,
    taken at every event and at the end, holds neither the key nor the password; ordinary text stays."""
    import ipywidgets

    from agentlab.models.anthropic import AnthropicModel
    from agentlab.testing import MessagesServer, streamed

    from .helpers import PRICES

    login = al.tool(mode="read", name="login")(lambda host, password, note: f"logged in; session token {STREAM_KEY}")
    first = {
        "role": "assistant",
        "stop_reason": "tool_use",
        "content": [
            {"type": "text", "text": STREAM_TEXT},
            {"type": "tool_use", "id": "toolu_01", "name": "login", "input": json.loads(STREAM_INPUT)},
        ],
    }
    final = reply(f"Logged in with password {STREAM_PASSWORD} and key {STREAM_KEY}.")
    from ipywidgets.widgets.widget import _instances  # every live widget, as a notebook's saved state holds them

    states: list[str] = []
    before = set(_instances)  # widgets other tests left alive are theirs: only this run's are serialised

    def saved_state() -> str:
        made_here = [w for key, w in list(_instances.items()) if key not in before]
        return json.dumps(ipywidgets.Widget.get_manager_state(drop_defaults=False, widgets=made_here))

    def snapshot(event):
        if event.kind in ("model_delta", "model_called", "tool_finished", "run_finished"):
            states.append(saved_state())

    with MessagesServer([streamed(first, chunk=3), streamed(final, chunk=3)]) as server:
        lab = al.Lab(
            "log in to the db",
            [login],
            model=AnthropicModel(client=server.client()),
            trace=tmp_path,
            refresh_s=0,
            subscribers=[snapshot],
            clock=al.FakeClock(),
            prices=PRICES,
        )
        result = lab.run()
    assert isinstance(result, al.Done), result
    lab.panel.render()
    states.append(saved_state())
    assert len(states) > 60
    for saved in states:
        assert not [s for s in STREAM_SECRETS if s in saved or json.dumps(s)[1:-1] in saved]
    assert "Connecting now." in states[-1] and "and then we are done." in states[-1]
    lab.close()


# ------------------------------------------------------------ precision (issue 26)
CORPUS = Path(__file__).parent / "fixtures" / "redaction" / "precision.jsonl"


def test_real_agent_records_pass_through_redaction_unchanged():
    """3,000+ pieces of real, secret-free agent content (code, shell output, paths, auth code): nothing redacted."""
    lines = [json.loads(x) for x in CORPUS.read_text(encoding="utf-8").splitlines()]
    assert len(lines) >= 3000
    base, runs = Redactor(env=False), {}
    changed = []
    for d in lines:
        r = runs.setdefault(d["source"], base.for_run())  # one redactor per recorded run, as an import does
        if r.redact(d["value"]) != d["value"]:
            changed.append((d["source"], json.dumps(d["value"])[:120]))
    assert changed == []
    assert not any(r.learned for r in runs.values())


def test_a_secret_word_before_an_identifier_learns_nothing_and_corrupts_nothing():
    """SWE-agent's ``signature: scroll_down`` and ``self.cookies = cookies`` leave every later word alone."""
    r = Redactor(env=False)
    docs = "scroll_down:\n  docstring: moves the window down\n  signature: scroll_down\n"
    code = "def __init__(self, cookies):\n    self.cookies = cookies\n    token = self.get_token()\n"
    assert r.redact(docs) == docs and r.redact(code) == code
    assert r.redact({"next": "call scroll_down, then read cookies"}) == {"next": "call scroll_down, then read cookies"}
    assert r.learned == frozenset()
    # a value that looks secret is still removed, learned, and removed where it is repeated
    assert (
        r.redact("password = 'Tr0ub4dor&3xyz'\nlater: Tr0ub4dor&3xyz") == f"password = '{REDACTED}'\nlater: {REDACTED}"
    )


def test_an_environment_variable_counts_only_when_its_name_and_value_look_secret():
    """PWD is never a secret; SSH_AUTH_SOCK is a path; GITHUB_TOKEN and DB_PASSWORD values are."""
    env = {
        "PWD": "/tmp/proj",
        "OLDPWD": "/tmp",
        "SSH_AUTH_SOCK": "/tmp/ssh-XXXX/agent.12",
        "AUTH_MODE": "oauth",
        "GITHUB_TOKEN": "ghp_R4nd0mT0k3nV4lu3F0rT3st1ngOnly12345",
        "DB_PASSWORD": "Pr0d-DB-p4ss",
        "HOME": "/root",
    }
    r = Redactor(env=env)
    assert r.redact({"file_path": "/tmp/proj/src/a.py"}) == {"file_path": "/tmp/proj/src/a.py"}
    assert r.redact("auth is oauth via /tmp/ssh-XXXX/agent.12") == "auth is oauth via /tmp/ssh-XXXX/agent.12"
    assert r.redact("connect with Pr0d-DB-p4ss") == f"connect with {REDACTED}"
    assert set(r.secrets) == {"ghp_R4nd0mT0k3nV4lu3F0rT3st1ngOnly12345", "Pr0d-DB-p4ss"}


def test_values_learned_in_one_run_apply_to_that_run_only(tmp_path):
    """An import of many sessions: each run's redactor starts empty, so the last run costs what the first did."""
    src = (FIXTURES / "claude_code" / "tool_heavy.jsonl").read_text().splitlines()
    folder = tmp_path / "sessions"
    folder.mkdir()

    def own_copy(line: str, i: int) -> str:  # a session of its own: ids the importer will not take for copies
        d = json.loads(line.replace("d6e0bada-1959-4eec-a9d2-0bfade768d8f", f"00000000-0000-4000-8000-{i:012d}"))
        for key in ("uuid", "parentUuid"):
            if d.get(key):
                d[key] = f"{d[key][:-4]}{i:04d}"
        if isinstance(d.get("message"), dict) and d["message"].get("id"):
            d["message"]["id"] = f"{d['message']['id']}_{i:02d}"
        if d.get("requestId"):  # one API call is one request: a copy with the same id is the same call
            d["requestId"] = f"{d['requestId']}_{i:02d}"
        return json.dumps(d, separators=(",", ":"))

    for i in range(30):  # each session types its own password into a tool call
        lines = [own_copy(x, i) for x in src if x.strip()]
        first_user = next(k for k, x in enumerate(lines) if '"type":"user"' in x)
        d = json.loads(lines[first_user])
        d["message"]["content"] = f"log in with password: Zq{i:02d}-pw-Secret then list the files"
        lines[first_user] = json.dumps(d)
        (folder / f"s{i:02d}.jsonl").write_text("\n".join(lines) + "\n")
    shared = Redactor(env=False)
    traces = al.load_recorded(folder, redactor=shared)
    text = json.dumps([t.records for t in traces])
    assert len(traces) == 30 and not any(f"Zq{i:02d}-pw-Secret" in text for i in range(30))
    assert text.count("password: [redacted]") >= 30  # the task, and the history it starts
    assert shared.learned == frozenset()  # the caller's redactor learned nothing: every run had its own


# ------------------------------------------------------------ cost (issue 24)
ADVERSARIAL = {
    "hex": lambda n: "0123456789abcdef" * (n // 16),
    "a": lambda n: "a" * n,
    "url schemes": lambda n: "://" * (n // 3),
    "alphanumeric run, then a scheme": lambda n: "x" * n + "://a:b@c",
    "key=": lambda n: "key=" * (n // 4),
    "api_key=": lambda n: "api_key=" * (n // 8),
    "password is": lambda n: "password is " * (n // 12),
    "token ": lambda n: "token " * (n // 6),
    "PEM begins": lambda n: "-----BEGIN RSA PRIVATE KEY-----\n" * (n // 32),
    "sk-": lambda n: "sk-" * (n // 3),
    "signatures after a thinking block": lambda n: '"thinking" ' + "signature=ab12cd34 " * (n // 19),
    "deep list": lambda n: "[" * (n // 2) + "]" * (n // 2),
    "deep object": lambda n: '{"password":' * (n // 12) + '"x"' + "}" * (n // 12),
}


@pytest.mark.parametrize("shape", list(ADVERSARIAL))
def test_redaction_time_grows_linearly_on_adversarial_text(shape):
    """4x the text takes < 8x the CPU time (+20 ms of slack for noise on tiny figures); quadratic would be 16x.

    CPU time of this process, not wall time: other processes on a loaded machine do not count."""
    import time

    make = ADVERSARIAL[shape]
    small, large = make(50_000), make(200_000)

    def seconds(text):
        r = Redactor(env=False)
        t0 = time.process_time()
        r.redact(text)
        return time.process_time() - t0

    t_small, t_large = seconds(small), seconds(large)
    for _ in range(4):  # caches and frequency still vary: measure again before calling it superlinear
        if t_large < 8 * t_small + 0.02:
            break
        t_small, t_large = min(t_small, seconds(small)), min(t_large, seconds(large))
    assert t_large < 8 * t_small + 0.02, (shape, t_small, t_large)


_PIECES = [
    "Connecting",
    "now.",
    "\n",
    "the",
    "db",
    "is",
    "up;",
    "password:",
    "api_key=",
    "token",
    "Bearer",
    "value",
    "self.cookies = cookies",
    "http://",
    "@host",
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----",
]
_SECRETS = [STREAM_KEY, STREAM_PASSWORD, "postgres://app:Pg-Str3am-77@db/x", "ghp_R4nd0mT0k3nV4lu3F0rT3st1ngOnly12345"]


@settings(max_examples=100, deadline=None)
@given(
    words=st.lists(st.sampled_from(_PIECES + _SECRETS), min_size=1, max_size=40),
    seps=st.lists(st.sampled_from([" ", "\n", "  ", ""]), min_size=40, max_size=40),
    cuts=st.lists(st.integers(min_value=1, max_value=2000), max_size=12),
)
def test_no_split_of_any_text_rebuilds_a_secret_that_its_whole_text_hides(words, seps, cuts):
    """Random text, random fragments: whatever redacting the whole block hides, the released fragments hide too;
    text with nothing to hide comes out unchanged."""
    from agentlab.redact import StreamRedactor

    text = "".join(w + s for w, s in zip(words, seps[: len(words)], strict=True))
    points = sorted({c % len(text) for c in cuts if c % len(text)})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    whole = Redactor(env=False).redact_text(text)
    stream = StreamRedactor(Redactor(env=False))
    released = "".join(stream.feed("b", p) for p in pieces) + stream.flush("b")
    hidden = [s for s in _SECRETS + ["Pg-Str3am-77"] if s in text and s not in whole]
    assert [s for s in hidden if s in released] == []
    if whole == text:
        assert released == text


def test_a_writer_serving_many_runs_keeps_each_runs_learned_values_to_that_run(tmp_path):
    """Three runs through one TraceWriter: each repeats its own password (removed), none inherits another's."""
    from agentlab.trace import TraceWriter

    writer = TraceWriter(tmp_path)
    login = al.tool(mode="read", name="login")(lambda password: "ok")
    ids = []
    for i in range(3):
        pw = f"Zq{i}-run-Secret"
        model = al.ScriptedModel([reply(None, ("login", {"password": pw})), reply(f"I typed {pw} as asked.")])
        ids.append(al.run("log in", [login], model=model, trace=writer, max_cost=None, clock=al.FakeClock()).run_id)
    writer.close()
    for i, run_id in enumerate(ids):
        assert f"Zq{i}-run-Secret" not in (tmp_path / f"{run_id}.jsonl").read_text()
        assert writer.redactor_for(run_id).learned == {f"Zq{i}-run-Secret"}
    assert writer.redactor.learned == frozenset()


def test_the_messages_api_adapter_scrubs_errors_with_the_same_rules_as_the_trace():
    """One owner for scrubbing (issue 23): an API error quoting any credential, not only the client's key, is clean."""
    from agentlab.models.anthropic import api_error

    body = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": f"bad header x-api-key: {FORMAT_SECRETS[3]} from postgres://app:Sup3rS3cretPg@db/x, key "
            "own-key-5f3a9c7e",
        },
    }
    text = str(api_error(400, {"request-id": "req_1"}, body, secrets=("own-key-5f3a9c7e",)))
    assert FORMAT_SECRETS[3] not in text and "Sup3rS3cretPg" not in text and "own-key-5f3a9c7e" not in text
    assert text.startswith("400 invalid_request_error: bad header x-api-key: ") and "req_1" in text
    assert describe(RuntimeError(f"login with {FORMAT_SECRETS[3]}")) == f"RuntimeError: login with {REDACTED}"
