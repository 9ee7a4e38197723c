"""Build the teaching notebooks in notebooks/ from the cells below.

The notebooks are generated so they stay in step with the package: edit the
cells here, then run

    .venv/bin/python scripts/build_notebooks.py            # cells only
    .venv/bin/python scripts/build_notebooks.py --execute  # and store outputs (plots, tables)

With ``--execute`` each notebook runs in a fresh kernel (in notebooks/, its
traces in notebooks/runs/NAME/, which git ignores) and is saved with its
widget state as it is after the last cell, so a panel shows the finished run
on GitHub, nbviewer and in a static HTML export.

Each notebook is one lesson of the article, in its order, and runs offline
in a fresh kernel; tests/test_notebooks.py executes every one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's agentlab, for its markdown rule

from agentlab._safe_text import no_math_markdown  # noqa: E402 - after the path above

OUT = ROOT / "notebooks"

NOTEBOOK = "__NOTEBOOK__"
"""Written in a cell's source, replaced by the notebook's own name when it is built."""

SETUP = """\
%matplotlib inline
import os
import shutil
import pandas as pd
import agentlab as al
from agentlab import analysis, plots, scenarios
from agentlab.trace import load_run, load_runs

al.notebook()  # tables: a "$" is money, not LaTeX; no text cut mid-word (docs/notebooks.md)
RUNS = os.path.join("runs", "__NOTEBOOK__")  # this notebook's traces, and only this notebook's
shutil.rmtree(RUNS, ignore_errors=True)      # start empty, so every table below is this run's
os.environ["AGENTLAB_RUNS"] = RUNS"""

OFFLINE = """
**Runs offline**, at no cost: the model is a scripted *behaviour* that reacts to the
tool results it reads, priced as Claude Sonnet.
"""


ON_CLAUDE = """
Nothing reads `ANTHROPIC_API_KEY`; with a key, pass `model=al.AnthropicModel()`
to a scenario's `.arun()`, `.lab()` or `.engine()`, and
"""


def offline_note(on_claude: str) -> str:
    """The first cell's paragraph: offline, exactly what to change to use Claude, and what that changes."""
    return OFFLINE.strip() + "\n" + ON_CLAUDE.strip() + " " + on_claude.strip()


def md(text: str) -> nbformat.NotebookNode:
    """A markdown cell; its dollar amounts read as money in every front end (agentlab._safe_text.no_math_markdown)."""
    return nbformat.v4.new_markdown_cell(no_math_markdown(text.strip()))


