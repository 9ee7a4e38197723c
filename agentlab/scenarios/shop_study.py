"""A shipped offline experiment on the shop: 12 questions × 5 configurations.

The offline analyst model answers support questions with the shop tools:
one lookup for an order's status, two for a customer's city, three for a
late delivery. What it costs and how it ends depends on the configuration,
the way the article says a real model's would:

- ``cache=True`` reports prompt-cache reads: the first call writes the
  prefix (dearer), later calls read it (much cheaper), so long runs save;
- a small ``max_tokens`` cuts its longer answers off before the verdict,
  which comes last (stop "max_tokens", scored wrong);
- a tight ``max_cost`` stops the three-lookup questions the loose one
  finishes; ``cost_guard="after"`` lets them overshoot the limit first.

Its wording (and so its token counts) varies with the cell's seed, so
repeats differ a little and a rerun is identical.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any

from ..experiments.experiment import Experiment
from ..experiments.tasks import Task
from ..messages import estimate_tokens
from ..models.base import ModelRequest
from ..models.offline import FunctionModel, reply
from ..shop import Shop
from .reading import History

POLICY = " ".join(
    f"Rule {i}: " + s
    for i, s in enumerate(
        [
            "answer from the shop's records, never from memory.",
            "look an order up before saying anything about it.",
            "name the customer's city exactly as the records spell it.",
            "when a delivery was late, say by how many days and why.",
            "keep answers short and plain; no apologies for the records.",
            "never change an order while answering a question about it.",
        ]
        * 12,
        1,
    )
)
"""The support policy every run is sent as its system prompt (~1,000 tokens: the cacheable prefix)."""

ORDERS = [1001, 1010, 1042, 1077, 1100, 1120, 1033, 1150, 1188, 1205, 1222, 1240]


def shop_tasks(shop: Shop | None = None) -> list[Task]:
    """Twelve questions with their right answers, read from the shipped shop data."""
    shop = shop or Shop()
    out = []
    for n, oid in enumerate(ORDERS):
        row = shop.query(
            "SELECT o.status, c.city, s.delivered_on, s.promised_on FROM orders o JOIN customers c ON c.id = "
            "o.customer_id "
            "LEFT JOIN shipments s ON s.order_id = o.id WHERE o.id = ?",
            (oid,),
        )[0]
        kind = ("status", "city", "late")[n % 3]
        if kind == "status":
            out.append(
                Task(
                    f"status-{oid}", f"What is the status of order {oid}?", row["status"], {"kind": kind, "lookups": 1}
                )
            )
        elif kind == "city":
            out.append(
                Task(
                    f"city-{oid}",
                    f"Which city does the customer of order {oid} live in?",
                    row["city"],
                    {"kind": kind, "lookups": 2},
                )
            )
        else:
            out.append(
                Task(
                    f"late-{oid}",
                    f"Was order {oid} delivered on time? Check with the carrier.",
                    _timeliness(row),
                    {"kind": kind, "lookups": 3},
                )
            )
    return out


def _timeliness(ship: dict[str, Any]) -> str:
    if not ship.get("delivered_on"):
        return "not delivered yet"
    return "late" if ship["delivered_on"] > ship["promised_on"] else "on time"


def analyst(task: Task, seed: int, *, cache: bool = False) -> FunctionModel:
    """The offline model of one cell: seeded wording, config-dependent usage (caching) and truncation."""
    rng = random.Random(seed)
    prev_total = 0

    def words(n: int) -> str:
        pool = [
            "checking",
            "the",
            "record",
            "order",
            "shows",
            "so",
            "next",
            "carrier",
            "customer",
            "I",
            "will",
            "confirm",
        ]
        return " ".join(rng.choice(pool) for _ in range(n))

    def fn(messages: list[dict[str, Any]], tools: list[dict[str, Any]], request: ModelRequest) -> dict[str, Any]:
        nonlocal prev_total
        h = History(messages)
        oid = int("".join(ch for ch in task.input if ch.isdigit())[:4])
        got = {o.name: o.data for o in h.outcomes() if not o.is_error}
        kind = task.meta.get("kind", "status")
        order = got.get("get_order")
        if order is None:
            out = reply(f"Looking up order {oid}. " + words(rng.randint(5, 15)), ("get_order", {"order_id": oid}))
        elif kind == "city" and "get_customer" not in got:
            out = reply(
                "Now the customer. " + words(rng.randint(5, 15)),
                ("get_customer", {"customer_id": order["customer_id"]}),
            )
        elif kind == "late" and "carrier_status" not in got and (order.get("shipment") or {}).get("tracking"):
            out = reply(
                "Asking the carrier. " + words(rng.randint(5, 15)),
                ("carrier_status", {"tracking": order["shipment"]["tracking"]}),
            )
        else:
            ship = order.get("shipment") or {}
            answer = (
                got["get_customer"]["city"]
                if kind == "city" and "get_customer" in got
                else _timeliness(ship)
                if kind == "late"
                else order["status"]
            )
            out = reply("Checked the records: " + words(rng.randint(30, 80)) + f". The answer: {answer}.")
        # Usage as the API would report it; with caching the prefix sent before is read from the cache.
        total = (
            estimate_tokens(request.system or "") + estimate_tokens(tools) + sum(estimate_tokens(m) for m in messages)
        )
        text = out["content"][0]["text"]
        output = estimate_tokens(out["content"])
        if output > request.max_tokens:  # cut off, as the API does: the text is kept, the calls are lost
            # What fits of the text, by the same estimate that measured it: its end (the verdict comes
            # last) is what is lost, so a reply marked cut off is never a complete one.
            keep = text[: max(0, len(text) * request.max_tokens // output - 1)]
            out = {**out, "content": [{"type": "text", "text": keep}], "stop_reason": "max_tokens"}
            output = request.max_tokens
        if cache:
            usage = {
                "input_tokens": 0,
                "output_tokens": output,
                "cache_read_input_tokens": prev_total,
                "cache_creation_input_tokens": max(0, total - prev_total),
            }
        else:
            usage = {"input_tokens": total, "output_tokens": output}
        prev_total = total
        return {**out, "usage": usage}

    async def count_tokens(request: ModelRequest) -> int:
        """The exact input of a request, counted as ``usage`` will report it (the API's
        ``count_tokens`` does the same for Claude): near the limit the hard guard asks for it
        instead of its byte-level bound, as it would with the real API."""
        return (
            estimate_tokens(request.system or "")
            + estimate_tokens(request.tools)
            + sum(estimate_tokens(m) for m in request.messages)
        )

    model = FunctionModel(fn, name="offline analyst" + (" (cached)" if cache else ""), count_tokens=count_tokens)
    model.caches = cache  # type: ignore[attr-defined]  # the hard cost guard prices cache writes when set
    return model


CONFIGS: dict[str, dict[str, Any]] = {
    "baseline": {"cache": False, "max_tokens": 1024, "max_cost": 0.05, "cost_guard": "hard"},
    "cached": {"cache": True, "max_tokens": 1024, "max_cost": 0.05, "cost_guard": "hard"},
    "short replies": {"cache": False, "max_tokens": 96, "max_cost": 0.05, "cost_guard": "hard"},
    "tight budget": {"cache": False, "max_tokens": 1024, "max_cost": 0.022, "cost_guard": "hard"},
    "tight budget, check after": {"cache": False, "max_tokens": 1024, "max_cost": 0.022, "cost_guard": "after"},
}
"""Five configurations, each differing from the baseline in one thing the article teaches."""


class _ShopTools:
    """``tools(task)``: every run gets its own connection to one read-only copy of the shop."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, task: Task) -> list[Any]:
        return Shop(self.path).tools()


def shop_experiment(
    *,
    folder: str | Path | None = None,
    name: str = "shop-study",
    repeats: int = 1,
    configs: dict[str, dict[str, Any]] | None = None,
    tasks: int | None = None,
    **options: Any,
) -> Experiment:
    """The shipped experiment, ready to ``.run()`` (offline, no key needed).

    Its runs share one read-only copy of the shop in a temporary folder, removed when the experiment is
    collected or the interpreter exits (each call used to leave one behind in the system's temp folder)."""
    folder_of_shop = tempfile.mkdtemp(prefix="agentlab-shop-study-")
    base = Path(folder_of_shop) / "shop.sqlite"
    shop = Shop(base)
    chosen = shop_tasks(shop)[:tasks]
    cfgs = {k: {**v, "system": POLICY, "deadline_s": 30.0, "max_steps": 8} for k, v in (configs or CONFIGS).items()}
    experiment = Experiment(
        chosen,
        cfgs,
        tools=_ShopTools(base),
        model=analyst,
        scorer="includes",
        repeats=repeats,
        folder=folder,
        name=name,
        **options,
    )
    weakref.finalize(experiment, shutil.rmtree, folder_of_shop, True)
    return experiment
