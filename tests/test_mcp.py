"""MCP servers as tools: a real server (tests/mcp_server.py) over stdio, the official SDK client."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import agentlab as al
from agentlab import reply

pytest.importorskip("mcp", reason="the mcp extra is not installed: pip install 'agentlab-loop[mcp]'")

SERVER = [sys.executable, str(Path(__file__).with_name("mcp_server.py"))]


@pytest.fixture(scope="module")
def trusted():
    with al.mcp_tools(SERVER, trusted=True) as conn:
        yield conn


def _run(tools, *turns, **options):
    model = al.ScriptedModel([*turns, reply("done")])
    options.setdefault("trace", False)
    return al.run("use the server", tools, model=model, **options)


def _results(result):
    return [b["content"] for m in result.messages if m["role"] == "user" and isinstance(m["content"], list)
            for b in m["content"]]


def test_tools_come_with_the_servers_names_descriptions_and_schemas(trusted):
    tools = {t.name: t for t in trusted}
    assert set(tools) == {"pair_a", "pair_b", "append", "history", "broken", "slow", "crash"}
    assert tools["append"].description == "Append an item to the log (a write)."
    assert tools["append"].input_schema["properties"]["item"]["type"] == "string"
    assert tools["append"].input_schema["required"] == ["item"]
    assert "title" not in tools["append"].input_schema


def test_read_only_hints_count_only_for_a_trusted_server(trusted):
    assert {t.name: t.mode for t in trusted}["pair_a"] == "read"
    assert {t.name: t.mode for t in trusted}["append"] == "write"
    with al.mcp_tools(SERVER) as untrusted:
        assert {t.mode for t in untrusted} == {"write"}


def test_trusted_reads_run_concurrently_on_the_server(trusted):
    result = _run(trusted, reply(None, ("pair_a", {}), ("pair_b", {})))
    assert isinstance(result, al.Done)
    assert _results(result) == ["together", "together"]


def test_writes_run_one_at_a_time_in_order(trusted):
    result = _run(trusted, reply(None, ("append", {"item": "x"}), ("append", {"item": "y"}), ("history", {})))
    assert isinstance(result, al.Done)
    assert _results(result)[-1].endswith("start x, end x, start y, end y")


def test_a_tool_error_reaches_the_model_with_the_servers_text(trusted):
    rec = []
    result = _run(trusted, reply(None, ("broken", {"order_id": 7})), subscribers=[rec.append])
    assert isinstance(result, al.Done)
    (finished,) = [e for e in rec if e.kind == "tool_finished"]
    assert finished.data["outcome"] == "recoverable"
    assert "order 7 does not exist; list orders first" in _results(result)[0]


def test_a_tool_the_server_does_not_know_stops_the_run(trusted):
    ghost = al.tools.SchemaTool(lambda: None, name="ghost", description="gone", input_schema={})
    ghost.fn = lambda: None
    ghost.is_async = True

    async def call_ghost(**kwargs):
        return await trusted.call("ghost", kwargs)

    ghost.fn = call_ghost
    result = _run([ghost], reply(None, ("ghost", {})))
    assert isinstance(result, al.Stopped) and result.reason == "fatal"
    assert "does not know a tool named 'ghost'" in result.detail


def test_the_deadline_cuts_a_slow_server_call_and_the_connection_lives_on(trusted):
    result = _run(trusted, reply(None, ("slow", {})), deadline_s=0.5)
    assert isinstance(result, al.Stopped) and result.reason == "deadline"
    assert "slow" in result.detail
    again = _run(trusted, reply(None, ("history", {})))
    assert isinstance(again, al.Done)


def test_a_dropped_connection_is_retried_on_a_new_connection():
    with al.mcp_tools(SERVER) as conn:
        rec = []
        result = _run(conn, reply(None, ("crash", {})), reply(None, ("append", {"item": "after"})),
                      subscribers=[rec.append], policy=al.Policy(max_attempts=2, base_delay=0.0), clock=al.FakeClock())
        retries = [e for e in rec if e.kind == "tool_retry"]
        assert retries and "dropped" in retries[0].data["error"]
        # crash kills the server again on the retry: the model hears it gave up, then the
        # next call reconnects to a fresh server process.
        assert isinstance(result, al.Done)
        assert _results(result)[1] == "appended after"


def test_bad_server_arguments_are_named():
    with pytest.raises(TypeError, match="http\\(s\\) URL, a command line"):
        al.mcp_tools(42)
    with pytest.raises(ConnectionError, match="could not connect"):
        al.mcp_tools([sys.executable, "-c", "import sys; sys.exit(1)"], )


def test_a_connection_not_held_in_a_with_block_closes_with_its_run_and_reopens_for_the_next():
    conn = al.mcp_tools(SERVER)
    try:
        assert conn.is_open
        first = _run(conn, reply(None, ("append", {"item": "one"})))
        assert isinstance(first, al.Done) and not conn.is_open  # the run's loop ended, so did the server
        second = _run(conn, reply(None, ("history", {})))
        assert isinstance(second, al.Done) and _results(second) == [""]  # a fresh server: an empty log
        assert not conn.is_open
    finally:
        conn.close()


def test_a_connection_held_in_a_with_block_serves_runs_one_after_another(trusted):
    _run(trusted, reply(None, ("append", {"item": "kept"})))
    assert trusted.is_open
    later = _run(trusted, reply(None, ("history", {})))
    assert "end kept" in _results(later)[0]  # the same server process: its log remembers


def test_a_streamable_http_server_is_reached_by_its_url(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([*SERVER, "--http", str(port)], stdout=log, stderr=subprocess.STDOUT)
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end:  # polling a server that is starting, not timing the test
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, (tmp_path / "server.log").read_text()
                time.sleep(0.1)
        with al.mcp_tools(f"http://127.0.0.1:{port}/mcp", trusted=True) as conn:
            assert {t.name: t.mode for t in conn}["pair_a"] == "read"
            result = _run(conn, reply(None, ("pair_a", {}), ("pair_b", {})))
            assert _results(result) == ["together", "together"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
