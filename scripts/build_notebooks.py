"""Build the teaching notebooks in notebooks/ from the cells below.

The notebooks are generated so they stay in step with the package: edit the
cells here, then run

    .venv/bin/python scripts/build_notebooks.py            # cells only
    .venv/bin/python scripts/build_notebooks.py --execute  # and store outputs (plots, tables)

Each notebook is one lesson of the article, in its order, and runs offline
in a fresh kernel; tests/test_notebooks.py executes every one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "notebooks"

SETUP = """\
%matplotlib inline
import os
import pandas as pd
import agentlab as al
from agentlab import analysis, plots, scenarios
from agentlab.trace import load_run, load_runs

os.environ.setdefault("AGENTLAB_RUNS", "runs")  # where this notebook's traces go
pd.set_option("display.max_colwidth", 90)"""


def md(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_markdown_cell(text.strip())


def code(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(text.strip())


NOTEBOOKS: dict[str, list[nbformat.NotebookNode]] = {}

# --------------------------------------------------------------------------- 1
NOTEBOOKS["01-the-loop-step-by-step"] = [
    md("""
# 1 · The loop, one step at a time

An agent is a loop: call the model, run the tools it asks for, hand the results
back, repeat until it answers or a budget runs out. `agentlab.Run` is that loop
with the steps exposed: `await run.step()` does exactly one model call and that
turn's tools, then stops, so you can look at everything in between.

Everything here runs offline. The model is a scripted *behaviour* that reacts to
the tool results it receives; the tools work on a real SQLite shop.
"""),
    code(SETUP),
    md("""
The scenario: a customer says order **1402** was late. There is no such order;
the tool's error says which orders have the same digits and how to list the
customer's orders. Watch the model use that hint.
"""),
    code("""
setup = scenarios.get("not-found-hint").setup()
run = setup.engine()           # an agentlab.Run, not started
print(run.task)
[t.name + f" ({t.mode})" for t in run.tools.values()]"""),
    code("""
record = await run.step()      # step 1: one model call, then its tools
record"""),
    md("""
The model asked for `get_order(1402)`. The tool raised a *recoverable* error, so
the loop handed it back as a `tool_result` with `is_error`: the last message of
the history is what the model reads next.
"""),
    code("""run.messages[-1]["content"][0]"""),
    md("""
Next step, but this time pause *before* the tools run: the calls wait in
`run.pending_calls` so you can read them first (the notebook panel has the same
switch).
"""),
    code("""
record = await run.step(pause_before_tools=True)
run.phase, run.pending_calls"""),
    code("""
await run.step()               # runs the pending calls and ends step 2
while not run.finished:
    await run.step()
run.result"""),
    md("""
Each step's numbers are plain values. Here is the run as a table: what each
call cost, how the spending added up, and the budget snapshot after it.
"""),
    code("""
steps = []
s2 = scenarios.get("not-found-hint").setup()
r2 = s2.engine()
while not r2.finished:
    rec = await r2.step()
    steps.append({"step": rec.step, "asked for": ", ".join(c["name"] for c in rec.tool_calls) or "(answer)",
                  "cost": rec.cost, "spent": rec.spent, "budget": str(rec.budget)})
pd.DataFrame(steps)"""),
    md("""
## The same run in the panel

`agentlab.Lab` wraps the same `Run` in a control panel: **step**, **run**,
**pause**, **stop**, the three budgets as gauges, and a live chart. The panel is
only a subscriber to the engine's events; nothing in the loop knows it is there.
"""),
    code("""
lab = scenarios.get("parallel-lookups").setup().lab()
lab.run()
lab"""),
    code("""
result = await lab.wait()
result"""),
]

# --------------------------------------------------------------------------- 2
NOTEBOOKS["02-three-budgets"] = [
    md("""
# 2 · Three budgets: steps, cost, time

* **Steps** catch the model that alternates between two tools forever.
* **Cost** catches eight legitimate steps that each re-send a huge context.
* **Time** catches the tool that hangs.

They fail independently, so each one is checked, and the result says which one
ran out, with the numbers.
"""),
    code(SETUP),
    code("""
results = {name: await scenarios.get(name).setup().arun()
           for name in ["ping-pong", "growing-context", "hanging-tool"]}
pd.DataFrame([{"scenario": n, "reason": r.reason, "steps": r.steps, "cost": round(r.cost, 4),
               "seconds": round(r.elapsed, 2), "detail": r.detail} for n, r in results.items()])"""),
    md("""
