"""``agentlab``: the lab from a terminal.

    agentlab demo                      every scenario, one table, traces and plots
    agentlab run TASK --tools shop     one run, step by step as it happens
    agentlab report RUN_ID             read a finished (or failed) run
    agentlab scenarios                 what each scenario teaches
    agentlab experiment SPEC.toml      many runs under one total budget (--resume continues)
    agentlab import PATH               recorded runs (Claude Code, ...) as traces
    agentlab runs [DIR]                the runs in a traces folder, newest first
    agentlab notebooks [DIR]           copy the teaching notebooks out of the installed package
    agentlab compact RUNS_DIR          the runs as Parquet, for fast loading and SQL

``--json`` on ``run``, ``report``, ``experiment``, ``import`` and ``runs`` prints one JSON
document on stdout instead of the text (progress still goes to stderr).

The formatting here is plain functions of values (:func:`format_table`,
:func:`describe_event`); ``main`` only wires them to argparse and streams.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from ._safe_text import for_terminal
from ._shorten import shorten
from .vocab import EventKind

DESCRIPTION = """\
agentlab makes the agent loop (call the model, run the tools it asks for,
hand back the results, repeat) something you can watch, pause and measure.
The demo and scenarios run offline with scripted models; `agentlab run` uses
Claude (set ANTHROPIC_API_KEY), or offline: `--model offline` answers once without
tools (as model="offline" does in Python), `--model offline-shop` is a scripted assistant
that uses the example shop's tools."""

EPILOG = """\
examples:
  agentlab demo                                  run every lesson offline (about 5 s)
  agentlab scenarios                             list the lessons
  agentlab run --scenario hanging-tool           one lesson, step by step
  agentlab run "Why was order 1042 late?" --tools shop --model offline-shop
  agentlab report parallel-lookups-3f9a1c        read a run's trace
  agentlab report RUN_ID --notebook run.ipynb    the same, as a notebook
  agentlab runs                                  the runs in ./runs, newest first
  agentlab notebooks                             copy the teaching notebooks to ./agentlab-notebooks

traces go to $AGENTLAB_RUNS (default ./runs); add --json to run, report, experiment,
import or runs for machine-readable output"""

NOTEBOOKS_HINT = (
    "notebooks: agentlab notebooks DIR, then jupyter lab DIR   (pip install 'agentlab-loop[lab]' for JupyterLab)"
)


# ------------------------------------------------------------- formatting
def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[int] = ()) -> str:
    """A plain-text table: a header, a rule, one line per row; columns in ``right`` right-aligned."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        out = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        return "  ".join(out).rstrip()

    return "\n".join([line(cells[0]), "  ".join("-" * w for w in widths)] + [line(r) for r in cells[1:]])


def _args_text(args: dict[str, Any], limit: int = 60) -> str:
    text = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
    return shorten(text, limit)


def _short(text: str, limit: int = 90) -> str:
    return shorten(text, limit, flat=True)


def describe_event(kind: str, step: int, data: dict[str, Any]) -> str | None:
    """One progress line for an engine event, or ``None`` for events not worth a line."""
    if kind == EventKind.MODEL_CALLED and "content" in data:
        calls = [b for b in data["content"] if b.get("type") == "tool_use"]
        what = ", ".join(f"{b['name']}({_args_text(b.get('input', {}), 40)})" for b in calls) or "answers"
        return (
            f"step {step}: model → {what}   [{data.get('context_tokens', 0):,} tokens in, "
            f"${data.get('cost', 0):.4f}, {data.get('latency', 0):.2f}s]"
        )
    if kind == EventKind.TOOL_RETRY:
        return f"    {data['tool']}: {_short(data['error'], 70)}; retry {data['attempt']} in {data['wait']:.2f}s"
    if kind == EventKind.NUDGED:
        return f"    {data['tool']}: asked {data['count']} times with the same arguments; nudged instead of run"
    if kind == EventKind.TOOL_FINISHED and data.get("outcome") != "nudged":
        took = (data.get("end") or 0) - (data.get("start") or 0)
        mark = {"ok": "ok", "retried": f"ok after {data.get('attempts')} attempts"}.get(
            data["outcome"], data["outcome"]
        )
        call = f"{data['tool']}({_args_text(data.get('args', {}))})"
        return f"    {call} {mark} in {took:.2f}s: {_short(data.get('result', ''), 70)}"
    return None


def describe_result(result: Any) -> str:
    """The last lines of a run: outcome, numbers, answer or diagnosis."""
    head = (
        f"{result.outcome}: {result.reason}  ·  {result.steps} steps  ·  ${result.spent:.4f}  ·  "
        f"{result.elapsed:.2f}s  ·  {result.model_calls} model calls"
    )
    body = result.text if result.outcome == "done" else (result.detail or result.text)
    return f"{head}\n{body}"


class Progress:
    """A subscriber that prints one line per interesting event, as it happens."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def __call__(self, event: Any) -> None:
        line = describe_event(event.kind, event.step, event.data)
        if line is not None:
            print(line, file=self.stream, flush=True)