def code(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(text.strip())


def exercise(intro: str, placeholder: str, check: str) -> list[nbformat.NotebookNode]:
    """A lesson's closing exercise: what to do, a cell for the learner, and a check cell that grades it offline."""
    cells = [md("## Exercise\n\n" + intro.strip()), code(placeholder), code(check)]
    cells[1].metadata["tags"] = ["exercise"]
    cells[2].metadata["tags"] = ["check"]
    return cells


SOLUTIONS = "Stuck? One solution is in `notebooks/solutions/lessons.py`; try first, the check says what is missing."

NOTEBOOKS: dict[str, list[nbformat.NotebookNode]] = {}

# --------------------------------------------------------------------------- 1
NOTEBOOKS["01-the-loop-step-by-step"] = [
    md(
        """
# 1 · The loop, one step at a time

An agent is a loop: call the model, run the tools it asks for, hand the results
back, repeat until it answers or a budget runs out. This lesson first writes
that loop by hand, then runs the same task through `agentlab.Run`, whose
`await run.step()` does exactly one model call and that turn's tools, then
stops, so you can look at everything in between.

"""
        + offline_note("""
the replies, and so the number of steps, are Claude's own and vary from run to
run, and the costs are what Anthropic bills. The tools still work on the same
local SQLite shop. (The loop by hand below calls `bare.model`: replace it with
`al.AnthropicModel()` there too.)
""")
    ),
    code(SETUP),
    md("""
## The loop by hand

The scenario: a customer says order **1402** was late. There is no such order;
the tool's error says which orders share its digits and how to list the
customer's orders. Here is the whole loop, written out once, against the
scenario's offline model and its tools (plain Python functions):
"""),
    code("""
import json
from agentlab.models.base import ModelRequest

bare = scenarios.get("not-found-hint").setup()
functions, definitions = {t.name: t.fn for t in bare.tools}, [t.definition() for t in bare.tools]
messages = [{"role": "user", "content": bare.task}]
for turn in range(1, 7):                                   # a step limit, and nothing else
    reply = await bare.model.complete(ModelRequest(None, messages, definitions, max_tokens=1024))
    messages.append({"role": "assistant", "content": reply["content"]})
    calls = [b for b in reply["content"] if b["type"] == "tool_use"]
    print(f"turn {turn}:", ", ".join(f"{c['name']}({c['input']})" for c in calls) or "answers")
    if not calls:
        break
    results = []
    for c in calls:                                        # one at a time, in order
        try:
            out, failed = json.dumps(functions[c["name"]](**c["input"]), default=str), False
        except Exception as e:                             # every failure goes back to the model
            out, failed = e.for_model() if isinstance(e, al.ToolError) else f"{type(e).__name__}: {e}", True
        results.append({"type": "tool_result", "tool_use_id": c["id"], "content": out, "is_error": failed})
    messages.append({"role": "user", "content": results})
print(messages[-1]["content"][-1]["text"] if messages[-1]["role"] == "assistant" else "no answer within six turns")"""),
    md("""
About fifteen lines of loop (the tools' definitions go with every request, so
the model knows what it may call), and it works: four model calls, three tools, an answer
(a `ToolError` carries a hint, `for_model()` puts it in the text). It is
also what every lesson after this one improves on. It counts turns but not
dollars or seconds; a hung tool hangs it; every exception, a 503 or a denied
refund alike, goes back to the model; a model asking the same thing forever
only meets the turn limit; the calls of one turn run one after the other; and
once the cell ends nothing is left but `messages`.

## The same task through `Run.step()`

`setup.engine()` builds an `agentlab.Run` for the same task, model and tools.
Each `await run.step()` is one pass of the `for` loop above.
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
The same four model calls and the same answer as the loop by hand. What
`Run.step()` adds, line by line of that loop:

| the loop by hand | `Run.step()` |
|---|---|
| `for turn in range(1, 7)` | three budgets, steps, dollars and wall clock, checked before every call (lesson 2) |
| `except Exception` → back to the model | three kinds of failure: recoverable goes back, retryable is retried with backoff, fatal stops the run (lesson 3) |
| nothing | a third identical call is answered with a nudge; a fourth stops the run (lesson 4) |
| `for c in calls` | reads run together, writes alone, results in the order asked (lesson 5) |
| `print` | every event to a JSONL trace, keyed by run id (lesson 6) |
| `break` | a `Done` or `Stopped` that says why, with numbers |

Each step's numbers are plain values. Here is a fresh run as a table: what each
call cost, how the spending added up, and the budget snapshot after it.
"""),
    code("""
steps = []
r2 = scenarios.get("not-found-hint").setup().engine()
while not r2.finished:
    rec = await r2.step()
    steps.append({"step": rec.step, "asked for": ", ".join(c["name"] for c in rec.tool_calls) or "(answer)",
                  "cost": round(rec.cost, 4), "spent": round(rec.spent, 4), "budget": str(rec.budget)})
pd.DataFrame(steps)"""),
    md("""
## The panel

`agentlab.Lab` wraps a `Run` in a control panel: **step**, **run**, **pause**,
**stop**, the three budgets as gauges, a live chart and a log of every step.
The panel is only a subscriber to the engine's events; nothing in the loop
knows it is there. Here it drives the same scenario once more. The notebook was
saved after the run: on GitHub, in nbviewer, on the docs site and in an HTML
export the panel below shows the finished run before you execute anything.
JupyterLab shows the panel's text summary until you run the cell (it drops saved
widgets when the kernel starts); running it draws the live panel.
"""),
    code("""
lab = scenarios.get("not-found-hint").setup().lab()
lab.run()
lab"""),
    code("""
result = await lab.wait()
result"""),
]

# --------------------------------------------------------------------------- 2
NOTEBOOKS["02-three-budgets"] = [
    md(
        """
# 2 · Three budgets: steps, cost, time

* **Steps** catch the model that alternates between two tools forever.
* **Cost** catches eight legitimate steps that each re-send a huge context.
* **Time** catches the tool that hangs.

They fail independently, so each one is checked, and the result says which one
ran out, with the numbers.

"""
        + offline_note("""
the dollars are billed; the budgets work the same way,
but which one stops a run depends on what the model does. The hanging tool and
the growing context are properties of the tools, so they stop a real model too.
""")
    ),
    code(SETUP),
    code("""
results = {name: await scenarios.get(name).setup().arun()
           for name in ["ping-pong", "growing-context", "hanging-tool"]}
limits = {name: scenarios.get(name).options for name in results}
pd.DataFrame([{"scenario": n, "reason": r.reason,
               "steps": f"{r.steps} of {limits[n]['max_steps']}",
               "cost": f"${r.spent:.4f} of ${limits[n]['max_cost']:.2f}",
               "seconds": f"{r.elapsed:.2f} of {limits[n]['deadline_s']:g}"} for n, r in results.items()])"""),
    md("""
## Never the same call twice

`ping-pong` changes its arguments on every call, so loop detection, which
counts *identical* calls, never fires. The calls of that run, counted:
"""),
    code("""
pp = results["ping-pong"].trace.calls
keys = pp["tool"] + " " + pp["args"].astype(str)
print(f"{len(pp)} tool calls, {keys.nunique()} different (tool, arguments) pairs; "
      f"the most repeated was asked for {keys.value_counts().max()} time(s)")
pp[["step", "tool", "args"]]"""),
    md("""
Each of its steps is cheap too, so only the step limit stops it.
`hanging-tool` calls a carrier API that never answers; the deadline bounds
every tool, so the run ends at 1.5 s instead of hanging with it.

## The hard cost guard, and the after-the-fact check

The article's sketch checks the cost *after* spending it. With a growing context
that overshoots: the step that crosses the line is the most expensive one yet.
agentlab's default, `cost_guard="hard"`, checks *before* each call. It
estimates the input's cost from the context about to be sent; if the input plus
the configured `max_tokens` of reply would not fit in what is left, it lowers
`max_tokens` for that call to what does fit, and it stops the run only when not
even a minimal reply (32 output tokens) fits. That is why the stop detail below
quotes the input plus a minimal reply, not the input plus `max_tokens`.
"""),
    code("""
hard = await scenarios.get("growing-context").setup().arun()
after = await scenarios.get("growing-context").setup(cost_guard="after").arun()
free = await scenarios.get("growing-context").setup(max_cost=None).arun()
pd.DataFrame([{"guard": g, "reason": r.reason, "steps": r.steps, "spent": round(r.spent, 4),
               "over the $0.10 budget": round(max(0, r.spent - 0.10), 4)}
              for g, r in [("hard (default)", hard), ("after (the sketch)", after), ("no limit", free)]])"""),
    code("""
print(f"'no limit' means no dollar limit: the run still had its {scenarios.get('growing-context').options['max_steps']}-step "
      f"limit, ended '{free.reason}' after {free.steps} steps, and spent ${free.spent:.3f}.")"""),
    code("""
runs = load_runs()
labels = {hard.run_id: "hard guard", after.run_id: "after-the-fact check", free.run_id: "no limit"}
ax = plots.compare_runs(runs.steps, [free.run_id, after.run_id, hard.run_id], labels=labels)
ax.axhline(0.10, color="black", lw=1, ls="--", label="the budget (0.10 USD)")
ax.legend()
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
    md(
        """
# 3 · Three kinds of failure

| kind | examples | what the loop does |
|---|---|---|
| recoverable | not found, bad argument | hand it to the model with the next step |
| retryable | 429, 503, dropped connection | retry inside, invisibly, with backoff |
| fatal | permission denied, auth failure, unknown tool | stop the run; the model is not told |

One policy table (`agentlab.Policy`) decides which is which.

"""
        + offline_note("""
the model's own errors go through the same table: a 429 or 529 from the
Messages API is retried with backoff, a refused key is an authentication
failure and stops the run at its first call.
""")
    ),
    code(SETUP),
    md("## Recoverable: an error that names the next step"),
    code("""
r = await scenarios.get("not-found-hint").setup().arun()
calls = r.trace.calls
calls[["step", "tool", "args", "outcome"]]"""),
    code("""print(r.trace.step(1).calls[0]["result"])"""),
    md("""
The first call failed, and its message said what to do; the model did it, found
that 1042 was the order with the same digits, and answered:
"""),
    code("print(r.text)"),
    md("## Retryable: the model never hears about the 503s"),
    code("""
r = await scenarios.get("flaky-upstream").setup().arun()
t = r.trace
t.calls[["step", "tool", "outcome", "attempts"]]"""),
    code("""
for d in t.events[t.events["kind"] == "tool_retry"]["data"]:
    print(f"attempt {d['attempt']} failed, waiting {d['wait']:.2f}s before the next: {d['error']}")
print("503 anywhere in what the model saw:", "503" in str(r.messages))"""),
    md("""
Two failures, two waits (the backoff doubles, with jitter), and the third
attempt answered; the model's history holds only that answer.

## Fatal: unknown tool, authentication failure

The article's prose lists an unknown tool as fatal, while its code sketch hands
"unknown tool" back to the model as an error to read. agentlab follows the
prose by default: a model asking for a tool that does not exist is either
confused about its instructions or being steered by something it read, and
another step rarely fixes either. `Policy(unknown_tool="recoverable")` gives the
sketch's behaviour for anyone who wants it.
"""),
    code("""
ghost = al.ScriptedModel([al.reply(None, ("delete_customer", {"customer_id": 7})), al.reply("Done.")])
shop_tools = scenarios.get("not-found-hint").setup().tools
unknown = await al.arun("Remove customer 7.", shop_tools, model=ghost)
lenient = await al.arun("Remove customer 7.", shop_tools, policy=al.Policy(unknown_tool="recoverable"),
                        model=al.ScriptedModel([al.reply(None, ("delete_customer", {"customer_id": 7})),
                                                al.reply("There is no tool to delete customers.")]))
print("default:    ", unknown.reason, "-", unknown.detail)
print("recoverable:", lenient.reason, "-", lenient.text)"""),
    md("A refused API key is fatal too: retrying a 401 only repeats it."),
    code("""
def refused(messages, tools):
    raise al.AuthenticationFailed("401 invalid x-api-key")

auth = await al.arun("Where is order 1042?", shop_tools, model=al.FunctionModel(refused))
print(auth.reason, "-", auth.detail, f"(steps: {auth.steps})")"""),
    md("""
## Fatal: a permission denial stops the run

The classic bug is to hand "access denied" back to the model. It then looks for
another way to the same end. Below, one scenario (the same scripted model, the
same task, the same shop) under two policies: `Policy(permission_denied="recoverable")`,
which `permission-probing` uses to show the bug, and agentlab's default, fatal.
"""),
    code("""
fatal = scenarios.get("permission-probing").setup(policy=al.Policy())   # the default policy
probing = scenarios.get("permission-probing").setup()                   # denials handed to the model
rf, rp = await fatal.arun(), await probing.arun()
pd.DataFrame([{"policy": "fatal (default)", "reason": rf.reason, "steps": rf.steps, "cost": round(rf.spent, 4)},
              {"policy": "recoverable", "reason": rp.reason, "steps": rp.steps, "cost": round(rp.spent, 4)}])"""),
    md("""
Under the default policy the run stops at the first denial, and the diagnosis
says which tool, which role it needed and which the agent had; the model never
reads it:
"""),
    code("""print(rf.reason, "-", rf.detail)"""),
    md("With the denial handed back, every step is another attempt:"),
    code("""rp.trace.calls[["step", "tool", "args", "outcome"]]"""),
    md("""
With the denial treated as recoverable the model tried a smaller refund
(step 3), tried to set the order's status to "refunded" (step 4, refused as
well: that status needs the same role), searched for orders that had been
refunded (step 5) and then asked for a full refund of £86.40, "to match order
1077's", a refund nobody asked for, larger than the one that was denied
(step 6). The refund tool denied that too. Finally it wrote a note *marking
the refund as approved* (step 7), the one write it was allowed.

**What is scripted and what is measured.** That story is the scripted model's,
not a model's choice: `Refunder` in `agentlab/scenarios/behaviours.py` holds
a fixed list of five calls (the £20 refund, the £5 refund, the status change,
the search, the £86.40 refund), takes the next one each time the last result
came back, and writes the note once the list is used up. It is written to
act out the article's warning; Claude, given the same denials, might try
fewer routes, others, or give up at once. What the lab measured, and what
holds for any model, is the loop's side: under the recoverable policy each
denial went back to the model and every further attempt was one more paid
step (the table above: the steps and the cost), the shop ran every call it
allowed, and the one permitted write (the note) is in the database; under
the default policy the run stopped at the first denial, before the model
could choose anything. The database shows the difference:
"""),
    code("""probing.shop.get_order(1042)["notes"], fatal.shop.get_order(1042)["notes"]"""),
]

# --------------------------------------------------------------------------- 4
NOTEBOOKS["04-loop-detection"] = [
    md(
        """
# 4 · Detecting the loop within the loop

A model that calls the same tool with the same arguments a third time is
usually stuck. agentlab keys every call by its tool name and the canonical JSON
of its arguments, and counts. Two identical calls are allowed (a retry after a
blip is legitimate). The third is **not run**: the model gets the earlier result
and a nudge to try something else. One more after the nudge stops the run with
`"loop detected"`.

"""
        + offline_note("""
whether a nudged model changes course is Claude's decision, not a script's:
that is the number worth measuring on your own runs (the last section).
""")
    ),
    code(SETUP),
    code("""
recovers = await scenarios.get("repeat-recovers").setup().arun()
forever = await scenarios.get("repeat-forever").setup().arun()
print(recovers.reason, "-", recovers.text)
print(forever.reason, "-", forever.detail)"""),
    md("This is what the model read in place of its third call, the earlier result and then the nudge:"),
    code("""
nudge = forever.trace.calls.query("outcome == 'nudged'").iloc[0]
print(forever.trace.step(int(nudge["step"])).calls[0]["result"])"""),
    code("""forever.trace.calls[["step", "tool", "args", "outcome"]]"""),
    md("""
The table has three `carrier_status` rows, and the stop detail says the call
was requested four times. Both are right: the calls table lists calls that were
run or answered (steps 2 and 3 ran, step 4 was answered with the nudge); the
fourth request, at step 5, was never run, because the loop stopped the run
instead. It is in the trace as that step's reply:
"""),
    code("""forever.trace.step(5)"""),
    md("""
## A successful write starts the count again

The count is not for the whole run. A write that succeeds changes the world,
so the same read after it may rightly answer differently (check an order,
add a note, check it again), and agentlab clears every count when a write
succeeds. A write that fails changed nothing and clears nothing. The same
scripted reads, three ways: nothing between the second and third read, a note
written there, and a note the shop refuses (it is empty):
"""),
    code('''
from agentlab.shop import Shop

async def reads_around(note):
    """get_order(1042) twice; then add_note(note) unless `note` is None; then get_order(1042) three times more."""
    look = ("get_order", {"order_id": 1042})
    write = [("add_note", {"order_id": 1042, "note": note})] if note is not None else []
    model = al.ScriptedModel([al.reply(None, call) for call in [look, look, *write, look, look, look]]
                             + [al.reply("done")])
    return await al.arun("check order 1042", Shop().tools(), model=model, max_steps=10)

for label, note in [("no write between", None), ("a note written", "phoned the customer"), ("a note refused", " ")]:
    r = await reads_around(note)
    calls = " ".join(f"{c.tool}:{c.outcome}" for c in r.trace.calls.itertuples())
    print(f"{label:18} {r.reason:14} {calls}")'''),
    md("""
With nothing between them, the third identical read is nudged and the fourth
stops the run. After the written note the count starts again from zero: two
more reads run and only the fifth `get_order` of the run, the third since the
write, is nudged. The refused note reset nothing, so the very next read is the
third and is nudged.

The price of the reset: a model that alternates a write with the same read
(note, check, note, check...) is never caught by this rule. The step limit and
the dollar budget still bound it, which is why loop detection is one check
among three, not a replacement for them.
"""),
    md("""
## Switched off

Without loop detection (here: a nudge threshold no run reaches) the same
scripted model asks the same question until the step limit stops it, and each
of those steps is paid for:
"""),
    code("""
off = await scenarios.get("repeat-forever").setup(loop_nudge_at=10_000).arun()
pd.DataFrame([{"loop detection": label, "reason": r.reason, "steps": r.steps, "cost": round(r.spent, 4)}
              for label, r in [("on (default)", forever), ("off", off)]])"""),
    md("""
## How often does the nudge work?

The article's estimate is "roughly half the time". An offline model cannot
check it: `repeat-recovers` is scripted to change course after the nudge and
`repeat-forever` is scripted not to, so a batch of three of each recovers
exactly half by construction, and says nothing about real models:
"""),
    code("""
batch = [await scenarios.get(name).setup(seed=seed).arun()
         for seed in range(3) for name in ("repeat-recovers", "repeat-forever")]
runs = load_runs().runs
print(analysis.loop_recovery(runs[runs["run_id"].isin([r.run_id for r in batch])]), "- built into the mix, not measured")"""),
    md("""
On your own runs the same helper measures it. Point `load_runs` at the folder
your real runs write their traces to (`$AGENTLAB_RUNS`, `./runs` by default, or
traces imported with `agentlab import`), and count the nudged runs that still
ended with an answer:

```python
real = load_runs("path/to/your/runs").runs
print(analysis.loop_recovery(real))        # "k of n nudged runs finished (p%)"
```

Only runs that were nudged count, so the rate needs a fair number of them
before it means much. Here, the runs this notebook made:
"""),
    code("""
mine = load_runs(RUNS).runs
mine[["run_id", "outcome", "reason", "nudges"]]"""),
]

# --------------------------------------------------------------------------- 5
NOTEBOOKS["05-parallel-tool-calls"] = [
    md(
        """
# 5 · Parallel tool calls

A model can ask for several tools in one turn. Independent reads run together:
three 0.4 s lookups take about 0.4 s, not 1.2 s. Results go back in one
message, in the order requested. Writes are the trap: two writes to the same
record, run at once, race. Tools are marked `read` or `write`; reads run
together, writes run alone.

"""
        + offline_note("""
Claude decides whether to ask for several tools in one turn; when it does, the
engine runs them exactly as here. The latencies are the shop's simulated ones.
""")
    ),
    code(SETUP),
    code("""
lookups = await scenarios.get("parallel-lookups").setup().arun()
t = lookups.trace
ax = plots.tool_timeline(t.calls, steps=t.steps)
ax.figure"""),
    code("""analysis.parallel_speedup(t.calls).round(3)"""),
    md("""
## Results in the order asked, whatever order they finish in

The three lookups above take 0.4 s each, so they also *finish* together, and
"results in request order" could not be told apart from "results in finishing
order". Here are three reads of unequal duration whose finishing order is
fixed by construction, not by a stopwatch: the customer answers first, the
order history only after the customer, the order only after the history
(each waits for the one before it, then 0.2 s more, so the timeline shows
three different lengths). The model asks for them as order, customer, history:
"""),
    code('''
import asyncio
from agentlab.shop import Shop

async def unequal_lookups():
    """Three reads asked for in one turn; returns (the order they finished in, the order their results were sent)."""
    shop, finished = Shop(), []
    customer_done, history_done = asyncio.Event(), asyncio.Event()

    async def get_order(order_id: int) -> dict:
        """One order (answers last: after the order history)."""
        await history_done.wait()
        await asyncio.sleep(0.2)
        finished.append("get_order")
        return shop.get_order(order_id)

    async def get_customer(customer_id: int) -> dict:
        """One customer (answers first)."""
        await asyncio.sleep(0.2)
        finished.append("get_customer")
        customer_done.set()
        return shop.get_customer(customer_id)

    async def search_orders(customer_id: int) -> dict:
        """A customer's order history (answers second: after the customer)."""
        await customer_done.wait()
        await asyncio.sleep(0.2)
        finished.append("search_orders")
        history_done.set()
        return shop.search_orders(customer_id)

    tools = [al.Tool(fn, mode="read", timeout=10) for fn in (get_order, get_customer, search_orders)]
    model = al.ScriptedModel([al.reply(None, ("get_order", {"order_id": 1042}), ("get_customer", {"customer_id": 7}),
                                             ("search_orders", {"customer_id": 7})),
                              al.reply("done")])
    run = await al.arun("order, customer, history", tools, model=model)
    names = {b["id"]: b["name"] for b in run.messages[1]["content"] if b["type"] == "tool_use"}
    sent = [names[b["tool_use_id"]] for b in run.messages[2]["content"]]
    return finished, sent, run

finished, sent, unequal = await unequal_lookups()
print("asked for:         get_order, get_customer, search_orders")
print("finished in:      ", ", ".join(finished))
print("results sent back:", ", ".join(sent))'''),
    code("""
ax = plots.tool_timeline(unequal.trace.calls, steps=unequal.trace.steps)
ax.figure"""),
    md("""
The reads finished last-asked-first, and the tool results went back to the
model in the order it asked for them: each `tool_result` sits where its
`tool_use` was, which is what the Messages API pairs them by.
"""),
    md("## Two writes to one record"),
    code("""
notes = scenarios.get("parallel-writes").setup()
r = await notes.arun()
print(notes.shop.get_order(1042)["notes"])
r.trace.calls[["step", "tool", "args", "outcome", "start", "end"]].round(3)"""),
    code("""
ax = plots.tool_timeline(r.trace.calls, steps=r.trace.steps)
ax.figure"""),
    md("""
The two `add_note` calls ran one after the other, each 0.2 s between reading
the notes and writing them back, so both notes are there. That shop also
wraps each note in a database transaction, which on its own would keep both.
To see what the scheduling decides, take the transactions away (a plain
read-then-write, as most tools are) and change one thing only: whether
`add_note` is declared a `read` (so the two calls run at the same time) or a
`write` (one after the other):
"""),
    code('''
async def two_notes(mode):
    """Two notes to one order in one turn, with `add_note` declared `mode`; returns the notes kept."""
    notes = []

    async def add_note(order_id: int, note: str) -> dict:
        """Add a note: read the notes, think, write them back (no lock, as most tools are)."""
        seen = list(notes)                # read
        for _ in range(20):               # think: any other call running now gets its turn, here,
            await asyncio.sleep(0)        # between this call's read and its write (no clock involved)
        notes[:] = [*seen, note]          # write back what was read, plus this note
        return {"order_id": order_id, "notes": list(notes)}

    model = al.ScriptedModel([al.reply(None, ("add_note", {"order_id": 1042, "note": "first"}),
                                              ("add_note", {"order_id": 1042, "note": "second"})),
                              al.reply("done")])
    await al.arun("note it twice", [al.Tool(add_note, mode=mode)], model=model, trace=False)
    return notes

for mode in ["read", "write"]:
    print(f"add_note declared {mode!r}: notes kept = {await two_notes(mode)}")'''),
    md("""
Declared a read, one note is lost, and always the same one: both calls read the
same empty list before either writes, so the second write replaces the first
(a race designed by a language model). The tool above makes the window
explicit (it yields to any other running call between its read and its
write), so the race is lost every time, not only when the timing is unlucky;
a real read-then-write loses it whenever two calls overlap. Declared a
write, the second call starts only after the first has written, and both
notes are kept.

## Read, write, read in one turn

A turn may mix them. Reads next to each other run together; a write waits for
the reads before it and runs alone; a read after the write starts only once
the write is done, so it sees what was written:
"""),
    code("""
shop = Shop(latency=0.2, write_latency=0.2)
model = al.ScriptedModel([al.reply(None, ("get_order", {"order_id": 1042}), ("get_customer", {"customer_id": 7}),
                                          ("add_note", {"order_id": 1042, "note": "called the customer"}),
                                          ("get_order", {"order_id": 1042})),
                          al.reply("done")])
mixed = await al.arun("read, note, read again", shop.tools(), model=model)
print("the last read sees the note:", "called the customer" in mixed.messages[2]["content"][3]["content"])
ax = plots.tool_timeline(mixed.trace.calls, steps=mixed.trace.steps)
ax.figure"""),
]

SAME_EVERY_RUN = "same-every-run"
"""The tag of a demonstration whose printed output is fixed by construction (tests/test_notebooks.py runs it twice)."""
for _cell in NOTEBOOKS["05-parallel-tool-calls"]:
    if _cell.cell_type == "code" and any(
        f in _cell.source for f in ("async def unequal_lookups", "async def two_notes", "read, note, read again")
    ):
        _cell.metadata["tags"] = [SAME_EVERY_RUN]

# --------------------------------------------------------------------------- 6
NOTEBOOKS["06-traces-step-four"] = [
    md(
        """
# 6 · Traces: reading a failed run at step four

A failed run is nearly impossible to debug from its last message, and the
worst ones end with a message that sounds fine. Every agentlab run writes a
trace as it goes: one JSON line per event (the messages sent, each tool call
with its full arguments and result, token usage, timing), keyed by the run id.
Each step's *new* messages are stored once, and "what was sent at step k" is
rebuilt exactly.

The run read here is the `hidden-denial` scenario: the agent is asked to check
a late order with the carrier and refund the customer £20. Its role may not
refund, the denial is handed back to the model as a recoverable error (the
policy 03 warns about), and the scripted model does what real models do often
enough to matter: it carries on as if the refund had gone through.

"""
        + offline_note("""
the trace records Claude's own token counts (instead of estimates), its
cache reads and writes, and the API's request ids; reading it works the same.
Whether Claude hides a refusal is Claude's choice; the model here is scripted
to, so the lesson (how to find it in the trace) shows every time.
""")
    ),
    code(SETUP),
    code("""
setup = scenarios.get("hidden-denial").setup()
result = await setup.arun()
print(result.reason, "·", result.steps, "steps")
print(result.text)"""),
    md("""
## What the last message says, and what happened

By its result the run succeeded: it ended `done` after
<span class="claim">6 steps</span>, and its last message says the customer was
refunded. Nothing in the result says otherwise. The shop's own records do:
"""),
    code("""
refunds = setup.shop.query("SELECT * FROM refunds WHERE order_id = 1042")
notes = setup.shop.get_order(1042)["notes"]
refunds, notes"""),
    md("""
No refund exists for order 1042 (an empty list), and the only sign of one in
the shop is a note the agent wrote: the next person to read the order will
believe the customer was paid. Where did it go wrong? The answer is not in the
last message; it is in the trace.

## The steps, then the calls

`trace.steps` has a row per model call. Nothing stands out: every step asked
for one tool, the context grew a little each time, and the last reply ended the
turn (`end_turn`).
"""),
    code("""
trace = load_run(result.run_id)
trace.steps[["step", "stop_reason", "tool_calls", "context_tokens", "cost", "cumulative_cost"]]"""),
    md("""
`trace.calls` has a row per tool call, with its outcome and the start of its
result. Filter it for errors and the cause is one row:
"""),
    code("""
calls = trace.calls[["step", "tool", "mode", "outcome", "is_error", "result_preview"]]
calls[calls["is_error"]]"""),
    md("""
The refund, a write, was refused at step <span class="claim">4</span> with
`PermissionDenied`: <span class="claim">refund_order needs role 'billing'</span>.
The run's own diagnosis is empty (its detail is `''`), because as far as the loop
knows nothing failed: the policy made the denial recoverable, the model got it
as a tool result and chose to continue.
"""),
    code("""
trace.summary["outcome"], trace.summary["reason"], trace.summary["detail"]"""),
    md("""
## Step four

`trace.step(4)` is everything that happened at step four: what the model was
sent, what it replied, and what each tool did.
"""),
    code("trace.step(4)"),
    md("""
The times are milliseconds and less: an offline model answers in microseconds.
With a real model a step takes seconds, and the same line shows them.

Was the model told? `trace.messages_at(5)` is exactly what it was sent at step
five; the last message is the tool result for the refund:
"""),
    code("""
sent = trace.messages_at(5)
len(sent), sent[-1]"""),
    md("""
It was told, with `is_error: true` (and the loop's generic advice for a
recoverable error, "try another approach", which is an invitation here), and
its next reply wrote a note instead of telling the user. That is what the
trace settles: not "the model could not refund" (it never could) but "the
model knew, and its answer hid it".

## The same refusal, treated as fatal

With the default policy a permission denial is fatal: the run stops at the
refusal, no note is written, and the diagnosis names the tool and the role.
This is the run you want: its last message is not the model's, it is the loop's.
"""),
    code("""
strict = await scenarios.get("hidden-denial").setup(policy=al.Policy()).arun()
print(strict.reason, "·", strict.steps, "steps")
print(strict.detail)"""),
    md("""
Stopped (<span class="claim">fatal</span>) at step
<span class="claim">4</span>, the step the first run hid.

## Every run, as tables

`load_runs()` reads a whole folder of traces into DataFrames: one row per run,
per step, per tool call, per event. The columns are documented in
`docs/traces.md`. This notebook writes to its own folder, so the tables hold
its runs only: the two above, and two more made here whose errors were
handled honestly (a mistyped order id the model recovered from, a flaky
carrier the loop retried).
"""),
    code("""
for name in ("not-found-hint", "flaky-upstream"):
    await scenarios.get(name).setup().arun()
runs = load_runs()
runs.runs[["run_id", "outcome", "reason", "steps", "cost", "detail"]]"""),
    md("""
A run that ended `done` with a failed *write* in it is worth reading: the
answer may claim what the write did not do. One query over the calls finds
every such run in a folder (a read that failed and was recovered from, like
not-found-hint's mistyped order, is not flagged):
"""),
    code("""
failed_writes = runs.calls[runs.calls["is_error"] & runs.calls["mode"].eq("write")]
suspects = runs.runs[runs.runs["outcome"].eq("done") & runs.runs["run_id"].isin(failed_writes["run_id"])]
suspects[["run_id", "steps", "cost"]]"""),
    md("""
## Sharing one run

`agentlab report RUN_ID` prints a run's summary from its trace; with
`--notebook out.ipynb` it writes the run as a notebook to share. Here it is on
the run whose answer hid its failure, called in-process (in a terminal:
`agentlab report RUN_ID`); step 4 shows the refusal:
"""),
    code("""
from agentlab.cli import main as agentlab_command   # the same function the `agentlab` command runs

status = agentlab_command(["report", result.run_id, "--runs", RUNS])"""),
]

# --------------------------------------------------------------------------- 7
NOTEBOOKS["07-cost-analysis"] = [
    md(
        """
# 7 · Cost: the quadratic curve, caching, what-ifs

Every step re-sends the whole conversation. If each step adds about the same
amount, the context at step *k* is a constant (the task, the tool definitions)
plus *k − 1* times that growth, so the cost of one step grows linearly and the
cost of a run grows with the **square** of its length. The `growing-context`
scenario audits orders a page at a time; each page stays in the context.

"""
        + offline_note("""
the token counts are Claude's own (the offline ones are estimated from the
characters sent) and the dollars are billed; the shape of the curve is the same.
""")
    ),
    code(SETUP),
    code("""
free = await scenarios.get("growing-context").setup(max_cost=None).arun()
steps = load_run(free.run_id).steps
steps[["step", "context_tokens", "output_tokens", "cost", "cumulative_cost"]].round(4)"""),
    code("""
import numpy as np
growth, start = np.polyfit(steps["step"], steps["context_tokens"], 1)
first, last = steps["context_tokens"].iloc[0], steps["context_tokens"].iloc[-1]
print(f"context at step k ≈ {first:,} + {growth:,.0f}·(k − 1) tokens")
print(f"step {len(steps)} sends {last:,} tokens, {last / first:.1f}× step 1: "
      f"each page ({growth:,.0f} tokens) is {growth / first:.1f}× the whole first request")"""),
    md("""
So "step *k* sends *k* times step one" holds only when each step adds as much
as the first request held. Here each page adds more than twice that, so step 9
sends about 19× step 1; a run whose steps add little (short tool results) grows
far slower. Either way the per-step cost is a straight line and the total a
parabola:
"""),
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
numbers, at Claude Sonnet 4.5's prices, with and without prompt caching. It
assumes each reply is 400 output tokens (and that the reply is part of what the
next step adds); change `output_per_step=` to try others.
"""),
    code("""
paper = analysis.CostProjection.growing(first_input=2000, reaches=25000, at_step=8)
print(f"adds {paper.added_per_step:,} tokens a step, of which {paper.output_per_step} are the model's reply")
pd.DataFrame({"steps": n, "no caching": round(paper.total_cost(n), 3),
              "with caching": round(paper.with_caching().total_cost(n), 3)} for n in (1, 4, 8, 16))"""),
    md("""
With caching, one step costs *more* than without: the first request writes the
prompt to the cache, and a cache write is billed at 1.25× the input price
($3.75 instead of $3 per million tokens on Sonnet 4.5). Every later step reads
that prefix back at a tenth of the input price, so from the second step on
caching wins, and by step 16 it costs under a third.

## The article's four dollars

"Eight legitimate steps, each with a 30,000-token context, spend four dollars."
Eight steps of 30,000 input tokens are 240,000 input tokens, plus the replies
(400 tokens each, as above). At today's list prices:
"""),
    code("""
from agentlab.pricing import lookup_prices

rows = []
for model in ("claude-haiku-4-5", "claude-sonnet-4-5", "claude-opus-4-5", "claude-opus-4-1"):
    p = lookup_prices(model)
    rows.append({"model": model, "input $/Mtok": p.input, "output $/Mtok": p.output,
                 "8 steps × 30,000 tokens": round((8 * 30_000 * p.input + 8 * 400 * p.output) / 1e6, 2)})
pd.DataFrame(rows)"""),
    md("""
About $<span class="claim">0.77</span> on Sonnet 4.5 and $<span class="claim">1.28</span> on Opus 4.5: the four dollars hold only at
Opus 4.1's $15 per million input tokens ($<span class="claim">3.84</span>), with no caching. The point
stands at today's prices too: on Sonnet 4.5 those eight ordinary steps cost
about nineteen times a four-cent question's worth, and no step limit of eight
would have stopped them.

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
grid[["max_steps", "max_cost", "outcome", "reason", "steps", "spent", "saved"]].round(4)"""),
    md("""
Read the grid as a menu of limits for this run, which spent
$<span class="claim">0.2768</span> unchecked over <span class="claim">9</span> steps. A $0.05 budget
stops it after <span class="claim">3</span> steps at $<span class="claim">0.0315</span>; $0.10 after
<span class="claim">5</span> at $<span class="claim">0.0863</span>, which is where the hard guard stopped the
live run in notebook 2. A step limit of 6 binds before a $0.20 budget does
($<span class="claim">0.1239</span>), but with no step limit a $0.20 budget lets it run to step
<span class="claim">7</span> ($<span class="claim">0.1682</span>). Each stop leaves money unspent: the
"saved" column is what the rest of the run would have cost. None of these runs was
wrong to continue; a budget says how much of a legitimate run you are willing to pay for.
"""),
]


NOTEBOOKS["08-experiments"] = [
    md("""
# 8 · Experiments: many runs, one total budget, one table

One run answers "what did the agent do?". The questions worth a notebook are
about many runs: *which configuration answers more for less? how often does a
tight budget stop a run that would have finished? how much do repeats vary?*
An experiment runs a grid of **tasks × configurations × repeats** as ordinary
runs, at most `concurrency` at a time, under one hard **total** budget, and
gives back one DataFrame. Each model call reserves its worst case against the
shared total before it is sent, so the total is never passed, however many
runs are in flight.

**What the outcomes are.** The shipped shop study asks 12 support questions
(one, two or three lookups each) under five configurations, each changing one
thing the article teaches: prompt caching, a small `max_tokens`, a tight
per-run budget checked before each call (`hard`) or after each step (`after`).
The model is a *scripted analyst* (`agentlab.scenarios.shop_study.analyst`),
built so that those knobs act the way the article says they act on a real
model: with caching its usage reports cache reads, so caching saves money; its
verdict comes at the end of a long reply, so a small `max_tokens` cuts it off;
the three-lookup questions need more than the tight budget allows. So the
findings below about *which knob does what* are properties of the script, as
in notebook 4; what this notebook shows is how to run, read and compare an
experiment, numbers and intervals included. With `ANTHROPIC_API_KEY` set you
would pass `model=` a Claude model to `shop_experiment` (nothing here reads
the key), and the same tables would measure Claude.
"""),
    code(SETUP),
    code("""
import shutil
import warnings
from agentlab.scenarios.shop_study import CONFIGS, shop_experiment

folder = os.path.join(os.environ["AGENTLAB_RUNS"], "experiments")
shutil.rmtree(folder, ignore_errors=True)  # start fresh each time the notebook runs
pd.DataFrame(CONFIGS).T"""),
    md("""
## Run the grid

The widget counts done / running / stopped / not-run cells, the dollars spent
of the total and the time left; **Stop** ends every run at its next safe point
and keeps what finished. The 12 tasks × 5 configs × 2 repeats are 120 runs;
the two repeats of a task differ only in the analyst's seeded filler words.
"""),
    code("""
exp = shop_experiment(folder=folder, repeats=2, max_total_cost=3.00)
result = await exp.arun()
result"""),
    md("""
Running the same experiment again skips every finished cell, so a rerun
(after a crash, or after adding a config) costs nothing for what is already
there. Here, a second `arun()` on the same folder runs no cell and returns the
same rows:
"""),
    code("""
again = await shop_experiment(folder=folder, repeats=2, max_total_cost=3.00, progress=False).arun()
same = again.runs[["task_id", "config", "repeat", "outcome", "cost"]].equals(result.runs[["task_id", "config", "repeat", "outcome", "cost"]])
print(f"rows: {len(again.runs)}; identical to the first run's: {same}")"""),
    code("""
result.runs[["task_id", "config", "repeat", "outcome", "reason", "steps", "cost", "cache_read_tokens", "score"]].head(10)"""),
    md("""
## What counts as a success

A run is a success when it ended `done` and its answer passed the scorer
(`includes`: the task's target appears in the answer). A run that was
*stopped* (a budget, `max_tokens`, the deadline) is a failure, whatever its
partial text says; a cell the experiment itself cut short is no sample at all.

## Which configuration answers more for less?

Per-run cost alone does not answer it: a configuration that stops runs early
is cheap per run and answers less. `cost_per_success` is every dollar a
configuration spent divided by the questions it answered, and `success` has a
95 % interval (12 tasks × 2 repeats is a small sample).
"""),
    code("""
summary = result.summary()
summary[["samples", "success", "success_lo", "success_hi", "cost_mean", "cost_per_success", "stop_reasons"]].round(4)"""),
    md("""
Configurations are compared **paired by task**: the same 12 questions are
asked under each, so the difference that matters is per question (repeats
averaged), resampled over tasks, not two independent piles of runs.
"""),
    code("""
rows = []
for other in ["cached", "short replies", "tight budget", "tight budget, check after"]:
    c = result.compare("baseline", other)   # per task: other minus baseline, resampled over tasks
    rows.append({"against baseline": other, "tasks": int(c.loc["success", "tasks"]),
                 "success difference": c.loc["success", "difference"],
                 "95 % interval": f"{c.loc['success', 'lo']:+.3f} to {c.loc['success', 'hi']:+.3f}",
                 "cost difference": c.loc["cost", "difference"],
                 "cost 95 % interval": f"{c.loc['cost', 'lo']:+.4f} to {c.loc['cost', 'hi']:+.4f}"})
pd.DataFrame(rows).set_index("against baseline").round(4)"""),
    md("""
And how much do repeats vary? Each task ran twice per configuration; the
spread between its two repeats is what seeded wording alone changes:
"""),
    code("""
result.repeat_spread().round(4)"""),
    md("""
## Cost against success
"""),
    code("""
ax = result.plot_cost_vs_success()
ax.figure"""),
    code("""
ax = result.plot_cost_distribution()
ax.figure"""),
    md("""
## How the runs ended

A small `max_tokens` cuts the long answers off before their verdict, which
comes last: those runs stop with `max_tokens` and count as failures, while the
short answers that fit end `done`. The tight budget stops runs before a call
it cannot afford (`budget`).

**Checked after, a limit is passed.** `tight budget, check after` has the same
$0.022 limit, checked after each step as in the article's sketch: it stops no
run before its last step, so every run that needed more than $0.022 finished
*over* it. The after-check cannot stop the step that crosses the line:
"""),
    code("""
after = result.runs[result.runs["config"] == "tight budget, check after"]
over = after[after["cost"] > 0.022]
print(f"{len(over)} of {len(after)} runs ended over the $0.022 limit, by up to "
      f"{(over['cost'].max() / 0.022 - 1):.0%}" if len(over) else "no run passed the limit")
ax = result.plot_stop_reasons()
ax.figure"""),
    md("""
## What caching changes, step by step

Every step sends the whole conversation again, so the context grows with each
step whatever the configuration: caching, a short `max_tokens` and a budget
change what a step *costs* or when the run stops, not what a step sends. What
caching changes is the price of the part sent again, which is most of it. Per
step, the median over the runs of `baseline` and of `cached` (the same tasks,
the same script):
"""),
    code("""
both = result.steps[result.steps["config"].isin(["baseline", "cached"])]
per_step = both.groupby(["step", "config"])[["context_tokens", "cache_read_tokens", "cost"]].median().unstack("config")
per_step.columns = [f"{what} ({config})" for what, config in per_step.columns]
per_step["cached ÷ baseline cost"] = per_step["cost (cached)"] / per_step["cost (baseline)"]
per_step.round(4)"""),
    code("""
gap = (per_step["context_tokens (cached)"] / per_step["context_tokens (baseline)"] - 1).abs().max()
ratio = per_step["cached ÷ baseline cost"]
print(f"context sent per step, cached against uncached: within {gap:.1%} (only the seeded filler words differ)")
print(f"step 1 with caching costs {ratio.iloc[0]:.2f}× the same step without: it writes the cache, which costs more")
print(f"from step 2 on, a cached step costs {ratio.iloc[1:].min():.2f} to {ratio.iloc[1:].max():.2f}× the same step "
      "uncached: the prefix sent again is read from the cache")"""),
    md("""
The first step pays for writing the cache; every later step reads the part
it sends again from it. So the two levers of a long run are separate: caching
lowers the price of each token sent again, and only a shorter run (fewer steps, or less kept in the
context) sends fewer of them. Notebook 7 measures the growth itself: a cost
per step that rises linearly and a run cost that grows with the square of its
length.
"""),
    md("""
## A total that runs out

With a total of $0.40 the runs in flight stop with `experiment budget` when
the next call's worst case no longer fits, and cells that never started are
rows with outcome `not run`. The spend never passes the total. Cells run
round-robin over the configurations, so a grid cut short leaves each
configuration about the same tasks, and the summary warns when the samples
are still unequal:
"""),
    code("""
small = shop_experiment(folder=folder, name="small-total", max_total_cost=0.40, progress=False)
r = await small.arun()
print(f"spent ${r.runs.cost.sum():.4f} of $0.40")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    cut = r.summary()
for w in caught:
    print("warning:", w.message)
cut[["runs", "not_run", "samples", "success", "cost_per_success"]].round(4)"""),
]


# --------------------------------------------------------------------------- 9 (issue 17)
NOTEBOOKS["09-real-runs"] = [
    md("""
# 9 · Real runs: measured growth, caching, budgets, replay and fork

Every earlier lesson drew its curves from scripted runs. This one uses records
of real agents: per-step token counts from 179 mini-swe-agent runs on SWE-bench
(DeepSeek) and 26 Claude Code runs, shipped with the package (numbers only; the
sources and licences are in `agentlab/data/real_usage/README.md`), and one real
Claude Code session file. Nothing here calls a model, so nothing here reads
`ANTHROPIC_API_KEY`: the records are what they are, and the dollars are the
lab's pricing of their recorded tokens at list prices (Claude Code files record
no cost).

**What the 26 "Claude Code runs" are.** They are pieces of 20 session files of
one project, split where a session compacted its context or switched model:
so later pieces start mid-session with a context already in the tens of
thousands of tokens, and some pieces are a single compaction call. Fewer runs
reach each later step, so a median at step 20 is partly a statement about which
runs lasted that long (the tables below say how many runs each step has).
"""),
    code(
        SETUP
        + """
from pathlib import Path
import numpy as np
from matplotlib.figure import Figure
from agentlab.datasets import real_usage
from agentlab.forking import fork, replay_setup

real = real_usage()
steps = real.steps.merge(real.runs[["run_id", "model"]], on="run_id")
steps["agent"] = np.where(steps["model"].str.startswith("claude"), "Claude Code", "mini-swe-agent")
real.runs.groupby(real.runs["model"].str.startswith("claude").map({True: "Claude Code", False: "mini-swe-agent"}))[
    ["steps", "cost"]].describe().round(3)"""
    ),
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
illustration[illustration.index > 8] = np.nan   # the article gives nothing past step 8: no value is invented
runs_at = steps[long_runs & (steps["step"] <= 20)].groupby(["agent", "step"])["run_id"].nunique().unstack(0)
table = medians.round(0).astype(int).join(runs_at.add_suffix(" runs")).assign(**{"illustration (2k → 25k)": illustration})
table.loc[[1, 2, 4, 8, 12, 16, 20]]"""),
    code("""
fig = Figure(figsize=(8, 4.5))
ax = fig.subplots()
for name, color in (("mini-swe-agent", "#4c72b0"), ("Claude Code", "#dd8452")):
    ax.plot(medians.index, medians[name], "o-", color=color, label=f"{name}: measured median")
ax.plot(medians.index[:8], illustration.iloc[:8], "k--", label="the illustration: 2,000 → 25,000 by step 8 (no more given)")
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

## And what does a real step cost?

Tokens are not dollars. With prompt caching most of a Claude Code step's input
is read back at a tenth of the price, so its cost per step grows far less than
its context does; the first step pays for writing the cache. Median cost per
step, beside the context it sent (the same long runs):
"""),
    code("""
per_step = (steps[long_runs & (steps["step"] <= 20)].groupby(["agent", "step"])[["context_tokens", "cost"]].median()
            .unstack(0).loc[[1, 2, 4, 8, 12, 16, 20]])
per_step.columns = [f"{agent}: {what}" for what, agent in per_step.columns]
short_outputs = (steps.loc[steps["agent"] == "Claude Code", "output_tokens"] <= 5).mean()
print(f"{short_outputs:.0%} of the Claude Code steps record at most 5 output tokens (a logging artefact of the "
      "session files, not short replies): output cost is understated there")
per_step.round({c: (4 if c.endswith("cost") else 0) for c in per_step.columns})"""),
    md("""
## A line per step, a parabola per run

If each step adds about the same amount, input per step is a straight line in
the step number and cumulative cost a quadratic. An R² alone cannot tell the
two apart: a straight line fitted to a run's *cumulative* cost also fits well,
because any growing sum is close to a line. Nor can a significance test on
the cumulative curve be trusted: each point of a running total contains all
the points before it, so its residuals are not independent, and a regression's
t statistic on them counts every step as fresh evidence when it is not (it
overstates the evidence many times over).

The test that fits asks the same question of quantities that *are* close to
independent: the **step-to-step changes** of a per-step series. A run's cost
bends upward exactly when its steps get dearer, that is, when the changes in
the cost of a step are mostly increases. So, per run, for the context each
step sent and for each step's cost: the changes between consecutive steps,
their median, and a sign test (how many of the changes are increases, against
a fair coin); a rise that coin flips would give less than one time in twenty
(p < 0.05) counts as a real rise.
"""),
    code("""
from math import comb

def sign_test(ups, moves):
    \"\"\"One-sided p-value: the chance of at least `ups` increases in `moves` fair coin flips.\"\"\"
    return sum(comb(moves, k) for k in range(ups, moves + 1)) / 2 ** moves

def rising(values):
    \"\"\"The step-to-step changes of a per-step series, and whether they rise more often than a coin explains.\"\"\"
    change = np.diff(values)
    ups, moves = int((change > 0).sum()), int((change != 0).sum())
    return change, bool(moves and sign_test(ups, moves) < 0.05)

rows = []
for run_id, s in steps[long_runs].groupby("run_id"):
    s = s.sort_values("step")
    x, cost = s["step"].to_numpy(float), s["cost"].fillna(0).to_numpy()
    y = cost.cumsum()
    total = max(((y - y.mean()) ** 2).sum(), 1e-12)
    line, curve = np.polyfit(x, y, 1), np.polyfit(x, y, 2)
    added, context_rises = rising(s["context_tokens"].to_numpy(float))
    dearer, cost_rises = rising(cost)
    rows.append({"agent": s["agent"].iloc[0], "run_id": run_id,
                 "R² line": 1 - ((y - np.polyval(line, x)) ** 2).sum() / total,
                 "R² quadratic": 1 - ((y - np.polyval(curve, x)) ** 2).sum() / total,
                 "tokens added per step": np.median(added), "context rises": context_rises,
                 "cost change per step": np.median(dearer), "cost rises": cost_rises})
fits = pd.DataFrame(rows)
share = lambda b: f"{b.mean():.0%}"
fits.groupby("agent").agg(runs=("run_id", "count"), median_R2_line=("R² line", "median"),
                          median_R2_quadratic=("R² quadratic", "median"),
                          tokens_added_per_step=("tokens added per step", "median"),
                          context_rises_significantly=("context rises", share),
                          cost_change_per_step=("cost change per step", "median"),
                          cost_rises_significantly=("cost rises", share)).round(6)"""),
    md("""
Both fits score high R² everywhere, which is why R² is no test here. The
sign test answers the two questions separately. The **context** of every long
run grows: in each of them the next request is larger than the last far more
often than chance allows (a median of a few hundred tokens added per step).
The **cost per step** mostly does not: its changes go up about as often as
down, in every Claude Code run and in most mini-swe-agent runs. The test asks
less of the data than a regression (only the direction of each change, so one
cache write's expensive step cannot make a run look quadratic on its own) and
so it claims less: that is the honest size of the evidence. What keeps the
price of a growing context nearly flat is the cache (the next section): the
context is sent again every step, and read back at a tenth of the price.
"""),
    md("""
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
                 "cost at list prices ($)": s["cost"].sum(), "cost with no caching ($)": uncached})
caching = pd.DataFrame(rows)
caching.loc["all"] = ["all", cc["run_id"].nunique(), len(cc), cc["cache_read_tokens"].sum() / cc["context_tokens"].sum(),
                      caching["cost at list prices ($)"].sum(), caching["cost with no caching ($)"].sum()]
caching.style.format({"read from cache": "{:.1%}", "cost at list prices ($)": "{:.2f}", "cost with no caching ($)": "{:.2f}"})"""),
    md("""
Over all the Claude Code steps together, about 97% of the input tokens were
read back from the cache (an aggregate ratio: a single request's share varies,
and the first request of a session reads nothing), at a tenth of the input
price: the same tokens priced without caching cost about seven times as much.
("Cost at list prices" is the lab's pricing of the recorded tokens.) (The shipped numbers do not say which cache writes had the
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
    md("""
A grid of 205 runs is unreadable as one figure, so it is drawn for the runs
where a budget matters most: the 15 that cost the most unchecked (the table
above has all 205).
"""),
    code("""
dearest = real.runs.nlargest(15, "cost")["run_id"]
ax = plots.whatif_grid(grid[grid["run_id"].isin(dearest)])
ax.set_title("Budget what-if: the 15 dearest runs of 205", loc="left")
ax.figure"""),
    md("""
How to read a cell: the reason the replayed run would have ended and, after
`@`, the engine's step count at that moment, the number of model calls it
would have made. Two kinds of cell need a word:

- **`budget @0`**: stopped before its first call. The engine checks each
  call's worst case before sending it (its input, billed at the model's price,
  plus the smallest reply), and for these runs the very first request is
  already dearer than the whole budget: long Claude Code pieces start
  mid-session with tens of thousands of tokens of context, and Opus input
  costs five times Sonnet's. Not one call would have been paid for.
- **`max_tokens @k`**: under a dollar budget the engine also lowers each
  call's `max_tokens` to the longest reply the money left can pay for. At
  step *k* the recorded reply was longer than that, so the replay cuts it
  off, and a reply cut off at `max_tokens` is not an answer: the run stops
  there, under its budget. Without a dollar limit there is nothing to lower,
  which is why the `no limit` column has none.
"""),
    code("""
first_call = steps[steps["step"] == 1].set_index("run_id")["cost"]
for limit in [0.05, 0.25]:
    at0 = grid[(grid["max_cost"] == limit) & grid["max_steps"].isna() & (grid["steps"] == 0)]["run_id"]
    print(f"${limit}: {len(at0)} runs stopped @0; the cheapest of their first calls cost "
          f"${first_call[at0].min():.4f} as recorded")
cut = grid[grid["reason"] == "max_tokens"]
print(f"max_tokens stops: {len(cut)}, all under a dollar limit: {bool(cut['max_cost'].notna().all())}")"""),
    md("""
## One real session, step by step

`load_recorded` reads a Claude Code session file into the same `Trace` a
native run gives. The one used here is a subagent's run from a public
repository, shipped with the package (`agentlab.datasets.claude_code_session()`);
to look at your own work instead, set `AGENTLAB_SESSION` to one of your files,
`~/.claude/projects/<project>/<session>.jsonl` (or pass a whole project folder
to `load_recorded` for a `Traces` of every session). `replay_setup` drives it
in the lab panel offline: the model answers with the recorded replies, the
tools with the recorded results. The replay runs under the article's budgets
(8 steps, $0.50), so the gauges say how much of each the record used. Click
*Step* to go one step at a time.
"""),
    code("""
mine = os.environ.get("AGENTLAB_SESSION")
session = al.load_recorded(Path(mine).expanduser() if mine else al.datasets.claude_code_session("subagent"))
session"""),
    code("""
lab = al.Lab(**replay_setup(session, max_steps=8, max_cost=0.50), chart=False)
await lab.step()
lab"""),
    code("""
await lab.run()
print(f"{lab.result.reason}: {lab.result.text}")  # the whole answer, not a repr cut at 60 characters
print(f"replayed spend ${lab.engine.spent:.4f}; recorded ${session.summary['cost']:.4f}")"""),
    md("""
## Fork it: same history, another model

`fork(trace, at_step=k, ...)` starts a run whose history is the record's first
`k` steps and continues live with what you change. What a fork of a *record*
can reproduce is what the record holds: the messages. A Claude Code file does
not hold the system prompt or the tool definitions the session sent, so the
fork's requests are smaller than the recorded ones, and its cost is not
comparable with the record's. The numbers say by how much:
"""),
    code("""
branch = fork(session, at_step=1, model=al.ScriptedModel([al.reply("The answer is in the hooks docs.")]), max_cost=None)
forked = await branch.run()
print(forked)
recorded_context = int(session.steps["context_tokens"].iloc[1])
print(f"the record's step 2 read {recorded_context:,} tokens; the fork's first request {forked.input_tokens:,} "
      "(no system prompt, no tool definitions): a fork of a record compares replies, not costs")"""),
    md("""
For a fair comparison of costs, fork a run whose trace holds everything it
sent, a native run: here the growing-context scenario with no cost limit,
forked after step 3 with a model that answers at once. Both curves then price
the same requests up to the fork, and the gap after it is the steps the fork
did not need.
"""),
    code("""
native = await scenarios.get("growing-context").setup(max_cost=None).arun()
parent = load_run(native.run_id)
answer = al.ScriptedModel([al.reply("Orders 1042 and 1077 shipped and were never delivered.")])
from agentlab.trace import TraceWriter
shortcut = await fork(parent, at_step=3, model=answer, max_cost=None, subscribers=[TraceWriter()]).run()
print(f"parent: {native.steps} steps, ${native.spent:.4f}; fork after step 3: {shortcut.steps} more step(s), "
      f"${shortcut.spent:.4f} of its own")
ax = plots.fork_curve(parent, load_run(shortcut.run_id))
curve = parent.steps.set_index("step")["cost"].cumsum()
fork_total = curve[3] + shortcut.spent                     # the shared history, then the fork's own step
after = curve[curve.index >= 4]
ax.fill_between(after.index, fork_total, after, color="tab:red", alpha=0.15,
                label=f"not spent by the fork: ${curve.iloc[-1] - fork_total:.4f}")
ax.hlines(fork_total, 4, after.index[-1], colors="tab:red", linestyles=":", lw=1)
ax.annotate(f"fork ends at step 4: ${fork_total:.4f}", (4, fork_total), xytext=(5.2, fork_total - 0.02),
            arrowprops={"arrowstyle": "->", "color": "tab:red"}, color="tab:red", fontsize=9)
ax.annotate(f"parent ends at step {curve.index[-1]}: ${curve.iloc[-1]:.4f}", (curve.index[-1], curve.iloc[-1]),
            xytext=(curve.index[-1] - 0.1, fork_total + 0.3 * (curve.iloc[-1] - fork_total)), ha="right",
            arrowprops={"arrowstyle": "->"}, fontsize=9)
ax.legend(loc="upper left", fontsize=8)
ax.figure"""),
    md("""
Up to step 3 the two runs are one: the fork's history is the parent's. Its
step 4 costs what the parent's step 4 cost, because it sends the same
request (the same history) and only the reply differs; then it answers and
stops. The shaded area is what the parent went on to spend on the steps the
fork did not need, and it is most of the parent's bill: in a growing context
the last steps are the dearest.
"""),
    md("""
## Where the money went

The curve says the bill grows with the square of the steps. The next three
questions are a cost analyst's: which of the things the run carried cost the
money, what its cache misses cost and why, and where two runs parted.
`agentlab.costs` answers each from the trace frames, so the same calls work
on native runs, experiments and imported sessions. First the shipped Claude
Code session, item by item: every message, tool result and prompt it carried,
priced over every later call that sent it again.
"""),
    code("""
from agentlab.costs import cache_busts, carried_cost, diff_runs, input_cost, top_carriers

whole = al.load_recorded(al.datasets.claude_code_session())
carried = carried_cost(whole)
print(f"input side of the bill ${input_cost(whole):.2f}; the items carried ${carried['carried_cost'].sum():.2f}")
for line in top_carriers(carried, 3):
    print(line)"""),
    md("""
The two totals agree to the cent by construction: each call's input bill is
shared among the items it sent, in proportion to their sizes (the API reports
a call's totals, not its parts, so each share is an estimate and the `basis`
column says so). The dearest item is one the record does not hold: the system
prompt and tool definitions Claude Code sends before the first message, which
every call of the session paid to read again.

Next, the prompt cache. A call that finds less of its prefix cached than the
calls before it left pays to write it again; `cache_busts` names the cause and
the dollars a hit would have saved.
"""),
    code("""
busts = cache_busts(whole)
for b in busts[busts["bust"]].itertuples():
    print(f"step {b.step}: {b.cause} ({b.detail}); {b.missed:,} tokens billed again, ${b.waste:.2f} wasted")"""),
    md("""
Last, two runs side by side: the growing-context run and its fork from the
section above, aligned step by step by each step's tool and arguments. The
view opens where they part, the fork's step.
"""),
    code("""
diff = diff_runs(parent, load_run(shortcut.run_id))
print(f"they part at step {diff.first_divergence}")
diff"""),
]


NOTEBOOKS["10-your-loop-against-the-scenarios"] = [
    md(
        """
# 10 · Your loop against the scenarios

The article's claim is that every line of the loop is a decision. This notebook
makes the claim measurable. It starts from the loop notebook 1 wrote by hand,
adds the decisions one at a time (a step limit; then dollars; then the clock;
then the three kinds of failure; then loop detection; then parallel reads),
and plays every version, and agentlab, against the same nine scenarios. A
scoreboard, computed below and not typed, says which lessons each version
keeps, with the calls, dollars and seconds each game took.

"""
        + OFFLINE.strip()
        + """
Here the scripted models are the point: each scenario's model misbehaves the
same way every time (it loops, it probes, its upstream hangs), which is what
makes the versions comparable. Nothing here reads `ANTHROPIC_API_KEY`; with
it set you could hand any of these loops `al.AnthropicModel()` in place of
`setup.model`, but Claude
would not reproduce the misbehaviours on demand, so a scoreboard would
measure the model as much as the loop.
"""
    ),
    code(
        SETUP
        + """
import asyncio
import json
import time
from collections import Counter
from functools import partial
from agentlab.models.base import ModelRequest
from agentlab.scenarios import scoreboard as sb

pd.DataFrame({"the lesson holds when": {name: lesson.point for name, lesson in sb.LESSONS.items()}})"""
    ),
    md("""
## The referee

`sb.play(loop, scenario)` gives a contestant a fresh shop and the scenario's
seeded model, and referees the game the same way for every contestant:

- the model is **metered**: each call is counted and priced by the referee,
  from the reply's usage (offline replies report none, so the engine's own
  estimate rule is used), whatever the loop itself counts;
- what the model was **shown** is observed: the tool results inside every
  request it received, so "the model never saw the 503" is checked, not
  assumed;
- a loop runs on its own thread and is **given up on** after a few seconds of
  real time (a loop with no working deadline would hang on the hanging tool
  for ever); what it does after that is not scored;
- each scenario's test on the outcome is in the table above.
"""),
    md("""
## The loop, with its decisions as switches

This is notebook 1's loop with two fixes (it sends the tool definitions, so a
real model could call them; a turn limit that runs out is a result, not a
`KeyError`) and five switches. Each switch is one decision, written the way
the article's sketch writes it: dollars and the clock are checked **after**
each step, the third identical call ends the run, and an answer is any reply
whose stop reason is not `tool_use`.
"""),
    code('''
async def my_loop(setup, *, cost=False, deadline=False, kinds=False, loops=False, parallel=False):
    """Notebook 1's loop, with one decision more for each switch that is on."""
    limits, tools = setup.options, {t.name: t for t in setup.tools}
    definitions = [t.definition() for t in setup.tools]   # sent with every request: the model can call them
    messages = [{"role": "user", "content": setup.task}]
    spent, started, seen = 0.0, time.monotonic(), Counter()

    def run_tool(call):
        """One call -> (text for the model, is_error). With `kinds`, a fatal failure is raised to the loop."""
        if call["name"] not in tools:
            return f"unknown tool {call['name']!r}", True
        for attempt in range(4):
            try:
                return json.dumps(tools[call["name"]].fn(**call["input"]), default=str), False
            except al.ToolError as e:                      # recoverable: the model reads the hint
                return e.for_model(), True
            except al.RetryableError as e:                 # kinds: retried here, out of the model's sight
                if not kinds or attempt == 3:
                    return f"{type(e).__name__}: {e}", True
                time.sleep(0.05 * 2 ** attempt)
            except al.FatalError as e:                     # kinds: fatal is raised, never shown
                if kinds:
                    raise
                return f"{type(e).__name__}: {e}", True
            except Exception as e:                         # anything else: the model is told
                return f"{type(e).__name__}: {e}", True

    async def run_turn(calls):
        """The turn's calls, results in request order; with `parallel`, neighbouring reads run together."""
        if not parallel:
            return [run_tool(c) for c in calls]
        results, reads = [], []
        for c in calls + [None]:
            tool = tools.get(c["name"]) if c else None
            if tool is not None and tool.mode == "read":
                reads.append(c)
                continue
            results += await asyncio.gather(*(asyncio.to_thread(run_tool, r) for r in reads))
            reads = []
            if c is not None:
                results.append(run_tool(c))                 # a write runs alone
        return results

    for step in range(limits["max_steps"]):                # 1: a step limit
        request = ModelRequest(None, messages, definitions, max_tokens=limits.get("max_tokens", 1024))
        reply = await setup.model.complete(request)
        spent += sb.cost_of(setup.model.model, request, reply)
        messages.append({"role": "assistant", "content": reply["content"]})
        if reply["stop_reason"] != "tool_use":             # any other stop counts as the answer
            return "done"
        calls = [b for b in reply["content"] if b["type"] == "tool_use"]
        try:
            outcomes = await run_turn(calls)
        except al.FatalError:                              # kinds: stop; the model never hears it
            return "fatal"
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": c["id"], "content": text, "is_error": failed}
            for c, (text, failed) in zip(calls, outcomes)]})
        if cost and spent > limits["max_cost"]:            # 2: dollars, after spending
            return "budget"
        if deadline and time.monotonic() - started > limits["deadline_s"]:   # 3: the clock, after the step
            return "deadline"
        if loops:                                          # 5: the third identical call is a loop
            seen.update(json.dumps([c["name"], c["input"]], sort_keys=True) for c in calls)
            if max(seen.values()) >= 3:
                return "loop detected"
    return "step limit"'''),
    md("""
## The scoreboard

Version 1 is the loop with only its step limit; each later version switches
on one decision more, so version 6 has all of the article's sketch. The last
column is agentlab with each scenario's budgets and its default policy (the
`permission-probing` scenario normally runs with denials made recoverable, to
show the bug; here every contestant decides for itself). Each cell is
✓ or ✗ (the lesson held or not), how the game ended, and what it took.
"""),
    code("""
decisions = ["cost", "deadline", "kinds", "loops", "parallel"]
versions = {"1 step limit": my_loop}
for i, name in enumerate(decisions, start=2):
    versions[f"{i} + {name}"] = partial(my_loop, **{d: True for d in decisions[: i - 1]})
versions["agentlab"] = sb.agentlab_loop(policy=al.Policy())

games = sb.play_all(versions)
scoreboard = sb.board(games)
scoreboard"""),
    md("""
## What each decision bought

The same games, version by version (computed from the games above). For each
version: how many lessons it holds; which lessons it holds that the version
before did not ("newly held"); and which games ended differently without
their lesson's test passing. "Newly held: none" means only that no test
passed that failed before; the decision may still have changed how a game
ended, and the last part of the line says how.
"""),
    code("""
held, before = {}, {}
for v in versions:
    mine = {g.scenario: g for g in games if g.loop == v}
    held[v] = {s for s, g in mine.items() if g.held}
    newly = [s for s in sb.LESSONS if s in held[v] and not (before and before[s].held)]
    changed = [f"{s} ({before[s].reason} → {g.reason})" for s, g in mine.items()
               if before and g.reason != before[s].reason and not g.held]
    line = f"{v:<14} {len(held[v])} of {len(sb.LESSONS)} held · newly held: {', '.join(newly) or 'none'}"
    print(line + (f" · ended differently, test still failed: {', '.join(changed)}" if changed else ""))
    before = mine
sketch = held["6 + parallel"]
print("\\nwhat the article's sketch (version 6) still loses:", ", ".join(s for s in sb.LESSONS if s not in sketch))"""),
    md("""
Read the ✗ cells of version 6 against agentlab's ✓, one decision each:

- **Dollars after spending is an overshoot, not a limit.** The sketch adds the
  call's cost and only then compares; the call that crosses the line has
  already been paid for. agentlab reserves the worst case of the next call
  *before* sending it (input at the rate it will be billed, all of
  `max_tokens`), so it stops under the limit.
- **A clock read between steps does not bound a step.** The hanging tool never
  returns, so the check after the step never runs. agentlab's deadline bounds
  the model call, every tool and every retry wait while they run.
- **A stop reason other than `tool_use` is not always an answer.** A reply cut
  off at `max_tokens` is half a report; agentlab stops with `max_tokens`.
- **A write nobody approved is still a write.** No version of the hand-written
  loop asks anyone before `refund_order` runs; agentlab's `approve=` asks
  first (below, a person does it in the panel).

Loop detection and the three kinds of failure hold in the sketch too: the
games say the same. agentlab's loop detection nudges first and stops only
when the model persists (notebook 4 measures how often the nudge rescues a
run); that is why its game on `repeat-forever` takes one call more.
"""),
    md("""
## A person at the controls: Approve or Deny

`approval-denied` above used a scripted manager. With `approve=True` each
write waits in the panel with its arguments and two buttons, while the gauges
and Stop keep working. The run below asks to refund £20; the cell after it
presses **Deny** for you (in JupyterLab you would click it), and the run stops
as `fatal` without the model ever hearing the answer.
"""),
    code("""
approval = scenarios.get("approval-denied").setup()
refunds = lambda: approval.shop.query("SELECT count(*) AS n FROM refunds")[0]["n"]
before = refunds()
lab = approval.lab(approve=True, max_cost=0.50, max_steps=8)
lab.run()
while lab.pending_approval is None and lab.result is None:   # until the refund waits for a person
    await asyncio.sleep(0.01)
lab"""),
    code("""
print("waiting:", lab.pending_approval.tool, lab.pending_approval.args)
lab.panel.deny_button.click()                 # the button a person would press
result = await lab.wait()
print(result)
print("refunds made by this run:", refunds() - before)"""),
]


# --------------------------------------------------------------------------- the exercises (graded offline)
NOTEBOOKS["01-the-loop-step-by-step"] += exercise(
    """
Make the loop by hand a function a referee can play: `async def my_loop(setup)`
runs `setup.task` with `setup.model` and `setup.tools`, makes at most
`setup.options["max_steps"]` model calls, and returns how it ended, `"done"` or
`"step limit"`. The check plays it with seeds 0 to 2 on two scenarios this
notebook does not show (three lookups in one turn; a model that never stops),
then `exercises.capstone` scores it against notebook 10's nine scenarios: your
first score. Notebook 10 ends with the capstone, where you raise it.
"""
    + SOLUTIONS,
    """
async def my_loop(setup):
    \"\"\"Your loop: setup.task, setup.model, setup.tools, setup.options["max_steps"] -> "done" or "step limit".\"\"\"
    return "not written yet"          # replace: the loop above, as a function""",
    """
from agentlab.scenarios import exercises

print(exercises.check_loop(my_loop))
print(exercises.capstone(my_loop))""",
)

NOTEBOOKS["02-three-budgets"] += exercise(
    """
Predict, then run. The `growing-context` task under three limits this notebook
did not try: `max_cost=0.05` with the hard guard, the same $0.05 checked after
each step, and `max_cost=0.20` with the hard guard. For each, write down the
reason the run will stop and after how many steps (within one), *before* you
run anything; the tables above have what you need (each step costs more than
the last). The check runs the three and says which predictions held.
"""
    + SOLUTIONS,
    """
predictions = {                       # (max_cost, cost_guard): (reason, steps)
    (0.05, "hard"): ("?", 0),
    (0.05, "after"): ("?", 0),
    (0.20, "hard"): ("?", 0),
}""",
    """
from agentlab.scenarios import exercises

exercises.check_budget_prediction(predictions)""",
)

NOTEBOOKS["03-three-kinds-of-failure"] += exercise(
    """
Write one tool that fails each way. `lookup(kind)` answers for `"ok"`; for
`"missing"` it raises a recoverable error whose hint names the model's next
step; for `"busy"` a retryable one; for `"forbidden"` a permission denial. Any
other kind is the model's mistake: recoverable, and its message says which
kinds exist. The check classifies what your tool raises with agentlab's own
policy table (`agentlab.errors.classify`), the one the loop uses.
"""
    + SOLUTIONS,
    """
def lookup(kind: str) -> str:
    \"\"\"'missing' -> recoverable with a hint, 'busy' -> retryable, 'forbidden' -> denied, 'ok' -> text.\"\"\"
    return "order 1042: delivered"    # every kind answers: change that""",
    """
from agentlab.scenarios import exercises

exercises.check_three_kinds(lookup)""",
)

NOTEBOOKS["04-loop-detection"] += exercise(
    """
Write the check itself. `repeating(calls)` gets every call of the run so far,
oldest first, as `(tool name, arguments)`, and says whether the last one is the
third with that tool and those arguments. Arguments that differ only in key
order are the same call; `"1"` and `1` are not. The check plays it on twenty
seeded histories, most of which this notebook does not show.
"""
    + SOLUTIONS,
    """
def repeating(calls):
    \"\"\"calls: [(tool name, arguments), ...], oldest first. True when the last is the third identical call.\"\"\"
    return len(calls) >= 3            # counts calls, not identical ones: change that""",
    """
from agentlab.scenarios import exercises

exercises.check_repeating(repeating)""",
)

NOTEBOOKS["05-parallel-tool-calls"] += exercise(
    """
Write the dispatcher. `await dispatch(calls, tools)` gets one turn's calls
(`{"name": ..., "input": {...}}`) and the tools (async functions with a `mode`,
`"read"` or `"write"`), and returns their results in the order asked. Reads next
to each other run together; each write runs alone, after the reads before it,
in its turn. The check runs five turns with tools that record what overlapped,
take unequal times, and lose an update when two writes race.
"""
    + SOLUTIONS,
    """
import asyncio

async def dispatch(calls, tools):
    \"\"\"One turn: calls [{"name", "input"}], tools[name] async with .mode. Results in the order asked.\"\"\"
    return list(await asyncio.gather(*(tools[c["name"]](**c["input"]) for c in calls)))   # all at once: writes race""",
    """
from agentlab.scenarios import exercises

exercises.check_dispatcher(dispatch)""",
)

NOTEBOOKS["06-traces-step-four"] += exercise(
    """
Turn the suspects query into a reading list. `suspects(runs)` gets what
`load_runs(folder)` returns and gives, for every run that ended `done` with a
failed write in it, the step at which its first write failed: the step to read
first (`{run_id: step}`). The check writes six seeded runs to a folder of its
own, some this notebook does not make, and compares.
"""
    + SOLUTIONS,
    """
def suspects(runs):
    \"\"\"runs: load_runs(folder). {run_id: step of its first failed write} for each run that ended done.\"\"\"
    return {}                         # nobody is suspected: change that""",
    """
from agentlab.scenarios import exercises

exercises.check_suspects(suspects)""",
)

NOTEBOOKS["07-cost-analysis"] += exercise(
    """
Reserve before the call, as the hard guard does. `can_afford(spent, max_cost,
input_tokens, max_tokens, prices)` says whether the next call fits: its input
plus a reply of all `max_tokens`, at `prices.input` and `prices.output` dollars
per million tokens, within what is left of `max_cost` (`None` is no limit). The
check plays 25 seeded calls, among them ones whose input fits and whose worst
reply does not.
"""
    + SOLUTIONS,
    """
def can_afford(spent, max_cost, input_tokens, max_tokens, prices):
    \"\"\"True when the call's worst case fits in what is left of max_cost (prices: dollars per Mtok).\"\"\"
    return spent <= max_cost          # the sketch's check, after the fact: change that""",
    """
from agentlab.scenarios import exercises

exercises.check_reservation(can_afford)""",
)

NOTEBOOKS["10-your-loop-against-the-scenarios"] += [
    md("""
## Capstone: your loop against every scenario

Write your own loop, every decision of the course in it, and let the referee
score it: the same nine games as above, one fresh shop each, the score a line
a class can compare (lessons held, model calls, dollars). Start from `my_loop`
above (the placeholder below is version 6, the article's sketch), or from the
loop you wrote at the end of notebook 1, and win the games version 6 loses:
reserve before each call, bound every tool by the deadline, stop on
`max_tokens`, ask before a write.
"""),
    code("""
async def capstone_loop(setup):
    \"\"\"Your loop: returns how it ended ("done", "budget", "deadline", "fatal", "loop detected", ...).\"\"\"
    return await my_loop(setup, cost=True, deadline=True, kinds=True, loops=True, parallel=True)"""),
    code("""
from agentlab.scenarios import exercises

score = exercises.capstone(capstone_loop, name="your loop")
print(score)
score.board"""),
]
NOTEBOOKS["10-your-loop-against-the-scenarios"][-2].metadata["tags"] = ["exercise"]
NOTEBOOKS["10-your-loop-against-the-scenarios"][-1].metadata["tags"] = ["check"]


def cells_of(name: str) -> list[nbformat.NotebookNode]:
    """Notebook ``name``'s cells as written to disk (its own name filled in where a cell says __NOTEBOOK__)."""
    return [nbformat.from_dict({**cell, "source": cell.source.replace(NOTEBOOK, name)}) for cell in NOTEBOOKS[name]]


WIDGET_STATE_PROBE = """\
import asyncio as _asyncio, json as _json
await _asyncio.sleep(0.5)  # let a panel's coalesced last redraw land
_texts = {}  # a displayed object's text fallback as it is now, by its widget's model id
try:
    from agentlab.experiments.progress import LIVE as _live
except ImportError:
    _live = ()
for _v in list(get_ipython().user_ns.values()) + list(_live):
    try:
        _b = _v._repr_mimebundle_() if hasattr(type(_v), "_repr_mimebundle_") else None
        _d = _b[0] if isinstance(_b, tuple) else _b
        _texts[_d["application/vnd.jupyter.widget-view+json"]["model_id"]] = _d["text/plain"]
    except Exception:
        pass
try:
    import ipywidgets as _w
    print(_json.dumps({**_w.Widget.get_manager_state(drop_defaults=False), "texts": _texts}))
except ImportError:
    print("{}")"""
"""Run after a notebook's last cell, in its kernel: every live widget's *current* state.

nbclient records widget state from the comm messages it sees while a cell
runs; a panel updated by a run in the background (``lab.run()``) sends its
updates while *other* cells run, so nbclient keeps the panel as it was first
shown. Asking the kernel at the end saves what JupyterLab's "save widget state
automatically" saves: the widgets as they are now.
"""


LEGIBILITY_HOOK = """\
from matplotlib.figure import Figure as _Figure
import itertools as _it
_illegible = []
def _legibility(fig):
    \"\"\"Problems a reader would see in a figure about to be shown: text over text, too many labels.\"\"\"
    fig.draw_without_rendering()  # lays the text out, on any canvas (a standalone Figure has no renderer of its own)
    found = []
    def crowded(texts, what, title, most=None):
        if most is not None and len(texts) > most:  # past that a reader cannot tell them apart, whatever the layout
            found.append(f"{len(texts)} {what} in {title!r}")
            return
        boxes = [(t.get_text(), t.get_window_extent()) for t in texts]
        for (ta, a), (tb, b) in _it.combinations(boxes, 2):
            if a.width and b.width and a.overlaps(b):
                found.append(f"{what} {ta!r} and {tb!r} overlap in {title!r}")
                return
    for ax in fig.axes:
        title = ax.get_title() or ax.get_title(loc="left")
        for axis, name in ((ax.xaxis, "x"), (ax.yaxis, "y")):
            shown = [t for t in axis.get_ticklabels() if t.get_visible() and t.get_text().strip()]
            crowded(shown, f"{name} labels", title, 40)
        crowded([t for t in ax.texts if t.get_visible() and t.get_text().strip()], "texts", title)
    return found
_png = get_ipython().display_formatter.formatters["image/png"]
_draw = _png.lookup_by_type(_Figure)
def _checked(fig):
    _illegible.extend(_legibility(fig))
    return _draw(fig)
_png.for_type(_Figure, _checked)"""
"""Run before a notebook's first cell by the tests: every figure shown is checked as it is drawn."""

LEGIBILITY_REPORT = "import json as _json; print(_json.dumps(_illegible))"


def widget_state(nb: nbformat.NotebookNode) -> dict | None:
    """The saved widget state of ``nb`` (``None`` when it has none)."""
    return nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json")


def execute(
    nb: nbformat.NotebookNode, cwd: Path, timeout: int = 300, illegible: list[str] | None = None
) -> nbformat.NotebookNode:
    """Run every cell of ``nb`` in a fresh kernel (in folder ``cwd``) and save its widgets as they end up.

    With ``illegible`` (a list), every figure the notebook shows is checked as it is drawn (text over
    text, more than 40 labels on an axis), and what was found is added to the list."""
    import json

    from nbclient import NotebookClient

    probe = nbformat.v4.new_code_cell(WIDGET_STATE_PROBE)
    hook, report = nbformat.v4.new_code_cell(LEGIBILITY_HOOK), nbformat.v4.new_code_cell(LEGIBILITY_REPORT)
    checking = illegible is not None
    nb.cells.append(probe)
    if checking:
        first_code = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
        nb.cells.insert(
            first_code + 1, hook
        )  # after the set-up cell: `%matplotlib inline` installs the drawing it wraps
        nb.cells.insert(len(nb.cells) - 1, report)
    try:
        NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            store_widget_state=True,
            resources={"metadata": {"path": str(cwd)}},
        ).execute()
    finally:
        nb.cells.remove(probe)
        if checking:
            nb.cells.remove(hook)
            nb.cells.remove(report)
            shown = "".join(
                o.get("text", "") for o in report.outputs if o.output_type == "stream" and o.name == "stdout"
            )
            illegible.extend(json.loads(shown or "[]"))
    text = "".join(o.get("text", "") for o in probe.outputs if o.output_type == "stream" and o.name == "stdout")
    state = json.loads(text or "{}")
    texts = state.pop("texts", {})
    for cell in nb.cells:  # a widget's text fallback (where widgets cannot render) as of the end, too
        for out in cell.get("outputs", []):
            view = out.get("data", {}).get("application/vnd.jupyter.widget-view+json")
            if view and view.get("model_id") in texts:
                out["data"]["text/plain"] = texts[view["model_id"]]
    nb.metadata.pop("widgets", None)
    if state.get("state"):
        nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": state}
    return nb


def build(execute_cells: bool = False, names: list[str] | None = None) -> list[Path]:
    """Write every notebook (or ``names``); with ``execute_cells``, run each and keep outputs and widget state."""
    OUT.mkdir(exist_ok=True)
    written = []
    for name in NOTEBOOKS:
        if names and name not in names:
            continue
        nb = nbformat.v4.new_notebook(cells=cells_of(name))
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nb.metadata["language_info"] = {"name": "python"}
        if execute_cells:
            execute(nb, OUT)
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