`ping-pong` never repeats a call, so loop detection cannot help, and each step
is cheap: only the step limit stops it. `hanging-tool` calls a carrier API that
never answers; the deadline bounds every tool, so the run ends at 1.5 s instead
of hanging with it.

## The hard cost guard, and the after-the-fact check

The article's sketch checks the cost *after* spending it. With a growing context
that overshoots: the step that crosses the line is the most expensive one yet.
agentlab's default, `cost_guard="hard"`, checks the worst case *before* each
call (estimated input plus `max_tokens` of output) and stops when it cannot fit.
"""),
    code("""
hard = await scenarios.get("growing-context").setup().arun()
after = await scenarios.get("growing-context").setup(cost_guard="after").arun()
free = await scenarios.get("growing-context").setup(max_cost=None).arun()
pd.DataFrame([{"guard": g, "reason": r.reason, "steps": r.steps, "spent": round(r.cost, 4),
               "over the $0.10 budget": round(max(0, r.cost - 0.10), 4)}
              for g, r in [("hard (default)", hard), ("after (the sketch)", after), ("no limit", free)]])"""),
    code("""
runs = load_runs()
labels = {hard.run_id: "hard guard", after.run_id: "after-the-fact check", free.run_id: "no limit"}
ax = plots.compare_runs(runs.steps, [free.run_id, after.run_id, hard.run_id], labels=labels)
ax.axhline(0.10, color="black", lw=1)
ax.figure"""),
    md("""
The hard guard stopped with money left, because the next call *could* have
cost more than what remained; the after-the-fact check only noticed once it was
already over.

## Budgets are a diagnosis

A stop reason is a value with numbers in it. Compare a generic "timeout" with:
"""),
    code("""for r in results.values():
    print(f"{r.reason:12} {r.detail}")"""),
]

# --------------------------------------------------------------------------- 3
NOTEBOOKS["03-three-kinds-of-failure"] = [
    md("""
# 3 · Three kinds of failure

| kind | examples | what the loop does |
|---|---|---|
| recoverable | not found, bad argument | hand it to the model with the next step |
| retryable | 429, 503, dropped connection | retry inside, invisibly, with backoff |
| fatal | permission denied, auth failure, unknown tool | stop the run; the model is not told |

One policy table (`agentlab.Policy`) decides which is which.
"""),
    code(SETUP),
    md("## Recoverable: an error that names the next step"),
    code("""
r = await scenarios.get("not-found-hint").setup().arun()
calls = r.trace.calls
calls[["step", "tool", "args", "outcome", "result_preview"]]"""),
    md("""
The first call failed, and its message said what to do; the model did it, found
that 1042 was the order with the same digits, and answered:
"""),
    code("r.text"),
    md("## Retryable: the model never hears about the 503s"),
    code("""
r = await scenarios.get("flaky-upstream").setup().arun()
t = r.trace
t.calls[["step", "tool", "outcome", "attempts", "duration"]]"""),
    code("""
retries = t.events[t.events["kind"] == "tool_retry"]
print(retries["data"].map(lambda d: f"attempt {d['attempt']}: {d['error']} → wait {d['wait']:.2f}s").to_string(index=False))
print("503 anywhere in what the model saw:", "503" in str(r.messages))"""),
    md("""
## Fatal: a permission denial stops the run

The classic bug is to hand "access denied" back to the model. It then looks for
another way to the same end. Below, the same model and the same task under two
policies: the default (fatal) and `Policy(permission_denied="recoverable")`.
"""),
    code("""
fatal = scenarios.get("permission-denied").setup()
probing = scenarios.get("permission-probing").setup()
rf, rp = await fatal.arun(), await probing.arun()
pd.DataFrame([{"policy": "fatal (default)", "reason": rf.reason, "steps": rf.steps, "cost": round(rf.cost, 4)},
              {"policy": "recoverable", "reason": rp.reason, "steps": rp.steps, "cost": round(rp.cost, 4)}])"""),
    code("""rp.trace.calls[["step", "tool", "args", "outcome"]]"""),
    md("""
With the denial treated as recoverable the model tried a smaller refund, a
status change, a search for refunded orders, and finally wrote a note *marking
the refund as approved*. The database shows it:
"""),
    code("""probing.shop.get_order(1042)["notes"], fatal.shop.get_order(1042)["notes"]"""),
]

# --------------------------------------------------------------------------- 4
NOTEBOOKS["04-loop-detection"] = [
    md("""
