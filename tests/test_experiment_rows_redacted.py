"""No secret in an experiment's rows: every path that writes a row (a tool factory that raises, a tool's fatal
error, a model that raises, a scorer that raises, a task's own fields, a config's options) leaves nothing in the
folder's bytes, in ``result.runs`` or in the rows read back."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentlab
from agentlab import FunctionModel, reply, tool

from .helpers import PRICES
from .secrets_corpus import FORMAT_SECRETS, NAMED_SECRETS, PEM, PEM_BODY, URL_SECRETS

AWS = NAMED_SECRETS["aws_secret_access_key"]
SK_ANT = FORMAT_SECRETS[0]
GITHUB = next(s for s in FORMAT_SECRETS if s.startswith("ghp_"))
URL, URL_PASSWORD = next(iter(URL_SECRETS.items()))
SECRETS = [AWS, SK_ANT, GITHUB, URL_PASSWORD, PEM_BODY]
LEAK = f"connect failed: aws_secret_access_key={AWS} key {SK_ANT} token {GITHUB} dsn {URL}\n{PEM}"
"""An error message that quotes the credentials its code held, as real ones do."""


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    if key == "fatal":
        raise agentlab.PermissionDenied(LEAK)
    return f"value of {key}"


def model(task, seed, *, deploy_token=None):
    def fn(messages, tools):
        if task.id == "model-raises":
            raise ValueError(LEAK)
        n = sum(1 for m in messages if m["role"] == "assistant")
        if n == 0:
            return reply(None, ("lookup", {"key": "fatal" if task.id == "fatal-tool" else "a"}))
        return reply("done")

    return FunctionModel(fn, name="leaky")


def tools(task):
    if task.id == "factory-raises":
        raise RuntimeError(LEAK)
    return [lookup]


def scorer(result, task):
    if task.id == "scorer-raises":
        raise RuntimeError(LEAK)
    return 1.0


PATHS = ["factory-raises", "fatal-tool", "model-raises", "scorer-raises"]


def _folder_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    tasks = [{"id": i, "input": f"task {i}", "api_key": SK_ANT, "db": URL} for i in PATHS]
    exp = agentlab.Experiment(
        tasks,
        {"a": {"prices": PRICES, "deploy_token": GITHUB}},
        tools=tools,
        model=model,
        scorer=scorer,
        folder=tmp_path_factory.mktemp("exp"),
        progress=False,
    )
    return exp, exp.run()


def test_every_path_that_writes_a_row_writes_its_error_without_the_secrets(experiment):
    exp, result = experiment
    runs = result.runs.set_index("task_id")
    # each path really wrote an error row (so the test below is not vacuous)
    assert runs.loc["factory-raises", "outcome"] == "error"
    for path in PATHS:
        assert "connect failed" in runs.loc[path, "error"], path
    text = result.runs.to_csv()
    for secret in SECRETS:
        assert secret not in text
    assert "[redacted]" in text


def test_no_secret_in_any_byte_of_the_experiment_folder(experiment):
    exp, _ = experiment
    saved = _folder_bytes(exp.folder.path)
    assert b"connect failed" in saved
    for secret in SECRETS:
        assert secret.encode() not in saved, secret[:12]


def test_rows_read_back_from_the_folder_hold_no_secret(experiment):
    exp, _ = experiment
    text = exp.result().runs.to_csv()
    assert "connect failed" in text
    for secret in SECRETS:
        assert secret not in text
