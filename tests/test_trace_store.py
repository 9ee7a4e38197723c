"""The trace store on disk: written as it happens, survives a kill, keeps no secrets, grows linearly."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentlab as al
from agentlab import reply
from agentlab.trace import TraceWriter, TruncatedTraceWarning
from agentlab.trace.schema import SCHEMA_VERSION

from .helpers import Seen, killed_when_it_says

ROOT = Path(__file__).resolve().parent.parent


def lines_of(file: Path) -> list[dict]:
    return [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines()]


def test_every_event_is_on_disk_before_the_next_tool_runs(tmp_path):
    """A tool that reads its own run's trace file already finds the model call that asked for it."""
    runs = tmp_path / "runs"
    seen_by_tool: list[list[str]] = []

    @al.tool(mode="read")
    def peek() -> str:
        """Read the trace file of this run so far."""
        (file,) = runs.glob("*.jsonl")
        seen_by_tool.append([e["kind"] for e in lines_of(file)])
        return "peeked"

    model = al.ScriptedModel([reply(None, ("peek", {})), reply(None, ("peek", {})), reply("done")])
    result = al.run("peek twice", [peek], model=model, trace=runs, max_cost=None)
    assert isinstance(result, al.Done)
    assert seen_by_tool[0] == ["run_started", "model_request", "model_called", "tool_started"]
    assert seen_by_tool[1][-6:] == [
        "tool_finished",
        "tool_results",
        "step_finished",
        "model_request",
        "model_called",
        "tool_started",
    ]


def test_every_event_carries_run_id_step_seq_time_kind_and_schema_version(tmp_path):
    """Each line names its run, step, sequence number, seconds since start, kind and the schema version."""
    model = al.ScriptedModel([reply(None, ("echo", {"text": "hi"})), reply("done")])

    @al.tool(mode="read")
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    result = al.run("say hi", [echo], model=model, trace=tmp_path, max_cost=None)
    events = lines_of(tmp_path / f"{result.run_id}.jsonl")
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert all(e["run_id"] == result.run_id and e["v"] == SCHEMA_VERSION for e in events)
    assert all(isinstance(e["t"], float) and e["t"] >= 0 for e in events)
    assert [e["t"] for e in events] == sorted(e["t"] for e in events)
    assert [e["step"] for e in events if e["kind"] == "model_called"] == [1, 2]
    assert events[0]["kind"] == "run_started" and events[-1]["kind"] == "run_finished"


CRASH_SCRIPT = textwrap.dedent(
    """
    import sys
    import agentlab as al
    from agentlab import reply

    @al.tool(mode="read")
    def fetch(n: int) -> str:
        '''Fetch page n; page 4 waits for a line on stdin that never comes.'''
        if n == 4:
            print("blocked", flush=True)  # its tool_started line is on disk: the test may kill now
            sys.stdin.readline()
        return f"page {n} text"

    script = [reply(f"reading page {n}", ("fetch", {"n": n})) for n in range(1, 6)] + [reply("done")]
    al.run("read five pages", [fetch], model=al.ScriptedModel(script), run_id="crashme",
           max_steps=10, max_cost=None, deadline_s=None)
    """
)


def test_a_run_killed_mid_step_leaves_every_finished_step_readable(tmp_path):
    """SIGKILL a real process while its step-4 tool blocks: steps 1-3 load whole, step 4 shows the call that never
    returned.
    """
    runs = tmp_path / "runs"
    killed_when_it_says(
        b"blocked\n", CRASH_SCRIPT, why="the child never reached step 4", env={"AGENTLAB_RUNS": str(runs)}
    )

    trace = al.load_run("crashme", runs)
    assert trace.outcome == "incomplete"
    assert list(trace.steps["step"]) == [1, 2, 3, 4]
    calls = trace.calls
    assert list(calls["outcome"]) == ["ok", "ok", "ok", "unfinished"]
    assert list(calls["result_preview"][:3]) == ["page 1 text", "page 2 text", "page 3 text"]
    assert calls["args"].iloc[3] == {"n": 4}
    assert "fetch" in repr(trace.step(4)) and "no result was recorded" in repr(trace.step(4))
    assert trace.messages_at(4)[-1]["content"][0]["content"] == "page 3 text"
    assert al.load_runs(runs).runs.loc[0, "outcome"] == "incomplete"


