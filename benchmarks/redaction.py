"""Redaction's cost: a 1 MB tool result, 1 MB of adversarial text, and its share of an import (issues 24, 26).

Real text is the precision corpus (``tests/fixtures/redaction/precision.jsonl``:
real agent records) joined until the size is reached. The adversarial shapes
are the ones that made the old patterns retry at every position (long runs of
hex, of ``a``, of ``://``, secret words without values, deep nesting); each is
timed at a quarter of the size and at the size, so the table shows how time
grows (linear: 4x). The import share is the time ``load_recorded`` spends
with redaction on minus off, over a folder synthesised like the import benchmark's.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .report import Row, fmt, judged

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "redaction" / "precision.jsonl"
TEXT_GOAL_S = 0.25
ADVERSARIAL_GOAL_S = 1.0
GROWTH_GOAL = 8.0  # 4x the input: linear is 4, quadratic 16
SHAPES: dict[str, Callable[[int], str]] = {
    "hex": lambda n: "0123456789abcdef" * (n // 16),
    "a": lambda n: "a" * n,
    "://": lambda n: "://" * (n // 3),
    "run then ://": lambda n: "x" * n + "://a:b@c",
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


def real_text(chars: int) -> str:
    """Real agent text (the precision corpus's strings) joined to ``chars`` characters."""
    parts, total = [], 0
    pieces = [json.loads(x)["value"] for x in CORPUS.read_text(encoding="utf-8").splitlines()]
    strings = [p if isinstance(p, str) else json.dumps(p) for p in pieces]
    while total < chars:
        for s in strings:
            parts.append(s)
            total += len(s) + 1
            if total >= chars:
                break
    return "\n".join(parts)[:chars]


def _seconds(text: str, reps: int) -> float:
    from agentlab.redact import Redactor

    best = float("inf")
    for _ in range(reps):
        r = Redactor(env=False)
        t0 = time.process_time()
        r.redact(text)
        best = min(best, time.process_time() - t0)
    return best


def _import_seconds(folder: Path, redactor: Any) -> float:
    import agentlab as al

    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        al.load_recorded(folder, redactor=redactor)
        best = min(best, time.perf_counter() - t0)
    return best


def import_share(megabytes: float) -> tuple[float, float]:
    """Seconds to load a synthesised Claude Code folder with redaction on, and off."""
    from agentlab.redact import Redactor

    from .recorded import FIXTURE, synthesise

    class Off(Redactor):
        def for_run(self, **_: Any) -> Redactor:
            return self

        def clean(self, value: Any) -> Any:
            return value

        def redact(self, value: Any) -> Any:
            return value

    import agentlab as al

    al.load_recorded(FIXTURE / "tool_heavy.jsonl")  # warm-up: imports, price lookups
    with tempfile.TemporaryDirectory(prefix="agentlab-bench-redact-") as d:
        folder = Path(d)
        synthesise(folder, megabytes)
        return _import_seconds(folder, Redactor()), _import_seconds(folder, Off(env=False))


def redaction_rows(megabytes: float, import_mb: float, reps: int) -> list[Row]:
    n = int(megabytes * 1_000_000)
    text_s = _seconds(real_text(n), reps)
    worst, worst_shape, growth, growth_shape = 0.0, "", 0.0, ""
    per_shape: dict[str, list[float]] = {}
    for name, make in SHAPES.items():
        small, large = _seconds(make(n // 4), reps), _seconds(make(n), reps)
        per_shape[name] = [small, large]
        if large > worst:
            worst, worst_shape = large, name
        ratio = large / small if small > 0.002 else 4.0  # under 2 ms the ratio is timer noise
        if ratio > growth:
            growth, growth_shape = ratio, name
    on, off = import_share(import_mb)
    share = max(0.0, on - off) / on if on > 0 else 0.0
    mb = f"{megabytes:g} MB"
    return [
        Row(
            "redact.text",
            f"redact a {mb} tool result (real agent text)",
            text_s,
            "s",
            f"{fmt(text_s * 1e3)} ms CPU",
            f"<= {TEXT_GOAL_S:g} s",
            judged(text_s <= TEXT_GOAL_S * megabytes),
        ),
        Row(
            "redact.adversarial",
            f"redact {mb} of the slowest of {len(SHAPES)} adversarial shapes",
            worst,
            "s",
            f"{fmt(worst * 1e3)} ms CPU ({worst_shape!r}); 4x input -> at most {growth:.1f}x time ({growth_shape!r})",
            f"<= {ADVERSARIAL_GOAL_S:g} s, 4x input <= {GROWTH_GOAL:g}x time",
            judged(worst <= ADVERSARIAL_GOAL_S * megabytes and growth <= GROWTH_GOAL),
            extra={"shapes": per_shape},
        ),
        Row(
            "redact.import_share",
            f"redaction's share of importing {import_mb:g} MB of Claude Code sessions",
            share,
            "fraction",
            f"{share:.0%} ({fmt(on)} s with, {fmt(off)} s without)",
            "",
            "info",
        ),
    ]
