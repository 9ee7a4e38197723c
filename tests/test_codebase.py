"""Promises about the code itself: a readable engine and an import that does nothing heavy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import agentlab

ENGINE_LINE_BUDGET = 690  # +15 for issue 16: streaming (model_delta events, a stream cut short by Stop or the deadline), empty end_turn, refusal details; +85 for issue 14: the step's interruption handling, thread-safe cancel, exactly-once resume and overrun reporting, which a reader must see in the step; +15 for issue 15: the experiment ledger hook; +8 for issue 14: a failing trace writer stops the run; +5 for replaying a recorded session turn after turn


def test_engine_stays_short_enough_to_read_in_one_sitting():
    """loop.py is the file a newcomer reads top to bottom: keep it within its line budget."""
    lines = (Path(agentlab.__file__).parent / "loop.py").read_text().count("\n")
    assert lines <= ENGINE_LINE_BUDGET, f"loop.py has {lines} lines; move a piece into its own module"


def test_importing_agentlab_loads_no_heavy_library():
    """import agentlab stays cheap: widgets, plots, pandas and the HTTP client load when used."""
    code = (
        "import sys, agentlab\n"
        "heavy = [m for m in ('matplotlib', 'ipywidgets', 'pandas', 'anthropic', 'nbformat') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


# ------------------------------------------------------------ the module graph
PACKAGE = Path(agentlab.__file__).parent
UPPER = ("agentlab.lab", "agentlab.ui", "agentlab.report", "agentlab.plots", "agentlab.cli", "agentlab.analysis",
         "agentlab.scenarios", "agentlab.trace.display")
ENGINE = ("agentlab.loop", "agentlab.calls", "agentlab.config", "agentlab.budget", "agentlab.loopguard",
          "agentlab.scheduling", "agentlab.retry", "agentlab.errors", "agentlab.events", "agentlab.vocab",
          "agentlab.messages", "agentlab.tools", "agentlab.pricing", "agentlab.clock", "agentlab.threads",
          "agentlab.isolate", "agentlab.watchdog", "agentlab.driver",
          "agentlab.models")


def _modules() -> dict[str, Path]:
    mods = {}
    for f in PACKAGE.rglob("*.py"):
        parts = list(f.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = f
    return mods


def _imports() -> tuple[dict[str, set[str]], list[tuple[str, str]]]:
    """Every agentlab -> agentlab import (function-level ones too; TYPE_CHECKING ones excepted),
    and every imported name that is private to its module."""
    import ast

    mods = _modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    private = []
    for mod, f in mods.items():
        tree = ast.parse(f.read_text())
        typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                       for n in ast.walk(node)}
        package = mod if f.name == "__init__.py" else mod.rsplit(".", 1)[0]
        for node in ast.walk(tree):
            if id(node) in typing_only or not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(node, ast.Import):
                edges[mod] |= {a.name for a in node.names if a.name in mods and a.name != mod}
                continue
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            if not base.startswith("agentlab"):
                continue
            for a in node.names:
                target = f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                if target in mods and target != mod:
                    edges[mod].add(target)
                if a.name.startswith("_") and not a.name.startswith("__"):
                    private.append((mod, f"{base}.{a.name}"))
    return edges, private


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while (w := stack.pop()) != v:
                comp.append(w)
            comp.append(v)
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_import_graph_has_no_cycles():
    """Arrows run one way: no two agentlab modules import each other, even lazily inside a function."""
    edges, _ = _imports()
    assert _cycles(edges) == []


def test_no_module_imports_a_private_name_of_another():
    """A name starting with _ belongs to its module; the UI, report, plots and CLI use public names only."""
    _, private = _imports()
    assert private == []


def test_the_engine_does_not_import_the_layers_above_it():
    """UI, report, plots, analysis and CLI -> engine -> models and tools; never the other way."""
    edges, _ = _imports()
    wrong = sorted(
        (mod, target) for mod, targets in edges.items() if mod.startswith(ENGINE)
        for target in targets if target.startswith(UPPER)
    )
    assert wrong == []


def test_the_event_catalogue_matches_the_vocabulary_and_what_the_engine_emits():
    """events.py documents exactly the EventKind words, and the scenarios emit every kind the engine owns."""
    import re

    from agentlab import events, scenarios
    from agentlab.vocab import EventKind

    documented = re.findall(r"^``(\w+)``", events.__doc__ or "", flags=re.M)
    assert documented == [k.value for k in EventKind]
    seen: set[str] = set()
    for s in scenarios.all():
        setup = s.setup(seed=1)
        setup.run(trace=False, subscribers=[lambda e: seen.add(e.kind)])
        setup.close()
    calls = []

    async def flaky(messages, tools):  # one transient model failure: the scenarios retry tools, not the model
        calls.append(1)
        if len(calls) == 1:
            raise agentlab.RetryableError("overloaded")
        return agentlab.reply("fine")

    agentlab.run("q", model=agentlab.FunctionModel(flaky, stream=2), trace=False, clock=agentlab.FakeClock(), max_cost=None,
                 subscribers=[lambda e: seen.add(e.kind)])

    @agentlab.tool(mode="read")
    def ask_agent(question: str) -> str:  # an agent calling an agent: the parent records a sub_run
        """Ask a sub-agent."""
        return agentlab.run(question, model=agentlab.ScriptedModel([agentlab.reply("sub answer")]), trace=False).text

    agentlab.run("q", [ask_agent], model=agentlab.ScriptedModel([agentlab.reply(None, ("ask_agent", {"question": "?"})),
                 agentlab.reply("ok")]), trace=False, clock=agentlab.FakeClock(), subscribers=[lambda e: seen.add(e.kind)])
    assert seen <= {k.value for k in EventKind}
    driver_only = {EventKind.PAUSED, EventKind.RESUMED}  # sent by the panel / by resume(), not by a run to its end
    assert {k.value for k in EventKind} - driver_only <= seen


def test_a_cold_run_without_tools_loads_neither_the_price_data_nor_pydantic(tmp_path):
    """After the first lookup, a fresh process builds Run() from the price memo: genai-prices and
    pydantic (tool schemas) stay unloaded, so a cold start costs the deadline almost nothing."""
    import os

    code = (
        "import sys, agentlab\n"
        "run = agentlab.Run('q', model=agentlab.ScriptedModel([agentlab.reply('hi')]), max_cost=0.1)\n"
        "assert run.prices is not None\n"
        "print(','.join(m for m in ('genai_prices', 'pydantic') if m in sys.modules))"
    )
    env = {**os.environ, "AGENTLAB_CACHE": str(tmp_path / "cache")}
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert first.stdout.strip() == "genai_prices,pydantic"  # the first lookup reads the price data
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert again.stdout.strip() == ""


def test_the_price_memo_gives_the_same_prices_as_the_table_and_survives_a_broken_file(tmp_path, monkeypatch):
    """A memoized price equals genai-prices'; a corrupt memo file is rebuilt, not an error."""
    from agentlab import price_cache, pricing

    monkeypatch.setenv("AGENTLAB_CACHE", str(tmp_path))
    monkeypatch.setattr(price_cache, "_memo", None)
    fresh = pricing.lookup_prices("claude-sonnet-4-5")
    assert pricing.resolve_prices("claude-sonnet-4-5", None) == fresh
    monkeypatch.setattr(price_cache, "_memo", None)
    assert pricing.resolve_prices("claude-sonnet-4-5", None) == fresh  # read back from the file
    (tmp_path / price_cache.FILE).write_text("{not json")
    monkeypatch.setattr(price_cache, "_memo", None)
    assert pricing.resolve_prices("claude-sonnet-4-5", None) == fresh
    assert pricing.resolve_prices("no-such-model-xyz", None) is None