def test_a_line_cut_short_by_a_crash_loads_with_a_warning_naming_the_file(tmp_path):
    """A half-written last line is skipped with a warning that names the file; the rest loads."""
    model = al.ScriptedModel([reply(None, ("echo", {"text": "x"})), reply("done")])
    echo = al.tool(mode="read", name="echo")(lambda text: text)
    result = al.run("q", [echo], model=model, trace=tmp_path, max_cost=None)
    file = tmp_path / f"{result.run_id}.jsonl"
    whole = file.read_text(encoding="utf-8").splitlines()
    file.write_text("\n".join(whole[:-1]) + "\n" + whole[-1][: len(whole[-1]) // 2], encoding="utf-8")

    with pytest.warns(TruncatedTraceWarning, match=str(file).replace(".", r"\.")):
        trace = al.load_run(result.run_id, tmp_path)
    assert len(trace.records) == len(whole) - 1
    assert trace.outcome == "incomplete"
    with pytest.warns(TruncatedTraceWarning, match=file.name):
        traces = al.load_runs(tmp_path)
    assert len(traces.events) == len(whole) - 1


SECRET_KEY = "sk-ant-api03-TESTONLY-" + "x7Q" * 12


def test_secrets_never_reach_a_trace_file(tmp_path, monkeypatch):
    """API keys, auth headers and secret-named arguments are redacted in every written line."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET_KEY)
    monkeypatch.setenv("SHOP_DB_PASSWORD", "correct-horse-battery")

    @al.tool(mode="write")
    def connect(user: str, password: str, api_key: str, headers: dict) -> str:
        """Connect to the shop."""
        return f"connected with {os.environ['ANTHROPIC_API_KEY']} and Authorization: Bearer abc.def.ghi123"

    @al.tool(mode="read")
    def lookup(key: str) -> str:
        """Look a key up."""
        raise al.RetryableError(f"503 from upstream (x-api-key: {SECRET_KEY})")

    args = {
        "user": "ada",
        "password": "hunter2-secret-pw",
        "api_key": "ak-live-998877",
        "headers": {"Authorization": "Bearer tok-55443322", "x-api-key": "raw-key-1234"},
    }
    model = al.ScriptedModel(
        [
            reply(None, ("connect", args)),
            reply(None, ("lookup", {"key": "order-7"})),
            reply("done"),
        ]
    )
    clock = al.FakeClock()
    result = al.run(
        "connect with password=swordfish99",
        [connect, lookup],
        model=model,
        trace=tmp_path,
        max_cost=None,
        clock=clock,
        system=f"Use key {SECRET_KEY}",
    )
    assert isinstance(result, al.Done)
    text = (tmp_path / f"{result.run_id}.jsonl").read_text(encoding="utf-8")
    for secret in (
        SECRET_KEY,
        "correct-horse-battery",
        "hunter2-secret-pw",
        "ak-live-998877",
        "tok-55443322",
        "raw-key-1234",
        "abc.def.ghi123",
        "swordfish99",
    ):
        assert secret not in text, secret
    assert "[redacted]" in text
    calls = al.load_run(result.run_id, tmp_path).calls
    assert calls["args"].iloc[0]["user"] == "ada"  # what is not secret stays readable
    assert calls["args"].iloc[1] == {"key": "order-7"}


def test_a_run_stores_each_step_once_not_the_growing_history(tmp_path):
    """Each tool result is written a fixed number of times however many steps follow it."""
    n = 30

    @al.tool(mode="read")
    def page(i: int) -> str:
        """Read page i."""
        return f"MARKER-{i:03d}-" + "z" * 50

    model = al.ScriptedModel([reply(None, ("page", {"i": i})) for i in range(n)] + [reply("done")])
    result = al.run("read", [page], model=model, trace=tmp_path, max_cost=None, max_steps=n + 1)
    text = (tmp_path / f"{result.run_id}.jsonl").read_text(encoding="utf-8")
    counts = [text.count(f"MARKER-{i:03d}-") for i in range(n)]
    assert counts == [counts[0]] * n and counts[0] <= 2, counts  # tool_finished.result + tool_results


def test_a_resumed_run_appends_to_the_same_file(tmp_path):
    """Stopped by the step limit, resumed with more steps: one file, both endings, the last one counts."""
    import asyncio

    model = al.ScriptedModel([reply(None, ("echo", {"text": str(i)})) for i in range(3)] + [reply("done")])
    echo = al.tool(mode="read", name="echo")(lambda text: text)
    writer = TraceWriter(tmp_path)
    run = al.Run("q", [echo], model=model, max_steps=2, max_cost=None, subscribers=[writer])

    async def go():
        first = await run.run()
        run.resume(max_steps=10)
        return first, await run.run()

    first, second = asyncio.run(go())
    writer.close()
    assert first.reason == "step limit" and isinstance(second, al.Done)
    trace = al.load_run(run.run_id, tmp_path)
    assert [e["reason"] for e in trace.records if e["kind"] == "run_finished"] == ["step limit", "done"]
    row = trace.runs.iloc[0]
    assert (row["outcome"], row["steps"], row["max_steps"]) == ("done", 4, 10.0)


def test_the_messages_sent_at_each_step_are_rebuilt_exactly(tmp_path):
    """messages_at(k) equals what the model received at step k, through parallel calls, errors and nudges."""

    @al.tool(mode="read")
    def search(q: str) -> str:
        """Search."""
        if q == "bad":
            raise al.ToolError("no results for 'bad'", hint="try a longer query.")
        return f"results for {q}"

    @al.tool(mode="write")
    def save(note: str) -> str:
        """Save a note."""
        return "saved"

    script = [
        reply("two at once", ("search", {"q": "a"}), ("search", {"q": "b"})),
        reply(None, ("search", {"q": "bad"})),
        reply(None, ("search", {"q": "same"})),
        reply(None, ("search", {"q": "same"})),
        reply(None, ("search", {"q": "same"})),  # the loop guard nudges this one
        reply("saving", ("save", {"note": "ünïcode ✓"})),
        reply("all done"),
    ]
    seen = Seen(lambda m, t: script[len(seen.requests) - 1])
    result = al.run(
        [{"role": "user", "content": [{"type": "text", "text": "find things"}]}],
        [search, save],
        model=al.FunctionModel(seen),
        trace=tmp_path,
        max_cost=None,
        max_steps=10,
    )
    assert isinstance(result, al.Done)
    trace = al.load_run(result.run_id, tmp_path)
    assert len(trace) == len(seen.requests) == len(script)
    for k, received in enumerate(seen.requests, 1):
        assert trace.messages_at(k) == received, k
    assert "nudged" in set(trace.calls["outcome"])
    with pytest.raises(ValueError, match="step 99 is not in run"):
        trace.messages_at(99)


def test_result_trace_finds_a_run_written_to_a_custom_folder(tmp_path):
    """result.trace works even when the run was traced to a folder other than the default."""
    elsewhere = tmp_path / "elsewhere"
    result = al.run("q", model=al.ScriptedModel([reply("hello")]), trace=elsewhere, max_cost=None)
    trace = result.trace
    assert trace.file.parent == elsewhere.resolve()
    assert trace.outcome == "done" and trace.finished["text"] == "hello"


_texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
_calls = st.lists(st.tuples(st.sampled_from(["echo", "put", "fail"]), _texts), max_size=3)
_turns = st.lists(st.tuples(st.none() | _texts.filter(bool), _calls), max_size=6)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=_turns, answer=_texts.filter(bool))
def test_any_run_is_rebuilt_exactly_from_its_trace(tmp_path_factory, turns, answer):
    """For any mix of text, parallel reads, writes and errors, messages_at(k) is what step k received
    and the frames agree with the result."""
    folder = tmp_path_factory.mktemp("runs")
    echo = al.tool(mode="read", name="echo")(lambda text: f"echo {text}")
    put = al.tool(mode="write", name="put")(lambda text: "stored")

    def fail(text: str) -> str:
        raise al.ToolError(f"cannot handle {text!r}")

    script = [reply(text, *[(name, {"text": arg}) for name, arg in calls]) for text, calls in turns if calls]
    script.append(reply(answer))
    seen = Seen(lambda m, t: script[len(seen.requests) - 1])
    result = al.run(
        "go",
        [echo, put, al.tool(mode="read", name="fail")(fail)],
        model=al.FunctionModel(seen),
        trace=folder,
        max_cost=None,
        max_steps=len(script),
        loop_nudge_at=100,
    )
    trace = al.load_run(result.run_id, folder)
    assert [trace.messages_at(k) for k in range(1, len(seen.requests) + 1)] == seen.requests
    assert len(trace.steps) == result.model_calls == len(seen.requests)
    assert trace.runs["outcome"].iloc[0] == result.outcome
    assert len(trace.calls) == sum(len(c) for _, c in turns)


def test_traces_go_to_the_folder_named_by_the_environment_unless_an_argument_says_otherwise(tmp_path, monkeypatch):
    """trace=True writes under $AGENTLAB_RUNS; trace=<folder> wins; trace=False writes nothing."""
    monkeypatch.setenv("AGENTLAB_RUNS", str(tmp_path / "from-env"))
    model = lambda: al.ScriptedModel([reply("hi")])  # noqa: E731
    by_env = al.run("q", model=model(), max_cost=None)
    by_arg = al.run("q", model=model(), max_cost=None, trace=tmp_path / "from-arg")
    untraced = al.run("q", model=model(), max_cost=None, trace=False)
    assert (tmp_path / "from-env" / f"{by_env.run_id}.jsonl").is_file()
    assert (tmp_path / "from-arg" / f"{by_arg.run_id}.jsonl").is_file()
    assert {p.stem for p in tmp_path.rglob("*.jsonl")} == {by_env.run_id, by_arg.run_id}
    assert al.load_run(by_env.run_id).outcome == "done"
    with pytest.raises(FileNotFoundError, match="trace=False writes none"):
        _ = untraced.trace


_WORDS = [
    "api",
    "key",
    "token",
    "tokens",
    "secret",
    "password",
    "passwd",
    "pwd",
    "auth",
    "oauth",
    "access",
    "session",
    "client",
    "private",
    "signing",
    "user",
    "name",
    "id",
    "input",
    "max",
    "cookie",
    "bearer",
    "signature",
    "x",
]


@settings(max_examples=300, deadline=None)
@given(
    words=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3),
    sep=st.sampled_from(["_", "-", "", "."]),
    camel=st.booleans(),
)
def test_no_secret_field_name_slips_past_the_cheap_pretest(words, sep, camel):
    """Whenever a field name counts as secret, the writer's fast substring test sends the event to redaction."""
    from agentlab.redact import Redactor, is_secret_name
    from agentlab.trace import dumps as _dumps

    name = words[0] + "".join(w.capitalize() for w in words[1:]) if camel else sep.join(words)
    if is_secret_name(name):
        line = _dumps({"kind": "tool_started", "args": {name: "s3cr3t-value"}})
        assert Redactor(env=False).needs_redaction(line), name
        assert b"s3cr3t-value" not in _dumps(Redactor(env=False).redact({"args": {name: "s3cr3t-value"}}))


def test_a_real_sdk_run_leaves_no_api_key_in_its_trace(tmp_path, monkeypatch):
    """Through the real anthropic SDK on a local server, with a retried error that echoes the auth header, the key
    never reaches the file.
    """
    from agentlab.models.anthropic import AnthropicModel
    from agentlab.testing import MessagesServer, fault

    key = "sk-ant-api03-LOCALONLY-" + "k9" * 16
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    echo = al.tool(mode="read", name="echo")(lambda text: f"echo {text}")
    script = [
        fault(529, f"overloaded (request had Authorization: Bearer {key} and x-api-key: {key})"),
        reply(None, ("echo", {"text": "hi"})),
        reply("done"),
    ]
    with MessagesServer(script) as server:
        model = AnthropicModel("claude-sonnet-4-5", client=server.client(api_key=key))
        result = al.run("say hi", [echo], model=model, trace=tmp_path, clock=al.FakeClock())
    assert isinstance(result, al.Done), result
    assert any(r.headers.get("x-api-key") == key or key in r.headers.get("authorization", "") for r in server.requests)
    text = (tmp_path / f"{result.run_id}.jsonl").read_text(encoding="utf-8")
    trace = al.load_run(result.run_id, tmp_path)
    assert [e["kind"] for e in trace.records].count("model_retry") == 1
    assert key not in text and key[:30] not in text
    assert "[redacted]" in text


def test_thinking_block_signatures_survive_redaction_so_a_history_can_be_sent_back():
    """A thinking block's signature is not a secret; other signature fields still are."""
    from agentlab.redact import Redactor

    r = Redactor(env=False)
    block = {"type": "thinking", "thinking": "let me see", "signature": "EqQBCkYIARgCIkB"}
    assert r.redact({"content": [block]}) == {"content": [block]}
    assert r.redact({"webhook": {"signature": "abc123abc123"}}) == {"webhook": {"signature": "[redacted]"}}