# ------------------------------------------------------------------- demo
def _demo_runs(only: Sequence[str] | None) -> list[tuple[str, str, dict[str, Any]]]:
    """(label, scenario, option overrides) for each run of the demo, in order."""
    from . import scenarios

    plan: list[tuple[str, str, dict[str, Any]]] = []
    for name in only or scenarios.names():
        scenarios.get(name)  # a clear error for a typo, before anything runs
        plan.append((name, name, {}))
        if name == "growing-context":
            plan.append(("growing-context/after", name, {"cost_guard": "after"}))
            plan.append(("growing-context/no-limit", name, {"max_cost": None}))
    return plan


def cmd_demo(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from . import scenarios
    from .trace import runs_dir

    runs = runs_dir(args.runs)
    plots = Path(args.out) if args.out else runs / "demo"
    plan = _demo_runs(args.only)
    print(f"agentlab demo: {len(plan)} offline runs, traces in {runs}/", file=err, flush=True)
    rows, results = [], {}
    t_all = time.monotonic()
    for i, (label, name, overrides) in enumerate(plan, 1):
        s = scenarios.get(name)
        print(f"[{i:2d}/{len(plan)}] {label}: {s.title} ...", end="", file=err, flush=True)
        t0 = time.monotonic()
        setup = s.setup(seed=args.seed, **overrides)
        result = setup.run(trace=runs)
        took = time.monotonic() - t0
        setup.close()
        results[label] = result
        expected = s.expected if "/" not in label else result.reason
        ok = result.reason == expected
        print(f" {result.reason} ({took:.1f}s){'' if ok else f'  UNEXPECTED, wanted {expected}'}", file=err, flush=True)
        rows.append(
            [
                label,
                result.reason,
                result.steps,
                f"${result.spent:.4f}",
                f"{took:.2f}",
                result.model_calls,
                result.run_id,
            ]
        )
    print(file=err)
    print(
        format_table(
            ["scenario", "reason", "steps", "cost", "seconds", "model calls", "run id"], rows, right=(2, 3, 4, 5)
        ),
        file=out,
    )
    unexpected = [
        r[0]
        for r, (label, name, _) in zip(rows, plan, strict=True)
        if "/" not in label and r[1] != scenarios.get(name).expected
    ]
    files = _demo_plots(results, runs, plots, err) if not args.no_plots else []
    summary = plots / "summary.csv"
    plots.mkdir(parents=True, exist_ok=True)
    summary.write_text(
        "scenario,reason,steps,cost,seconds,model_calls,run_id\n"
        + "".join(",".join(str(c).replace("$", "") for c in r) + "\n" for r in rows),
        encoding="utf-8",
    )
    print(
        f"\n{len(plan) - len(unexpected)}/{len(plan)} runs ended as their lesson says, in "
        f"{time.monotonic() - t_all:.1f}s.",
        file=out,
    )
    print(f"traces:   {runs}/<run id>.jsonl  (read one: agentlab report {rows[0][-1]})", file=out)
    print(f"summary:  {summary}", file=out)
    for f in files:
        print(f"plot:     {f}", file=out)
    print(NOTEBOOKS_HINT, file=out)
    if not args.only:  # and one small experiment: 6 questions x 3 configs under a $0.50 total
        from .scenarios.demo import demo_experiment

        demo_experiment(runs / "experiments", out)
    return 1 if unexpected else 0


def cmd_experiment(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .experiments.spec import load_spec, summary_text

    exp = load_spec(args.spec, name=args.name, progress=False if args.quiet else "tqdm")
    if exp.folder.rows.exists() and not args.resume:
        raise ValueError(
            f"{exp.folder.path} already holds runs: pass --resume to continue it, or --name NEW for a new one"
        )
    result = exp.run()
    if args.json:
        summary = result.summary()
        _print_json(
            {
                "experiment": exp.folder.path.name,
                "folder": str(exp.folder.path),
                "rows_file": str(exp.folder.rows),
                "summary": _records(summary.reset_index(names="config")) if not summary.empty else [],
                "runs": _records(result.runs),
            },
            out,
        )
        return 0
    print(summary_text(result), file=out)
    print(f"\n{result!r}\nrows: {exp.folder.rows}", file=out)
    return 0


def _demo_plots(results: dict[str, Any], runs: Path, folder: Path, err: TextIO) -> list[Path]:
    """The key plots as PNG files; skipped with a note when a run they need is not in this demo."""
    try:
        from . import plots
        from .trace import Traces, load_run
    except ImportError as exc:  # pragma: no cover - plots are part of the package
        print(f"plots skipped: {exc}", file=err)
        return []
    from matplotlib.figure import Figure

    folder.mkdir(parents=True, exist_ok=True)
    written = []

    def trace(label: str) -> Any:
        return load_run(results[label].run_id, runs)

    def save(ax: Any, name: str) -> None:
        path = folder / name
        ax.figure.savefig(path, dpi=110, bbox_inches="tight")
        written.append(path)

    if "growing-context/no-limit" in results:
        t = trace("growing-context/no-limit")
        save(plots.cost_curve(t.steps, max_cost=0.10, max_steps=12, forecast_to=12), "cost-curve.png")
        save(plots.token_growth(t.steps), "token-growth.png")
    names = {
        "growing-context/no-limit": "no cost limit",
        "growing-context/after": "after-the-fact check (the sketch)",
        "growing-context": "hard cost guard",
    }
    labels = {results[k].run_id: v for k, v in names.items() if k in results}
    if len(labels) > 1:
        both = Traces([load_run(r, runs) for r in labels])
        ax = plots.compare_runs(both.steps, list(labels), labels=labels)
        ax.axhline(0.10, color="#333333", lw=1.2)
        ax.set_title("The same run under each cost guard, max_cost $0.10", loc="left")
        save(ax, "cost-guards.png")
    timeline = [k for k in ("parallel-lookups", "parallel-writes") if k in results]
    if timeline:
        fig = Figure(figsize=(9, 2.8 * len(timeline)), layout="constrained")
        axes = fig.subplots(len(timeline), 1, squeeze=False)[:, 0]
        for ax, k in zip(axes, timeline, strict=True):
            t = trace(k)
            plots.tool_timeline(t.calls, steps=t.steps, ax=ax)
            ax.set_title(
                f"{k}: {'reads run together' if k == 'parallel-lookups' else 'writes run one at a time'}", loc="left"
            )
        save(axes[0], "tool-timeline.png")
    return written


# -------------------------------------------------------------------- run
def cmd_run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    out, err = for_terminal(out), for_terminal(err)  # tool and model text cannot drive the terminal
    from .trace import runs_dir

    runs = runs_dir(args.runs)
    limits = {
        k: v
        for k, v in (("max_steps", args.max_steps), ("max_cost", args.max_cost), ("deadline_s", args.deadline))
        if v is not None
    }
    progress = Progress(err)
    if args.scenario:
        from . import scenarios

        setup = scenarios.get(args.scenario).setup(seed=args.seed, **limits)
        task = args.task or setup.task
        print(f"scenario {args.scenario}: {setup.scenario.lesson}", file=err)
        print(f"task: {task}", file=err, flush=True)
        result = setup.run(task=task, trace=runs, subscribers=[progress])
        setup.close()
    else:
        if not args.task:
            print("agentlab run: give a TASK, or --scenario NAME (see: agentlab scenarios)", file=err)
            return 2
        tools: list[Any] = []
        fallback = None
        if args.tools not in ("shop", "none"):
            tools = _tools_from_ref(args.tools, args.task)
            print(f"tools: {', '.join(t.name for t in tools) or 'none'} (from {args.tools})", file=err)
        elif args.tools == "shop":
            from .scenarios.behaviours import ShopAssistant

            fallback = ShopAssistant()
        from .models.offline import FunctionModel
        from .models.resolve import OFFLINE, OFFLINE_SHOP, ModelNotCallable, resolve_model

        if args.model == OFFLINE_SHOP and fallback is None:
            print(f"agentlab run: --model {OFFLINE_SHOP} is the shop's assistant: it needs --tools shop", file=err)
            return 2
        shop_assistant = None if fallback is None else FunctionModel(fallback, name="offline shop assistant")
        try:
            if args.model == OFFLINE_SHOP:
                resolved = resolve_model(shop_assistant)
            else:
                resolved = resolve_model(args.model)
        except ModelNotCallable as exc:
            print(f"agentlab run: {as_flags(str(exc))}", file=err)
            return 2
        if args.tools == "shop":  # made once the model is known to run: a refused command leaves no shop behind
            from .shop import Shop

            shop = Shop(runs / "shop.sqlite")
            tools = shop.tools()
            print(f"tools: the example shop ({len(tools)} tools) on {shop.path}", file=err)
        if args.model == OFFLINE_SHOP or args.model == OFFLINE or args.model.startswith(OFFLINE + ":"):
            from ._model_label import model_label

            label = model_label(resolved.model.model, getattr(resolved.model, "name", None) or OFFLINE)
            print(f"model: {label}", file=err)
        print(f"task: {args.task}", file=err, flush=True)
        from ._facades import run

        result = run(args.task, tools, model=resolved.model, trace=runs, subscribers=[progress], **limits)
    if args.json:
        _print_json(result_json(result, runs), out)
    else:
        print(describe_result(result), file=out)
    print(f"trace: {runs}/{result.run_id}.jsonl   (agentlab report {result.run_id})", file=err)
    return 0 if result.outcome == "done" else 1


def as_flags(message: str) -> str:
    """A Python-side message for the command line: each offline suggestion ``model='offline…'`` becomes
    ``--model offline…``."""
    return re.sub(r"\bmodel='(offline[^'\s]*)'", r"--model \1", message)


def _tools_from_ref(ref: str, task: str) -> list[Any]:
    """``--tools module:attr``, read as the experiment spec reads it: a tool, a list of tools,
    or a factory ``tools(task) -> list`` called once with this run's task."""
    from ._refs import load_object
    from .experiments.tasks import Task, input_id
    from .tools import Tool

    obj = load_object(ref)
    if isinstance(obj, Tool):
        return [obj]
    if callable(obj) and not isinstance(obj, (list, tuple)):
        obj = obj(Task(id=input_id(task), input=task))
    if isinstance(obj, Tool):
        return [obj]
    if not isinstance(obj, (list, tuple)):
        raise ValueError(
            f"--tools {ref}: expected a tool, a list of tools or a factory returning one, got {type(obj).__name__}"
        )
    return list(obj)


def result_json(result: Any, runs: Path) -> dict[str, Any]:
    """A finished run as a JSON object: how it ended, its numbers, its answer and where its trace is."""
    return {
        "run_id": result.run_id,
        "outcome": result.outcome,
        "reason": str(result.reason),
        "detail": result.detail,
        "text": result.text,
        "steps": result.steps,
        "model_calls": result.model_calls,
        "cost": result.spent,
        "seconds": result.elapsed,
        "trace": str(runs / f"{result.run_id}.jsonl"),
    }


# ----------------------------------------------------------------- report
def cmd_report(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    out, err = for_terminal(out), for_terminal(err)  # tool and model text cannot drive the terminal
    from .trace import find_run_file, runs_dir

    runs = runs_dir(args.runs)
    try:  # the same lookup as load_run: an id, a unique prefix, or a .jsonl path
        file = find_run_file(args.run_id, runs)
    except (FileNotFoundError, ValueError) as exc:
        print(f"agentlab report: {exc}", file=err)
        return 2
    run_id, runs = file.stem, file.parent
    from . import report

    if args.notebook:
        path = report.export_notebook(run_id, args.notebook, runs=runs)
        print(f"notebook written: {path}   (open it: jupyter lab {path})", file=out)
        return 0
    if args.json:
        from .trace import load_run

        trace = load_run(run_id, runs)
        _print_json(
            {"summary": _jsonable(trace.summary), "steps": _records(trace.steps), "calls": _records(trace.calls)}, out
        )
        return 0
    print(report.report_text(run_id, runs=runs), file=out)
    return 0


def cmd_diff(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Two runs aligned step by step, from the first divergence: per-step token and dollar deltas."""
    out, err = for_terminal(out), for_terminal(err)
    from .costs import diff_runs
    from .trace import load_run

    try:
        a, b = (load_run(r, args.runs) for r in (args.a, args.b))
    except (FileNotFoundError, ValueError) as exc:
        print(f"agentlab diff: {exc}", file=err)
        return 2
    d = diff_runs(a, b)
    print(d.text(), file=out)
    if args.html:
        from pathlib import Path

        Path(args.html).write_text(f"<!doctype html><meta charset=utf-8><title>diff</title>{d.html()}", "utf-8")
        print(f"html written: {args.html}", file=out)
    return 0


def _recorded_formats() -> tuple[str, ...]:
    from .recorded.detect import FORMATS

    return FORMATS


def cmd_import(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Write recorded runs (Claude Code, Codex, Gemini, mini-swe-agent, SWE-agent, API logs…) as native traces:
    what was read, the runs made, and every file skipped and why."""
    import warnings

    out, err = for_terminal(out), for_terminal(err)  # tool and model text cannot drive the terminal
    from .recorded import NoCalls, SkippedFileWarning, UnrecognizedFormat, import_recorded
    from .recorded.limits import ImportLimit

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SkippedFileWarning)  # listed below, once each
            report = import_recorded(args.path, args.out, args.format, force=args.force)
    except (FileNotFoundError, UnrecognizedFormat, NoCalls, ImportLimit) as exc:
        print(f"agentlab import: {exc}", file=err)
        return 2
    # --check: a finding about money (every audit check is one) fails the command, for CI
    failed = 1 if args.check and any(f["money"] for f in report.findings) else 0
    if args.json:
        _print_json(
            {
                "written": [{"run_id": f.stem, "file": str(f)} for f in report],
                "skipped": [{"file": str(f), "why": why} for f, why in report.skipped],
                "audit": report.findings,
            },
            out,
        )
        return failed
    for f in report:
        print(f"  {f}", file=out)
    for f, why in report.skipped:
        print(f"  skipped {f}: {why}", file=out)
    if args.check:
        from .recorded.audit import Finding

        for found in report.findings:
            print(f"  {Finding(**{k: v for k, v in found.items() if k != 'run_id'})}", file=out)
    print(f"{report.summary()}; {len(report)} run(s) written", file=out)
    if report.findings and not args.check:
        print("see each finding: agentlab import PATH --check", file=out)
    if report:
        print(f"read one: agentlab report {report[0].stem} --runs {report[0].parent}", file=out)
    return failed


def cmd_scenarios(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from . import scenarios

    rows = [[s.name, s.expected, s.title] for s in scenarios.all()]
    print(format_table(["scenario", "ends with", "what happens"], rows), file=out)
    if args.verbose:
        for s in scenarios.all():
            print(f"\n{s.name}: {s.lesson}\n  task: {s.task}", file=out)
    print("\nrun one: agentlab run --scenario NAME", file=out)
    return 0


# ---------------------------------------------------------------- compact
def cmd_compact(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Bring a runs folder's columnar store up to date with its logs (docs/traces.md, "The store")."""
    from .trace import compact

    try:
        counts = compact(args.runs_dir, rebuild=args.rebuild, verify=args.verify)
    except (FileNotFoundError, ModuleNotFoundError) as exc:
        print(f"agentlab compact: {exc}", file=err)
        return 2
    except OSError as exc:  # a damaged part that could not be replaced: the store is not whole
        print(f"agentlab compact: {exc}", file=err)
        return 1
    if counts["repaired"]:
        print(f"{counts['repaired']} damaged part(s) replaced from the logs", file=out)
    print(
        f"{counts['stored']} run(s) stored, {counts['fresh']} already fresh; "
        f"{counts['parts']} part(s) in {Path(args.runs_dir) / '_store'}",
        file=out,
    )
    return 0


def _add_compact(sub: Any) -> None:
    c = sub.add_parser(
        "compact",
        help="write (or update) the columnar store of a runs folder, for fast loading and SQL",
        description="Store every run of RUNS_DIR not stored yet (or changed since) as Parquet in "
        "RUNS_DIR/_store, merged into one part per day. Safe to interrupt.",
    )
    c.add_argument("runs_dir", metavar="RUNS_DIR", help="the folder that holds the .jsonl traces")
    c.add_argument("--rebuild", action="store_true", help="throw the store away and re-derive it from the logs")
    c.add_argument(
        "--verify", action="store_true", help="read every row of every part, and replace each part that does not read"
    )
    c.set_defaults(fn=cmd_compact)


def cmd_runs(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """The runs in a traces folder, newest first: one line each (or one JSON object each)."""
    import warnings

    from ._model_label import started_label
    from .trace import load_runs, runs_dir

    folder = runs_dir(args.folder)
    if not folder.is_dir():
        print(f"agentlab runs: {folder} is not a folder (traces go to $AGENTLAB_RUNS, default ./runs)", file=err)
        return 2
    with warnings.catch_warnings(record=True) as caught:  # a damaged file is named once, below the table
        warnings.simplefilter("always")
        traces = list(load_runs(folder))
    shown = {t.run_id: started_label(t.started) for t in traces}  # "offline … (priced as …)" for a stand-in
    summaries = [t.summary for t in traces]
    summaries.sort(key=lambda s: str(s.get("started_at") or ""), reverse=True)
    if args.json:
        _print_json({"folder": str(folder), "runs": [_jsonable(s) for s in summaries]}, out)
    elif not summaries:
        print(f"no runs in {folder}", file=out)
    else:
        rows = [
            [
                s["run_id"],
                s["outcome"],
                s["reason"],
                s["steps"],
                f"${s['cost']:.4f}",
                shown.get(s["run_id"], s["model"]),
                str(s.get("started_at") or "")[:19].replace("T", " "),
            ]
            for s in summaries
        ]
        print(
            format_table(
                ["run id", "outcome", "reason", "steps", "cost", "model", "started (UTC)"], rows, right=(3, 4)
            ),
            file=out,
        )
        print(f"\n{len(rows)} run(s) in {folder}; read one: agentlab report RUN_ID --runs {folder}", file=out)
    for w in caught:
        print(f"warning: {w.message}", file=err)
    return 0


def cmd_notebooks(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Copy the teaching notebooks out of the installed package; never overwrite a file."""
    from ._teaching import copy_notebooks

    copied, kept = copy_notebooks(Path(args.folder))
    for f in copied:
        print(f"  {f}", file=out)
    for f in kept:
        print(f"  {f}  (already there: kept yours)", file=out)
    print(f"{len(copied)} notebook(s) copied to {args.folder}; open them: jupyter lab {args.folder}", file=out)
    print("(JupyterLab is in the lab extra: pip install 'agentlab-loop[lab]'; each notebook runs offline)", file=out)
    return 0


def _jsonable(value: Any) -> Any:
    """Plain JSON values: NaN and infinities as null, timestamps as ISO text, numpy scalars as numbers."""
    import math

    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if hasattr(value, "isoformat"):
        try:
            return value.isoformat()
        except ValueError:  # NaT
            return None
    if hasattr(value, "item"):  # a numpy scalar
        return _jsonable(value.item())
    return str(value)


def _records(frame: Any) -> list[dict[str, Any]]:
    """A DataFrame's rows as JSON objects (pandas does the dtype conversions)."""
    return list(json.loads(frame.to_json(orient="records", date_format="iso")))


def _print_json(document: Any, out: TextIO) -> None:
    print(json.dumps(document, ensure_ascii=False, indent=2, allow_nan=False), file=out)


# ------------------------------------------------------------------- main
def _positive(kind: type) -> Any:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected a {'whole ' if kind is int else ''}number, got {text!r}"
            ) from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    from ._version import installed_version

    p = argparse.ArgumentParser(
        prog="agentlab", description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--version", action="version", version=f"agentlab {installed_version()} (distribution agentlab-loop)"
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND", title="commands")

    d = sub.add_parser(
        "demo",
        help="run every scenario offline; print a summary table; write traces and plots",
        description="Run every scenario offline, print one summary table, write the traces and the key "
        "plots, and say where everything went.",
    )
    d.add_argument("--only", nargs="+", metavar="NAME", help="run only these scenarios")
    d.add_argument("--out", metavar="DIR", help="folder for the plots and summary.csv (default: RUNS/demo)")
    d.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    d.add_argument("--seed", type=int, default=0, help="seed of the offline models (default 0)")
    d.add_argument("--runs", metavar="DIR", help="traces folder (default: $AGENTLAB_RUNS or ./runs)")
    d.set_defaults(fn=cmd_demo)

    r = sub.add_parser(
        "run",
        help="run one task (or one scenario), printing each step as it happens",
        description="Run one task with the shop's tools (or your own: --tools module:attr), or one "
        "offline scenario, and print each step as it happens. A Claude model needs "
        "ANTHROPIC_API_KEY; --model offline (one reply, no tools) and --model offline-shop (a scripted "
        "assistant that uses the shop's tools) need none.",
    )
    r.add_argument("task", nargs="?", help='what to ask, e.g. "Why was order 1042 late?"')
    r.add_argument(
        "--tools",
        default="shop",
        metavar="shop|none|MODULE:ATTR",
        help="the toolset: the example shop (default), none, or module:attr naming a tool, a list of "
        "tools or a factory tools(task) -> list, as in an experiment spec",
    )
    r.add_argument(
        "--model",
        default="claude-sonnet-4-5",
        help="Claude model id (default: claude-sonnet-4-5), 'offline', 'offline:<id>' or 'offline-shop'",
    )
    r.add_argument("--scenario", metavar="NAME", help="run an offline scenario (see: agentlab scenarios)")
    r.add_argument("--seed", type=int, default=0, help="seed of a scenario's model (default 0)")
    r.add_argument("--max-steps", type=_positive(int), help="step budget")
    r.add_argument("--max-cost", type=_positive(float), metavar="USD", help="cost budget in dollars")
    r.add_argument("--deadline", type=_positive(float), metavar="SECONDS", help="wall-clock budget")
    r.add_argument("--runs", metavar="DIR", help="traces folder (default: $AGENTLAB_RUNS or ./runs)")
    r.add_argument("--json", action="store_true", help="print the result as one JSON object")
    r.set_defaults(fn=cmd_run)

    rep = sub.add_parser(
        "report",
        help="read a run's trace: budgets, every step, why it stopped",
        description="Print a run's trace as a report, or export it as a notebook.",
    )
    rep.add_argument("run_id", metavar="RUN_ID", help="the run's id (its trace file's name)")
    rep.add_argument("--notebook", metavar="OUT.ipynb", help="write the report as a notebook instead")
    rep.add_argument("--runs", metavar="DIR", help="traces folder (default: $AGENTLAB_RUNS or ./runs)")
    rep.add_argument("--json", action="store_true", help="print the run's summary, steps and tool calls as JSON")
    rep.set_defaults(fn=cmd_report)

    df = sub.add_parser(
        "diff",
        help="two runs side by side: aligned step by step, from the first divergence",
        description="Align two runs step by step (tool and arguments), show where they part and what each step cost.",
    )
    df.add_argument("a", metavar="RUN_A", help="a run id (or unique prefix, or a .jsonl path)")
    df.add_argument("b", metavar="RUN_B", help="the other run (a fork is aligned with its parent at the fork step)")
    df.add_argument("--runs", metavar="DIR", help="traces folder (default: $AGENTLAB_RUNS or ./runs)")
    df.add_argument("--html", metavar="OUT.html", help="also write the diff as a page (no script needed)")
    df.set_defaults(fn=cmd_diff)

    im = sub.add_parser(
        "import",
        help="turn recorded runs (Claude Code, Codex, Gemini CLI, SWE-agent, API logs…) into traces",
        description="Read recorded runs from a file or folder and write them as native trace files.",
    )
    im.add_argument("path", metavar="PATH", help="a recorded file or a folder of them")
    im.add_argument("--out", metavar="DIR", help="traces folder to write (default: $AGENTLAB_RUNS or ./runs)")
    im.add_argument(
        "--format",
        default="auto",
        choices=["auto", *_recorded_formats()],
        help="the records' format (default: recognised from the content)",
    )
    im.add_argument("--force", action="store_true", help="overwrite runs already in the traces folder")
    im.add_argument("--json", action="store_true", help="print the files written (and skipped) as JSON")
    im.add_argument(
        "--check",
        action="store_true",
        help="print each audit finding with its file and line; exit 1 when one is about money",
    )
    im.set_defaults(fn=cmd_import)

    ru = sub.add_parser(
        "runs",
        help="list the runs in a traces folder, newest first",
        description="List the runs in a traces folder (native or imported), newest first.",
    )
    ru.add_argument("folder", nargs="?", metavar="DIR", help="traces folder (default: $AGENTLAB_RUNS or ./runs)")
    ru.add_argument("--json", action="store_true", help="print each run's summary as JSON")
    ru.set_defaults(fn=cmd_runs)

    nb = sub.add_parser(
        "notebooks",
        help="copy the teaching notebooks out of the installed package",
        description="Copy the teaching notebooks into a folder (files already there are kept), "
        "then open them with jupyter lab. Each runs offline.",
    )
    nb.add_argument(
        "folder",
        nargs="?",
        default="agentlab-notebooks",
        metavar="DIR",
        help="where to put them (default: ./agentlab-notebooks)",
    )
    nb.set_defaults(fn=cmd_notebooks)

    sc = sub.add_parser("scenarios", help="list the offline scenarios and what each one teaches")
    sc.add_argument("-v", "--verbose", action="store_true", help="also print each lesson and task")
    sc.set_defaults(fn=cmd_scenarios)

    ex = sub.add_parser(
        "experiment",
        help="run a grid of tasks x configs under one total budget (TOML spec)",
        description="Run the experiment a TOML spec describes (see docs/experiments.md), printing "
        "progress and the summary table. Finished runs are kept in its folder.",
    )
    ex.add_argument("spec", metavar="SPEC", help="the experiment's .toml file")
    ex.add_argument("--resume", action="store_true", help="continue an experiment whose folder already holds runs")
    ex.add_argument("--name", help="run it under a new name (a new folder)")
    ex.add_argument("--quiet", action="store_true", help="no progress bar")
    ex.add_argument("--json", action="store_true", help="print the summary and every run's row as JSON")
    ex.set_defaults(fn=cmd_experiment)
    _add_compact(sub)
    return p


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """The ``agentlab`` command. Returns the exit status (0 ok, 1 a run did not end as expected,
    2 bad input or no command)."""
    out, err = out or sys.stdout, err or sys.stderr
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "fn", None) is None:  # no command: the help, as a usage error (exit 2)
        parser.print_help(err)
        return 2
    from .errors import AgentlabError

    try:
        return args.fn(args, out, err)
    except BrokenPipeError:  # `agentlab report X | head`: the reader left, which is fine
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps the interpreter's final flush quiet
        return 0
    except KeyboardInterrupt:
        print("interrupted", file=err)
        return 130
    except (KeyError, ValueError, TypeError, OSError, ImportError, AgentlabError) as exc:  # bad input: one line, exit 2
        print(f"agentlab {args.command}: {error_line(exc)}", file=err)
        return 2


def error_line(exc: BaseException) -> str:
    """An error as one line for a terminal: what failed and on which file, with no traceback."""
    if isinstance(exc, OSError) and exc.strerror:
        where = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f is not None)
        text = f"{exc.strerror}: {where}" if where else exc.strerror
    elif isinstance(exc, KeyError) and exc.args:
        text = str(exc.args[0])
    else:
        text = str(exc) or type(exc).__name__
    return "; ".join(part.strip() for part in text.splitlines() if part.strip())


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