# 4 · Detecting the loop within the loop

A model that calls the same tool with the same arguments a third time is
usually stuck. agentlab keys every call by its tool name and the canonical JSON
of its arguments, and counts. Two identical calls are allowed (a retry after a
blip is legitimate). The third is **not run**: the model gets the earlier result
and a nudge to try something else. One more after the nudge stops the run with
`"loop detected"`.
"""),
    code(SETUP),
    code("""
recovers = await scenarios.get("repeat-recovers").setup().arun()
forever = await scenarios.get("repeat-forever").setup().arun()
recovers, forever"""),
    md("This is what the model read in place of its third call:"),
    code("""
nudge = forever.trace.calls.query("outcome == 'nudged'").iloc[0]
print(nudge["result_preview"])
print("...")
print(forever.trace.step(int(nudge["step"])).calls[0]["result"][-260:])"""),
    code("""forever.trace.calls[["step", "tool", "args", "outcome"]]"""),
    md("""
## How often does the nudge work?

The article's estimate is "roughly half the time". Across a batch of runs, the
recovery rate comes straight from the traces:
"""),
    code("""
batch = [await scenarios.get(name).setup(seed=seed).arun()
         for seed in range(3) for name in ("repeat-recovers", "repeat-forever")]
runs = load_runs().runs
print(analysis.loop_recovery(runs[runs["run_id"].isin([r.run_id for r in batch])]))"""),
]

# --------------------------------------------------------------------------- 5
NOTEBOOKS["05-parallel-tool-calls"] = [
    md("""
# 5 · Parallel tool calls

A model can ask for several tools in one turn. Independent reads run together:
three 0.4 s lookups take about 0.4 s, not 1.2 s. Results go back in one
message, in the order requested. Writes are the trap: two writes to the same
record, run at once, race. Tools are marked `read` or `write`; reads run
together, writes run alone.
"""),
    code(SETUP),
    code("""
lookups = await scenarios.get("parallel-lookups").setup().arun()
t = lookups.trace
ax = plots.tool_timeline(t.calls, steps=t.steps)
ax.figure"""),
    code("""analysis.parallel_speedup(t.calls)"""),
    md("The results came back in the order they were asked for:"),
    code("""
asked = [b["name"] for b in lookups.messages[1]["content"] if b["type"] == "tool_use"]
answered = [b["tool_use_id"] for b in lookups.messages[2]["content"]]
asked, answered"""),
    md("## Two writes to one record"),
    code("""
notes = scenarios.get("parallel-writes").setup()
r = await notes.arun()
ax = plots.tool_timeline(r.trace.calls, steps=r.trace.steps)
print(notes.shop.get_order(1042)["notes"])
ax.figure"""),
    md("""
`add_note` reads the order's notes, adds one, and writes them back. Run one after
the other, each sees the other's note. Here is what happens if the same tool is
(wrongly) declared a read, so the two calls run at the same time:
"""),
    code("""
from agentlab.shop import Shop

shop = Shop(write_latency=0.3, transactions=False)  # the naive read-then-write
add_note = al.Tool(next(t for t in shop.tools() if t.name == "add_note").fn, name="add_note", mode="read")
model = al.ScriptedModel([al.reply(None, ("add_note", {"order_id": 1042, "note": "first"}),
                                          ("add_note", {"order_id": 1042, "note": "second"})),
                          al.reply("done")])
await al.arun("note it twice", [add_note], model=model, trace=False)
shop.get_order(1042)["notes"]   # one note was lost: the race, designed by a language model"""),
]

# --------------------------------------------------------------------------- 6
NOTEBOOKS["06-traces-step-four"] = [
    md("""
# 6 · Traces: reading a failed run at step four

A failed run is nearly impossible to debug from its last message. Every
agentlab run writes a trace as it goes: one JSON line per event (the messages
sent, each tool call with its full arguments and result, token usage, timing),
keyed by the run id. Each step's *new* messages are stored once, and "what was
sent at step k" is rebuilt exactly.
"""),
    code(SETUP),
    code("""
failed = await scenarios.get("repeat-forever").setup().arun()
failed"""),
    code("""
trace = load_run(failed.run_id)
trace.steps[["step", "context_tokens", "cost", "cumulative_cost", "tool_calls", "stop_reason"]]"""),
    md("""
## Step four

`trace.step(4)` is everything that happened at step four: what the model was
sent, what it replied, and what each tool did.
"""),
    code("trace.step(4)"),
    md("""
At step four the model asked for the same carrier lookup a third time; the
loop did not run it and sent the nudge instead. At step five it asked again
and the run stopped. The exact messages the model received at step four:
"""),
    code("""
sent = trace.messages_at(4)
len(sent), sent[-1]"""),
    md("""
## Every run, as tables

`load_runs()` reads a whole folder of traces into DataFrames: one row per run,
per step, per tool call, per event. The columns are documented in
`docs/traces.md`.
"""),
    code("""
runs = load_runs()
runs.runs[["run_id", "outcome", "reason", "steps", "cost", "seconds", "nudges"]].tail()"""),
    md("A trace can also be exported as a notebook to share: `agentlab report RUN_ID --notebook out.ipynb`."),
]

