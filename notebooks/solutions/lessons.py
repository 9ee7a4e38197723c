"""One solution to each exercise of lessons 01-07 (and a capstone loop): read these after trying.

Each function is what the exercise cell asks for; ``agentlab.scenarios.exercises``
grades it (tests/test_exercises.py checks that every one passes, and that every
notebook's unchanged placeholder does not).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import agentlab as al
from agentlab.models.base import ModelRequest
from agentlab.scenarios import scoreboard as sb


# --------------------------------------------------------------------------- 01: the bare loop
async def bare_loop(setup: Any) -> str:
    """Notebook 1's loop with its step limit read from the scenario, returning how it ended."""
    functions, definitions = {t.name: t.fn for t in setup.tools}, [t.definition() for t in setup.tools]
    messages: list[dict[str, Any]] = [{"role": "user", "content": setup.task}]
    for _ in range(setup.options["max_steps"]):
        reply = await setup.model.complete(ModelRequest(None, messages, definitions, max_tokens=1024))
        messages.append({"role": "assistant", "content": reply["content"]})
        calls = [b for b in reply["content"] if b["type"] == "tool_use"]
        if not calls:
            return "done"
        results = []
        for c in calls:
            try:
                out, failed = json.dumps(functions[c["name"]](**c["input"]), default=str), False
            except Exception as e:  # noqa: BLE001 - the bare loop hands every failure back
                out, failed = (e.for_model() if isinstance(e, al.ToolError) else f"{type(e).__name__}: {e}"), True
            results.append({"type": "tool_result", "tool_use_id": c["id"], "content": out, "is_error": failed})
        messages.append({"role": "user", "content": results})
    return "step limit"


# --------------------------------------------------------------------------- 02: predictions
BUDGET_PREDICTIONS = {
    (0.05, "hard"): ("budget", 3),  # stops before the call that could pass $0.05
    (0.05, "after"): ("budget", 4),  # notices only once it is over
    (0.20, "hard"): ("budget", 7),
}


# --------------------------------------------------------------------------- 03: three kinds
def lookup(kind: str) -> str:
    if kind == "missing":
        raise al.ToolError("No order 1402.", hint="list the customer's orders with list_orders(customer_id)")
    if kind == "busy":
        raise al.RetryableError("503 from the carrier API")
    if kind == "forbidden":
        raise al.PermissionDenied("refund_order needs role 'billing'")
    if kind == "ok":
        return "order 1042: delivered"
    raise al.ToolError(f"no kind {kind!r}", hint="use one of: missing, busy, forbidden, ok")


# --------------------------------------------------------------------------- 04: repeating()
def repeating(calls: list[tuple[str, dict[str, Any]]]) -> bool:
    if not calls:
        return False
    key = lambda name, args: json.dumps([name, args], sort_keys=True)  # noqa: E731
    counts = Counter(key(n, a) for n, a in calls)
    return counts[key(*calls[-1])] >= 3


# --------------------------------------------------------------------------- 05: a dispatcher
async def dispatch(calls: list[dict[str, Any]], tools: dict[str, Any]) -> list[Any]:
    results: list[Any] = []
    reads: list[dict[str, Any]] = []
    for call in [*calls, None]:
        if call is not None and tools[call["name"]].mode == "read":
            reads.append(call)
            continue
        results += await asyncio.gather(*(tools[r["name"]](**r["input"]) for r in reads))
        reads = []
        if call is not None:
            results.append(await tools[call["name"]](**call["input"]))  # a write runs alone, in its turn
    return results


# --------------------------------------------------------------------------- 06: suspects
def suspects(runs: Any) -> dict[str, int]:
    failed_writes = runs.calls[runs.calls["is_error"] & runs.calls["mode"].eq("write")]
    done = runs.runs[runs.runs["outcome"].eq("done")]["run_id"]
    return failed_writes[failed_writes["run_id"].isin(done)].groupby("run_id")["step"].min().to_dict()


# --------------------------------------------------------------------------- 07: reserve first
def can_afford(spent: float, max_cost: float | None, input_tokens: int, max_tokens: int, prices: Any) -> bool:
    if max_cost is None:
        return True
    worst = (input_tokens * prices.input + max_tokens * prices.output) / 1e6
    return spent + worst <= max_cost


# --------------------------------------------------------------------------- 10: the capstone
async def capstone_loop(setup: Any) -> str:
    """Every decision of the course: a run of agentlab's own engine under the scenario's budgets, fatal denials."""
    return await sb.agentlab_loop(policy=al.Policy())(setup)


__all__ = [
    "BUDGET_PREDICTIONS",
    "bare_loop",
    "can_afford",
    "capstone_loop",
    "dispatch",
    "lookup",
    "repeating",
    "suspects",
]
