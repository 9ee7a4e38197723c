"""Every import audits itself: invariants that hold for any record, checked on every run imported.

Each round of real files showed a new shape in which the figures were
silently wrong. The importers read the shapes they know; this module checks
what they produced against rules no format can break, so a shape nobody has
seen yet is reported instead of priced as if it were exact:

- ``request_id``: one step per API request (no two steps share a request id);
- ``duplicate_call``: no call counted twice, across files and folders too (a
  call is addressed by its request id, else by its model, reply and usage);
- ``output_count``: an output count plausible for the reply it describes (at
  least one token per :data:`CHARS_PER_TOKEN_MAX` characters of it);
- ``never_reached``: no step without a reply and without usage (nothing shows
  the call reached the API);
- ``estimate_shape``: an estimated step priced like its recorded neighbours
  (it reads from the cache when they do);
- ``usage_counts``: usage counts whole, non-negative and plausible
  (:func:`agentlab.usage_fields.check_usage`, the rule live replies pass too);
- ``record_total``: the run's figures equal the record's own totals, where it
  keeps them (inspect's ``model_usage``, Codex's running total, mini-swe-agent's
  ``instance_cost`` against the lab's price of the run, the sum of per-call costs a
  record states).

Every check is about money (a finding means the run's cost may be wrong). The
audit goes into ``run_started.recorded.audit`` (``status``: ``"ok"``, or
``"estimated"`` when some usage is estimated and said so, or ``"findings"``),
the runs frame (``audit``, ``audit_findings``), the
:class:`~agentlab.recorded.ImportReport` and ``agentlab import --check``.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import orjson

from .._safe_text import without_lone_surrogates
from ..usage_fields import check_usage

if TYPE_CHECKING:
    from .build import RecordedRun, RecordedStep

CHECKS = (
    "request_id",
    "duplicate_call",
    "output_count",
    "never_reached",
    "estimate_shape",
    "usage_counts",
    "record_total",
)
"""The audit's checks, in the order they run."""

CHARS_PER_TOKEN_MAX = 20
"""No tokenizer packs more characters of a reply (whitespace runs folded) into one token than this
(English runs about 4, code about 3): fewer tokens than ``chars / 20`` cannot be the final count."""

_MIN_CHARS = 400
"""Replies shorter than this are not held to the output check (a few tokens of slack either way)."""


@dataclass(frozen=True)
class Finding:
    """One thing an import cannot vouch for: which ``check`` failed, where, and what it means."""

    check: str
    message: str
    file: str = ""
    line: int | None = None
    step: int | None = None
    money: bool = True

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        where = self.file + (f":{self.line}" if self.line is not None else "")
        at = f" (step {self.step})" if self.step is not None else ""
        return f"{where}: {self.check}{at}: {self.message}"


def run_anchor(run: RecordedRun) -> str:
    """What places a run's calls among others without request ids: when it started and what it was asked
    (two samples can get the same short reply with the same usage; a copy of one run has both the same)."""
    return f"{run.started_at}|{run.task[:500]}|{run.system and run.system[:200]}"


def call_key(step: RecordedStep, anchor: str = "") -> str:
    """The address of one API call: its request id where the record keeps one, else a hash of the run's
    ``anchor`` (:func:`run_anchor`) and the call's model, time, reply and usage (the same call read from
    two files has the same address)."""
    if step.request_id:
        return f"id:{step.request_id}"
    fields = without_lone_surrogates([anchor, step.model, step.requested_at, step.content, step.usage])
    body = orjson.dumps(fields, option=orjson.OPT_SORT_KEYS, default=str)
    return "sha1:" + hashlib.sha1(body, usedforsecurity=False).hexdigest()


_SPACE = re.compile(r"\s+")


def reply_chars(content: list[Any]) -> int:
    """Characters of a reply the model wrote (text, thinking, tool inputs), whitespace runs folded."""
    n = 0
    for b in content:
        if not isinstance(b, dict):
            continue
        t = b.get("type")
        if t == "text":
            n += len(_SPACE.sub(" ", str(b.get("text", ""))))
        elif t == "thinking":
            n += len(_SPACE.sub(" ", str(b.get("thinking", ""))))
        elif t in ("tool_use", "server_tool_use"):
            n += len(_SPACE.sub(" ", orjson.dumps(b.get("input") or {}, default=str).decode()))
    return n