# --------------------------------------------------------------------------- 7
NOTEBOOKS["07-cost-analysis"] = [
    md("""
# 7 · Cost: the quadratic curve, caching, what-ifs

Every step re-sends the whole conversation. If each step adds about the same
amount, step *k* sends about *k* times as much as step one, so the cost of a run
grows with the **square** of its length. The `growing-context` scenario audits
orders a page at a time; each page stays in the context.
"""),
    code(SETUP),
    code("""
free = await scenarios.get("growing-context").setup(max_cost=None).arun()
steps = load_run(free.run_id).steps
steps[["step", "context_tokens", "output_tokens", "cost", "cumulative_cost"]]"""),
    code("""
ax = plots.token_growth(steps)
ax.figure"""),
    code("""
fit = analysis.fit_cost_curve(steps)
print(f"cumulative cost ≈ {fit.a:.4f}·n² + {fit.b:.4f}·n + {fit.c:.4f}   "
      f"(R² {fit.r_squared:.3f}; a straight line only reaches {fit.linear_r_squared:.3f})")
ax = plots.cost_curve(steps, max_cost=0.10, max_steps=12, forecast_to=12)
ax.figure"""),
    md("""
## The article's numbers

"Step one sends 2,000 tokens, step eight sends 25,000." A projection with those
numbers, at Claude Sonnet's prices, with and without prompt caching:
"""),
    code("""
paper = analysis.CostProjection.growing(first_input=2000, reaches=25000, at_step=8)
pd.DataFrame({"steps": n, "no caching": round(paper.total_cost(n), 3),
              "with caching": round(paper.with_caching().total_cost(n), 3)} for n in (1, 4, 8, 16))"""),
    md("""
## Caching the same run

Re-price the recorded steps as if each request had read the previous one back
from the prompt cache. No model is called; the tokens are the recorded ones.
"""),
    code("""
ax = plots.caching_comparison(steps, "claude-sonnet-4-5")
ax.figure"""),
    md("""
## What if the budget had been different?

`budget_whatif` replays the engine's rules over recorded traces: which of them
a tighter (or looser) budget would have stopped, where, and how much it would
have saved.
"""),
    code("""
grid = analysis.budget_whatif(load_run(free.run_id), max_cost=[0.05, 0.10, 0.20, None], max_steps=[6, None])
grid[["max_steps", "max_cost", "outcome", "reason", "steps", "spent", "saved"]]"""),
]


