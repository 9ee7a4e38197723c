"""Real per-step usage shipped with the package, loadable as traces.

``real_usage()`` reads ``agentlab/data/real_usage/*.csv`` (numbers only, from
public MIT-licensed agent recordings; sources in that folder's README.md) and
returns each recorded run as a native :class:`~agentlab.trace.Trace`, so the
token-growth plots, fits, caching counterfactual and budget what-if run on
real numbers. The steps have usage and cost but no text: the recordings'
prompts and replies are not shipped.
"""

from __future__ import annotations

import csv
from importlib.resources import files
from pathlib import Path
from typing import Literal

from .recorded.build import RecordedRun, RecordedStep, build_run
from .redact import Redactor
from .trace import Trace, Traces

Source = Literal["all", "mini-swe-agent", "claude-code"]
FILES = {"mini-swe-agent": "mini_swe_agent_deepseek_steps.csv", "claude-code": "claude_code_spotter_steps.csv"}


def data_dir() -> Path:
    """The folder holding the real-usage CSVs and their README (provenance and licences)."""
    return Path(str(files("agentlab") / "data" / "real_usage"))


def _int(v: str) -> int:
    return int(float(v)) if v not in ("", None) else 0


def real_usage(source: Source = "all") -> Traces:
    """The shipped real runs as traces: ``"mini-swe-agent"`` (DeepSeek on SWE-bench,
    179 runs), ``"claude-code"`` (26 runs, split at compactions and model switches)
    or ``"all"``. Run ids are the recordings' own names (file + segment)."""
    if source not in ("all", *FILES):
        raise ValueError(f"source must be 'all' or one of {', '.join(FILES)}, got {source!r}")
    names = list(FILES) if source == "all" else [source]
    traces: list[Trace] = []
    redactor = Redactor(env=False)
    used: set[str] = set()
    for name in names:
        runs: dict[str, RecordedRun] = {}
        with open(data_dir() / FILES[name], newline="") as f:
            for row in csv.DictReader(f):
                rid = row["run"]
                run = runs.get(rid)
                if run is None:
                    unique = base = _run_id(rid)
                    n = 1
                    while unique in used:  # the same task in two recorded batches
                        n += 1
                        unique = f"{base}-{n}"
                    used.add(unique)
                    run = runs[rid] = RecordedRun(
                        run_id=unique,
                        format=name,
                        source=f"{row['source']}:{rid}",
                        messages=[],
                        steps=[],
                        task=rid,
                        model=row["model"],
                        meta={"dataset": FILES[name], "text": "not shipped (numbers only)"},
                    )
                cost = row.get("cost_if_given") or ""
                run.steps.append(
                    RecordedStep(
                        content=[],
                        model=row["model"],
                        stop_reason="tool_use",
                        usage={
                            "input_tokens": _int(row["uncached_input"]),
                            "output_tokens": _int(row["output_tokens"]),
                            "cache_creation_input_tokens": _int(row["cache_write"]),
                            "cache_read_input_tokens": _int(row["cache_read"]),
                        },
                        recorded_cost=float(cost) if cost else None,
                    )
                )
        for run in runs.values():
            run.steps[-1].stop_reason = "end_turn"
            traces.append(Trace(build_run(run, redactor=redactor), None))
    return Traces(traces, data_dir())


def _run_id(name: str) -> str:
    """A file-safe run id from a recording's path (``a/b/c.traj.json#seg1`` -> ``c#seg1``)."""
    base = name.rsplit("/", 1)[-1]
    for suffix in (".traj.json", ".jsonl"):
        base = base.replace(suffix, "")
    return base.replace("#", "-")


SESSIONS = {
    "multi-turn": "claude_code_multi_turn.jsonl",
    "subagent": "ae4a77f8-aedd-4bc1-888f-c94edc91af04/subagents/agent-aac57f5.jsonl",
}


def claude_code_session(which: Literal["multi-turn", "subagent"] = "multi-turn") -> Path:
    """The path of a real Claude Code session file shipped with the package, to try
    :func:`agentlab.load_recorded`, replay and fork on without a session of your own.

    ``"multi-turn"``: 50 API calls of Claude Opus after a compaction, the user
    speaking again twice; ``"subagent"``: a subagent's three calls. Both come from
    the MIT-licensed marot/spotter test fixtures (strings cut short, usage exact;
    see ``agentlab/data/NOTICE.md``)."""
    if which not in SESSIONS:
        raise ValueError(f"which must be one of {', '.join(map(repr, SESSIONS))}, got {which!r}")
    return Path(str(files("agentlab") / "data" / "recorded" / SESSIONS[which]))