def plausible_output(output: Any, content: list[Any]) -> bool:
    """Whether ``output`` tokens can be the final count of a reply with this content."""
    chars = reply_chars(content)
    return not (chars >= _MIN_CHARS and isinstance(output, (int, float)) and output * CHARS_PER_TOKEN_MAX < chars)


def audit_run(
    run: RecordedRun, usages: list[dict[str, Any]], estimated: list[bool], priced: float | None = None
) -> dict[str, Any]:
    """The audit of one imported run: ``{"status", "findings", "estimated_steps"}`` (findings as dicts).

    ``usages`` are the usage each step is priced with, ``estimated`` whether it was estimated
    (wholly or its output count), ``priced`` the run's cost at the lab's prices (``None`` when a
    step has no price)."""
    found: list[Finding] = []
    src = run.source

    def add(check: str, message: str, k: int | None = None) -> None:
        line = run.steps[k - 1].line if k is not None else None
        found.append(Finding(check, message, src, line, k))

    # one step per API request
    by_id: dict[str, list[int]] = defaultdict(list)
    for k, s in enumerate(run.steps, 1):
        if s.request_id:
            by_id[s.request_id].append(k)
    for rid, ks in by_id.items():
        if len(ks) > 1:
            add(
                "request_id",
                f"steps {', '.join(map(str, ks))} share request id {rid!r}: one request billed {len(ks)} times",
                ks[1],
            )
    # the same call counted twice (the import marks calls another file or run already holds)
    for k, other in run.meta.get("counted_elsewhere", {}).items():
        add("duplicate_call", f"this call is already counted in {other}", int(k))
    found += undercounted(src, run.meta.get("undercounted_elsewhere", []))
    for k, (s, u, est) in enumerate(zip(run.steps, usages, estimated, strict=True), 1):
        problems = check_usage(s.usage)
        if problems:
            add("usage_counts", "; ".join(problems), k)
        if s.replayed:
            continue  # no call: nothing to hold to the rules of a call
        if s.usage is None and not s.content:
            add("never_reached", "no reply and no usage: nothing shows this call reached the API", k)
        out = u.get("output_tokens", 0)
        if not est and not plausible_output(out, s.content):
            chars = reply_chars(s.content)
            add(
                "output_count",
                f"{out} output tokens for a reply of {chars:,} characters (at least {chars // CHARS_PER_TOKEN_MAX:,} "
                "expected): the record's count is not the final one",
                k,
            )
    # estimated steps read from the cache when their recorded neighbours do
    known = [i for i, e in enumerate(estimated) if not e and run.steps[i].usage is not None]
    for i, e in enumerate(estimated):
        if not e or run.steps[i].usage is not None:
            continue
        near = [j for j in known if run.steps[j].model == run.steps[i].model]
        before = max((j for j in near if j < i), default=None)
        after = min((j for j in near if j > i), default=None)
        cached = [usages[j]["cache_read_input_tokens"] > 0 for j in (before, after) if j is not None]
        if cached and all(cached) and not usages[i]["cache_read_input_tokens"]:
            add("estimate_shape", "estimated as if nothing were cached while the calls beside it read the cache", i + 1)
    _totals(run, [u for s, u in zip(run.steps, usages, strict=True) if not s.replayed], estimated, add, priced)
    if run.meta.get("record_total") and not run.meta.get("segment"):  # checked by the importer on the whole record
        add("record_total", str(run.meta["record_total"]))
    findings = [f.as_dict() for f in found]
    n_est = sum(estimated)
    status = "findings" if findings else ("estimated" if n_est else "ok")
    return {"status": status, "findings": findings, "estimated_steps": n_est}


