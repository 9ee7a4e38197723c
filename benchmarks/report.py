"""Rows, the printed table, the JSON file and the markdown for the docs.

Pure formatting, apart from the two small writers at the end: a benchmark
produces :class:`Row` values and knows nothing about how they are shown.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

Status = Literal["met", "missed", "info", "n/a"]

MISSING = "n/a (module not there yet)"


@dataclass(frozen=True, slots=True)
class Row:
    """One figure of the table.

    ``value`` is the number in ``unit`` (``None`` when the row could not be
    measured); ``shown`` is how the table prints it; ``goal`` is the issue's
    target in words and ``status`` whether this run met it.
    """

    key: str
    label: str
    value: float | None
    unit: str
    shown: str
    goal: str = ""
    status: Status = "info"
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    """Further numbers behind the figure (ratios, raw medians), kept in the JSON."""


def judged(ok: bool) -> Status:
    return "met" if ok else "missed"


def missing(key: str, label: str, goal: str, why: str = MISSING) -> Row:
    """A row whose module has not landed (or could not run): shown, never dropped."""
    return Row(key, label, None, "", why, goal, "n/a", "")


def fmt(value: float, digits: int = 3) -> str:
    """A number with ``digits`` significant digits, without scientific notation for usual sizes."""
    if value == 0 or not math.isfinite(value):
        return str(value)
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    return f"{value:,.{decimals}f}"


_MARK = {"met": "ok", "missed": "MISSED", "info": "", "n/a": "n/a"}


def table(rows: list[Row]) -> str:
    """The plain-text table printed by ``make bench``."""
    head = ("benchmark", "figure", "goal", "")
    body = [(r.label, r.shown, r.goal, _MARK[r.status]) for r in rows]
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in [head, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    notes = [f"  * {r.label}: {r.note}" for r in rows if r.note]
    return "\n".join(lines + ([""] + notes if notes else []))


def markdown(rows: list[Row], machine: dict[str, Any]) -> str:
    """The table as markdown, with the machine it ran on (for docs/benchmarks.md)."""
    out = ["| benchmark | figure | goal | |", "| --- | --- | --- | --- |"]
    for r in rows:
        mark = {"met": "met", "missed": "**missed**", "info": "", "n/a": "n/a"}[r.status]
        shown = r.shown + (f" ({r.note})" if r.note else "")
        out.append(f"| {r.label} | {shown} | {r.goal} | {mark} |")
    where = ", ".join(f"{k}: {v}" for k, v in machine.items())
    return "\n".join(out) + f"\n\nMachine: {where}.\n"


def write_json(path: Path, rows: list[Row], machine: dict[str, Any], config: dict[str, Any]) -> None:
    """Write the results atomically: a killed run never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    doc = {"machine": machine, "config": config, "rows": [asdict(r) for r in rows]}
    tmp.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


START, END = "<!-- bench:table:start -->", "<!-- bench:table:end -->"


def update_doc(path: Path, rows: list[Row], machine: dict[str, Any]) -> None:
    """Replace the table between the bench markers in ``path``, keeping the prose around it."""
    text = path.read_text(encoding="utf-8") if path.exists() else f"# Benchmarks\n\n{START}\n{END}\n"
    if START not in text or END not in text:
        raise ValueError(f"{path} has no {START} ... {END} markers to put the table between")
    before, rest = text.split(START, 1)
    _, after = rest.split(END, 1)
    path.write_text(f"{before}{START}\n{markdown(rows, machine)}{END}{after}", encoding="utf-8")
