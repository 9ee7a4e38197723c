"""MCP servers as tools: a real server (tests/mcp_server.py) over stdio, the official SDK client."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
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
    return [
        b["content"]
        for m in result.messages
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
    ]


def test_tools_come_with_the_servers_names_descriptions_and_schemas(trusted):
    tools = {t.name: t for t in trusted}
    assert set(tools) == {
        "pair_a",
        "pair_b",
        "append",
        "history",
        "broken",
        "slow",
        "crash",
        "record_then_die",
        "lookup_then_die",
        "garbage",
        "wrong_id",
        "half_line",
    }
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


def test_a_dropped_connection_before_a_call_is_sent_reconnects_for_the_next_call():
    """crash kills the server (a write whose outcome is then unknown: the run stops); the connection's next
    call, in a new run, is sent on a fresh server process."""
    with al.mcp_tools(SERVER) as conn:
        first = _run(conn, reply(None, ("crash", {})))
        assert isinstance(first, al.Stopped) and "outcome is unknown" in first.detail
        again = _run(conn, reply(None, ("append", {"item": "after"})))
        assert isinstance(again, al.Done) and _results(again) == ["appended after"]


def test_bad_server_arguments_are_named():
    with pytest.raises(TypeError, match="http\\(s\\) URL, a command line"):
        al.mcp_tools(42)
    with pytest.raises(ConnectionError, match="could not connect"):
        al.mcp_tools(
            [sys.executable, "-c", "import sys; sys.exit(1)"],
        )


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


@contextlib.contextmanager
def http_server(tmp_path, env=None):
    """tests/mcp_server.py over streamable HTTP on a free port; yields its URL, stops it at the end."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [*SERVER, "--http", str(port)], stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
    )
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end:  # polling a server that is starting, not timing the test
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, (tmp_path / "server.log").read_text()
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.kill()
        proc.wait(timeout=30)
        log.close()


def test_a_streamable_http_server_is_reached_by_its_url(tmp_path):
    with http_server(tmp_path) as url, al.mcp_tools(url, trusted=True) as conn:
        assert {t.name: t.mode for t in conn}["pair_a"] == "read"
        result = _run(conn, reply(None, ("pair_a", {}), ("pair_b", {})))
        assert _results(result) == ["together", "together"]


# ------------------------------------------------ issue 24: a write runs once
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_write_whose_server_dies_mid_call_is_sent_once_and_the_run_says_its_outcome_is_unknown(tmp_path, transport):
    ledger = tmp_path / "server-side.log"
    env = {"AGENTLAB_MCP_LOG": str(ledger)}
    with contextlib.ExitStack() as stack:
        if transport == "http":
            conn = stack.enter_context(al.mcp_tools(stack.enter_context(http_server(tmp_path, env)), trusted=True))
        else:
            conn = stack.enter_context(al.mcp_tools(SERVER, trusted=True, env=env))
        result = _run(
            conn,
            reply(None, ("record_then_die", {"item": "charge card"})),
            policy=al.Policy(max_attempts=5, base_delay=0.0),
            deadline_s=60,
        )
    assert ledger.read_text().splitlines() == ["write charge card"]  # reached the server once, never again
    assert isinstance(result, al.Stopped) and result.reason == "fatal"
    assert "its outcome is unknown" in result.detail and "Not sent again" in result.detail


def test_a_read_only_idempotent_tool_of_a_trusted_server_is_retried_on_a_new_connection(tmp_path):
    ledger = tmp_path / "server-side.log"
    rec = []
    with al.mcp_tools(SERVER, trusted=True, env={"AGENTLAB_MCP_LOG": str(ledger)}) as conn:
        result = _run(
            conn,
            reply(None, ("lookup_then_die", {"key": "stock"})),
            subscribers=[rec.append],
            policy=al.Policy(max_attempts=3, base_delay=0.0),
        )
    assert isinstance(result, al.Done) and _results(result) == ["stock = 42"]
    assert "the connection to the MCP server dropped" in [e.data["error"] for e in rec if e.kind == "tool_retry"][0]
    assert ledger.read_text().splitlines() == ["lookup stock", "lookup stock"]  # sent again, on a fresh server


def test_an_untrusted_servers_idempotent_hint_is_not_believed_so_nothing_is_sent_twice(tmp_path):
    ledger = tmp_path / "server-side.log"
    with al.mcp_tools(SERVER, env={"AGENTLAB_MCP_LOG": str(ledger)}) as conn:
        result = _run(conn, reply(None, ("lookup_then_die", {"key": "stock"})), policy=al.Policy(base_delay=0.0))
    assert isinstance(result, al.Stopped) and "its outcome is unknown" in result.detail
    assert ledger.read_text().splitlines() == ["lookup stock"]


@pytest.mark.parametrize(
    "tool, named",
    [
        ("garbage", "not a JSON-RPC message"),
        ("wrong_id", "answered a request that was never sent (id 987654)"),
        ("half_line", "not a JSON-RPC message"),
    ],
)
def test_malformed_json_rpc_is_named_as_a_protocol_error_without_waiting_out_the_deadline(tool, named):
    with al.mcp_tools(SERVER) as conn:
        result = _run(conn, reply(None, (tool, {})), deadline_s=120)
        assert isinstance(result, al.Stopped) and result.reason == "fatal", result  # not "deadline": still running
        assert "ProtocolError" in result.detail and "broke the protocol" in result.detail and named in result.detail
        fresh = _run(conn, reply(None, ("history", {})))  # the broken connection was closed; this is a new server
        assert isinstance(fresh, al.Done) and _results(fresh) == [""]


def _children_running(marker: str) -> list[int]:
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            status = (d / "status").read_text()
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        ppid = next((line.split()[1] for line in status.splitlines() if line.startswith("PPid:")), "")
        if ppid == str(os.getpid()) and marker in cmd and "State:\tZ" not in status:
            found.append(int(d.name))
    return found


def test_a_server_advertising_a_tool_name_the_api_refuses_is_named_and_closed():
    before = {t.ident for t in threading.enumerate()}
    with pytest.raises(ValueError, match="'has spaces!' breaks the API's rule"):
        al.mcp_tools([*SERVER, "--bad-name"])
    assert [t.name for t in threading.enumerate() if t.ident not in before] == []  # no connection thread left
    assert _children_running("--bad-name") == []  # and no server process