PRICE_SLACK = 0.05
"""How far the lab's price of a run may be from the total cost the record states (an agent's own price
table, e.g. litellm's for mini-swe-agent's ``instance_cost``, rounds and updates on its own schedule) before
the audit says so: past it, a call is missing or the two price lists disagree, and the bill cannot be vouched for."""


def token_total_problem(usages: list[dict[str, Any]], total: dict[str, Any], label: str) -> str | None:
    """What is wrong when ``usages`` (Anthropic-shaped) do not add up to a record's running ``total`` of
    ``input_tokens`` (every prompt token, cached ones included) and ``output_tokens``; ``None`` when they do."""
    sent = sum(u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"] for u in usages)
    received = sum(u["output_tokens"] for u in usages)
    for key, mine, what in (("input_tokens", sent, "tokens sent"), ("output_tokens", received, "tokens received")):
        theirs = total.get(key)
        if isinstance(theirs, (int, float)) and round(theirs) != mine:
            return f"{label} says {int(theirs):,} {what}; its calls add up to {mine:,}"
    return None


def undercounted(file: str, lows: list[dict[str, Any]]) -> list[Finding]:
    """Findings for lines of calls another file counts, read after it with more usage than it holds
    (``{"line", "request", "counted_in"}`` each): the call's figure there is too low."""
    return [
        Finding(
            "duplicate_call",
            f"a line of request {low['request']!r} carries more usage than {low['counted_in']} counts for it: "
            "the call is counted there, with a figure too low",
            file,
            low.get("line"),
        )
        for low in lows
    ]


def _totals(
    run: RecordedRun, usages: list[dict[str, Any]], estimated: list[bool], add: Any, priced: float | None = None
) -> None:
    """The run's figures against the record's own totals (exact where every step is recorded)."""
    totals = run.totals
    if any(estimated):
        return  # estimates are scaled to the totals: they agree by construction, and say so in the notes
    calls = totals.get("model_calls")
    if isinstance(calls, (int, float)) and int(calls) != len(usages):
        return  # the record counts calls it does not hold; build_run takes the record's figures and says so
    sums = {
        "input_tokens": sum(
            u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"] for u in usages
        ),
        "output_tokens": sum(u["output_tokens"] for u in usages),
    }
    also = run.meta.get("replayed_usage") or {}
    for key, label in (("input_tokens", "tokens sent"), ("output_tokens", "tokens received")):
        total = totals.get(key)
        if not isinstance(total, (int, float)):
            continue
        mine = sums[key]
        if round(total) not in (mine, mine + int(also.get(key, 0))):
            add("record_total", f"the record's own total says {int(total):,} {label}; its calls add up to {mine:,}")
    costs = [s.recorded_cost for s in run.steps]
    total_cost = totals.get("cost", run.recorded_cost)
    if isinstance(total_cost, (int, float)) and costs and all(c is not None for c in costs):
        mine_cost = sum(c for c in costs if c is not None)
        if abs(mine_cost - total_cost) > max(1e-6, 1e-3 * abs(total_cost)):
            add(
                "record_total",
                f"the record's own total cost is ${total_cost:.6f}; "
                f"the costs it states per call add up to ${mine_cost:.6f}",
            )
    billed = totals.get("cost")
    if isinstance(billed, (int, float)) and billed > 0 and priced is not None:
        if abs(priced - billed) > max(1e-4, PRICE_SLACK * billed):
            add(
                "record_total",
                f"the record's own total cost is ${billed:.6f}; the lab prices its calls at ${priced:.6f} "
                f"({priced / billed - 1:+.0%}): a call is missing, or the two price lists disagree",
            )


def summary(audit: dict[str, Any] | None) -> str:
    """One line for a run's audit: ``ok``, ``estimated (3 steps)``, or the findings by check."""
    if not audit:
        return ""
    if audit.get("findings"):
        by: dict[str, int] = defaultdict(int)
        for f in audit["findings"]:
            by[f["check"]] += 1
        return f"{len(audit['findings'])} finding(s): " + ", ".join(f"{c} x{n}" for c, n in by.items())
    if audit.get("estimated_steps"):
        return f"estimated ({audit['estimated_steps']} step(s) of usage estimated, said so)"
    return "ok"
