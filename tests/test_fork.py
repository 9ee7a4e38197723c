"""A process forked after agentlab ran (multiprocessing's default start on Linux) runs its own runs whole.

Threads do not survive a fork, and an event loop's epoll instance and sockets are shared with the parent. A
child that reused the parent's idle tool workers handed its sync calls to threads that do not exist there (the
run stopped at its deadline, or waited for ever); one that reused the parent's kept event loop would register
its readers in the parent's.

Each scenario runs in a fresh interpreter (``python -c``): forking the test process itself would also fork
whatever else the suite started there (a local Ray, its gRPC threads), which is not what is under test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from .helpers import ROOT

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX's")

_COMMON = textwrap.dedent(
    '''
    import asyncio, json, os, select, signal, uuid
    import agentlab as al
    from agentlab import reply

    @al.tool(mode="read")
    def look_up(n: int) -> str:
        """A sync tool: under arun() it runs on one of agentlab's worker threads."""
        return f"value {n}"

    @al.tool(mode="read")
    async def where_am_i(n: int) -> str:
        """A name for the run's event loop, given on its first use (an id could be reused at a freed address)."""
        loop = asyncio.get_running_loop()
        if not hasattr(loop, "_test_fork_name"):
            loop._test_fork_name = uuid.uuid4().hex
        return loop._test_fork_name

    def sync_tool_run():
        script = [reply(None, ("look_up", {"n": i})) for i in range(3)] + [reply("done")]
        result = asyncio.run(al.arun("q", [look_up], model=al.ScriptedModel(script), trace=False, deadline_s=20))
        return {"kind": type(result).__name__, "steps": result.steps}

    def loop_names():
        seen = []
        def model(messages, tools):
            if len(messages) > 1:
                seen.append(messages[-1]["content"][0]["content"])
            return reply(None, ("where_am_i", {"n": len(seen)})) if len(seen) < 2 else reply("done")
        result = al.run("q", [where_am_i], model=al.FunctionModel(model), trace=False, deadline_s=20)
        return {"kind": type(result).__name__, "loops": sorted(set(seen))}

    def in_a_child(fn):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(r)
                os.write(w, json.dumps(fn()).encode())
            finally:
                os._exit(0)
        os.close(w)
        ready, _, _ = select.select([r], [], [], 60)
        if not ready:
            os.kill(pid, signal.SIGKILL)
        answer = os.read(r, 65536) if ready else b'"no answer within 60 s"'
        os.waitpid(pid, 0)
        return json.loads(answer)
    '''
)


def _scenario(lines: str) -> list[Any]:
    """Run the common part and ``lines`` in a fresh interpreter; what it printed, one JSON value a line."""
    done = subprocess.run(
        [sys.executable, "-c", _COMMON + textwrap.dedent(lines)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_a_child_forked_after_sync_tools_ran_runs_its_own_sync_tools():
    """The parent's idle workers stay behind; the child starts its own and every call of its run is answered."""
    parent_before, child, parent_after = _scenario(
        """
        print(json.dumps(sync_tool_run()))  # the parent now has an idle worker
        print(json.dumps(in_a_child(sync_tool_run)))
        print(json.dumps(sync_tool_run()))
        """
    )
    assert parent_before == child == parent_after == {"kind": "Done", "steps": 4}


def test_a_child_forked_after_run_does_not_run_the_parents_event_loop():
    """``run()`` keeps its loop for the next run; a forked child makes its own, and the parent's goes on."""
    first, second, child, after = _scenario(
        """
        for fn in (loop_names, loop_names, lambda: in_a_child(loop_names), loop_names):
            print(json.dumps(fn()))
        """
    )
    assert first["kind"] == "Done" and len(first["loops"]) == 1
    assert second == first  # kept: the parent's next run is on the same loop
    assert child["kind"] == "Done" and child["loops"] != first["loops"]
    assert after == first  # the parent's kept loop still runs its runs