# --------------------------------------------------------------------------- 9 (issue 17)
NOTEBOOKS["09-real-runs"] = [
    md("""
# 9 · Real runs: measured growth, caching, budgets, replay and fork

Every earlier lesson drew its curves from scripted runs. This one uses records
of real agents: per-step token counts from 179 mini-swe-agent runs on SWE-bench
(DeepSeek) and 26 Claude Code runs, shipped with the package (numbers only; the
sources and licences are in `agentlab/data/real_usage/README.md`), and a real
Claude Code session imported whole. Nothing here calls a model.
"""),
    code(SETUP + """
from pathlib import Path
import numpy as np
from matplotlib.figure import Figure
from agentlab.datasets import real_usage
from agentlab.forking import fork, replay_setup

real = real_usage()
steps = real.steps.merge(real.runs[["run_id", "model"]], on="run_id")
steps["agent"] = np.where(steps["model"].str.startswith("claude"), "Claude Code", "mini-swe-agent")
real.runs.groupby(real.runs["model"].str.startswith("claude").map({True: "Claude Code", False: "mini-swe-agent"}))[
    ["steps", "cost"]].describe().round(3)"""),
    md("""
## How fast does the context grow?

The lesson on budgets used an illustration: step one sends 2,000 tokens, step
eight sends 25,000. Below, the same two points beside the **median input per
step** of the real runs that lasted at least eight steps (input counts every
token the model read: uncached, written to and read from the cache).
"""),
    code("""
long_runs = steps.groupby("run_id")["step"].transform("max") >= 8
medians = (steps[long_runs & (steps["step"] <= 20)]
           .groupby(["agent", "step"])["context_tokens"].median().unstack(0))
illustration = pd.Series(np.interp(medians.index, [1, 8], [2_000, 25_000]), index=medians.index)
table = medians.assign(**{"illustration (2k → 25k)": illustration}).round(0).astype(int)
table.loc[[1, 2, 4, 8, 12, 16, 20]]"""),
    code("""
fig = Figure(figsize=(8, 4.5))
ax = fig.subplots()
for name, color in (("mini-swe-agent", "#4c72b0"), ("Claude Code", "#dd8452")):
    ax.plot(medians.index, medians[name], "o-", color=color, label=f"{name}: measured median")
ax.plot(medians.index[:8], illustration.iloc[:8], "k--", label="the illustration: 2,000 → 25,000 by step 8")
ax.set(xlabel="step", ylabel="input tokens per step", yscale="log", title="Context per step: illustration and measurement")
ax.legend(); fig"""),
    code("""
first, eighth = medians.loc[1], medians.loc[8]
for name in medians:
    print(f"{name:15s} step 1: {first[name]:>8,.0f}   step 8: {eighth[name]:>8,.0f}   "
          f"growth x{eighth[name] / first[name]:.1f}")
print(f"{'illustration':15s} step 1: {2000:>8,}   step 8: {25000:>8,}   growth x12.5")"""),
    md("""
**Where the illustration and the measurements differ.** The shape holds: input
grows every step in both real agents, so cumulative cost bends upward. The
numbers do not. The illustration multiplies the context by 12.5 in eight steps;
the measured medians grow about 3x (mini-swe-agent) and under 2x (Claude Code),
because a real agent starts from a large fixed prompt (Claude Code's system
prompt and tool definitions are over 20,000 tokens before the first word of
the task) and each step adds a few hundred to a few thousand tokens. The
illustration's step one (2,000) is close to mini-swe-agent's; its step eight
(25,000) is five times mini-swe-agent's and half of Claude Code's, which
*starts* above it.

## A line per step, a parabola per run

If each step adds about the same amount, input per step is a straight line in
the step number and cumulative cost a quadratic. Fit both to every run with at
least eight steps, and count the runs each describes well (R² ≥ 0.9).
"""),
    code("""
rows = []
for run_id, s in steps[long_runs].groupby("run_id"):
    x, y = s["step"].to_numpy(float), s["context_tokens"].to_numpy(float)
    line = np.polyfit(x, y, 1)
    r2_line = 1 - ((y - np.polyval(line, x)) ** 2).sum() / max(((y - y.mean()) ** 2).sum(), 1e-9)
    try:
        fit = analysis.fit_cost_curve(s[["run_id", "step", "input_tokens", "output_tokens", "cache_read_tokens",
                                         "cache_write_tokens", "cost"]].assign(cost=s["cost"].fillna(0)))
        r2_quad = fit.r_squared
    except ValueError:
        r2_quad = float("nan")
    rows.append({"agent": s["agent"].iloc[0], "run_id": run_id, "steps": len(s), "tokens added per step": line[0],
                 "R² line (input)": r2_line, "R² quadratic (cumulative cost)": r2_quad})
fits = pd.DataFrame(rows)
fits.groupby("agent").agg(runs=("run_id", "count"), median_added_per_step=("tokens added per step", "median"),
                          line_fits=("R² line (input)", lambda r: f"{(r >= 0.9).mean():.0%}"),
                          quadratic_fits=("R² quadratic (cumulative cost)", lambda r: f"{(r >= 0.9).mean():.0%}"))"""),
    md("""
A straight line describes per-step input in every mini-swe-agent run and in
three Claude Code runs out of four (the rest jump when a large file or tool
output lands in the context); a quadratic describes cumulative cost in all of
them. The lesson's claim holds on real runs; only the slope is smaller than
the illustration's: a few hundred tokens a step for mini-swe-agent, about a
thousand for Claude Code, not three thousand.

## What prompt caching did to the Claude Code runs

Claude Code reads almost all of its context back from the prompt cache. Price
the same recorded tokens as if nothing had been cached, and compare.
"""),
    code("""
cc = steps[steps["agent"] == "Claude Code"]
rows = []
for model, s in cc.groupby("model"):
    uncached = analysis.reprice(s, model, caching=False)["cost"].sum()
    rows.append({"model": model, "runs": s["run_id"].nunique(), "steps": len(s),
                 "read from cache": s["cache_read_tokens"].sum() / s["context_tokens"].sum(),
                 "cost as recorded ($)": s["cost"].sum(), "cost with no caching ($)": uncached})
caching = pd.DataFrame(rows)
caching.loc["all"] = ["all", cc["run_id"].nunique(), len(cc), cc["cache_read_tokens"].sum() / cc["context_tokens"].sum(),
                      caching["cost as recorded ($)"].sum(), caching["cost with no caching ($)"].sum()]
caching.style.format({"read from cache": "{:.1%}", "cost as recorded ($)": "{:.2f}", "cost with no caching ($)": "{:.2f}"})"""),
    md("""
About 97% of every Claude Code request was read back from the cache, at a
tenth of the input price: the same tokens priced without caching cost about
seven times as much. (The shipped numbers do not say which cache writes had the
one-hour lifetime, so writes are priced at the five-minute rate here; an
imported session file knows, and prices each write by its lifetime.)
"""),
    code("""
biggest = cc.groupby("run_id")["step"].max().idxmax()
ax = plots.caching_comparison(cc[cc["run_id"] == biggest], cc.loc[cc["run_id"] == biggest, "model"].iloc[0])
ax.figure"""),
    md("""
## What would a hard budget have stopped?

`budget_whatif` applies the engine's rules to the recorded runs: which ones a
cost or step limit would have stopped, at which step, and what it would have
saved. The runs are real; only the limits are imagined.
"""),
    code("""
grid = analysis.budget_whatif(real, max_cost=[0.05, 0.25, 1.0, None], max_steps=[30, None])
analysis.whatif_summary(grid)"""),
    code("""
ax = plots.whatif_grid(grid)
ax.figure"""),
    md("""
## One real session, step by step

`load_recorded` reads a Claude Code session file (here a subagent's run from a
public repository, in the test fixtures) into the same `Trace` a native run
gives. `replay_setup` drives it in the lab panel offline: the model answers with
the recorded replies, the tools with the recorded results, and the gauges show
the recorded spend. Click *Step* to go one step at a time.
"""),
    code("""
fixtures = Path(al.__file__).resolve().parent.parent / "tests" / "fixtures" / "recorded"
session = al.load_recorded(fixtures / "claude_code" / "ae4a77f8-aedd-4bc1-888f-c94edc91af04" / "subagents" / "agent-aac57f5.jsonl")
session"""),
    code("""
lab = al.Lab(**replay_setup(session), chart=False)
await lab.step()
lab"""),
    code("""
await lab.run()
print(lab.result)
print(f"replayed spend ${lab.engine.spent:.4f}; recorded ${session.summary['cost']:.4f}")"""),
    md("""
## Fork it: same history, another model

`fork(trace, at_step=k, ...)` starts a run whose history is the record's first
`k` steps and continues live with what you change. Offline, a scripted model
stands in for the other model; the fork's trace names its parent, and
`plots.fork_curve` draws both on one cost curve.
"""),
    code("""
from agentlab.trace import TraceWriter
branch = fork(session, at_step=1, model=al.ScriptedModel([al.reply("The answer is in the hooks docs.")]),
              max_cost=None, subscribers=[TraceWriter()], run_id="fork-demo")
await branch.run()
ax = plots.fork_curve(session, load_run("fork-demo"))
ax.figure"""),
]


def build(execute: bool = False, names: list[str] | None = None) -> list[Path]:
    """Write every notebook (or ``names``); with ``execute``, run each and keep the outputs."""
    OUT.mkdir(exist_ok=True)
    written = []
    for name, cells in NOTEBOOKS.items():
        if names and name not in names:
            continue
        nb = nbformat.v4.new_notebook(cells=cells)
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nb.metadata["language_info"] = {"name": "python"}
        if execute:
            from nbclient import NotebookClient

            NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(OUT)}}).execute()
        path = OUT / f"{name}.ipynb"
        nbformat.write(nb, path)
        written.append(path)
    return written


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--execute", action="store_true", help="run each notebook and store its outputs")
    parser.add_argument("names", nargs="*", help="only these notebooks (file names without .ipynb)")
    args = parser.parse_args()
    for p in build(args.execute, args.names):
        print(p.relative_to(ROOT), file=sys.stdout)
