"""Promises about the code itself: a readable engine and an import that does nothing heavy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import agentlab


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
# Layers and forbidden imports are import-linter contracts in pyproject.toml (they follow indirect
# chains); the tests below check that the contracts hold and that they can fail.
PACKAGE = Path(agentlab.__file__).parent


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
        typing_only = {
            id(n)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)
        }
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


def test_no_module_imports_a_private_name_of_another():
    """A name starting with _ belongs to its module; the UI, report, plots and CLI use public names only."""
    _, private = _imports()
    assert private == []


def test_the_event_catalogue_matches_the_vocabulary_and_what_the_engine_emits():
    """The schema's catalogue (its docstring) documents exactly the EventKind words, and the scenarios emit every
    kind the engine owns."""
    import re

    from agentlab import scenarios
    from agentlab.trace import schema
    from agentlab.vocab import EventKind

    documented = re.findall(r"^``(\w+)``", schema.__doc__ or "", flags=re.M)
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

    agentlab.run(
        "q",
        model=agentlab.FunctionModel(flaky, stream=2),
        trace=False,
        clock=agentlab.FakeClock(),
        max_cost=None,
        subscribers=[lambda e: seen.add(e.kind)],
    )

    @agentlab.tool(mode="read")
    def ask_agent(question: str) -> str:  # an agent calling an agent: the parent records a sub_run
        """Ask a sub-agent."""
        return agentlab.run(question, model=agentlab.ScriptedModel([agentlab.reply("sub answer")]), trace=False).text

    agentlab.run(
        "q",
        [ask_agent],
        model=agentlab.ScriptedModel([agentlab.reply(None, ("ask_agent", {"question": "?"})), agentlab.reply("ok")]),
        trace=False,
        clock=agentlab.FakeClock(),
        subscribers=[lambda e: seen.add(e.kind)],
    )
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


def test_the_price_memo_gives_the_same_prices_as_the_table_and_survives_a_broken_file(tmp_path):
    """A memoized price equals genai-prices' in a fresh process; a second lookup in the same process
    does not go to disk; a corrupt memo file is rebuilt, not an error."""
    import json
    import os

    code = (
        "import json, os, sys\n"
        "from agentlab import pricing\n"
        "memo = os.path.join(os.environ['AGENTLAB_CACHE'], 'prices.json')\n"
        "p = pricing.resolve_prices('claude-sonnet-4-5', None)\n"
        "if os.path.exists(memo):\n"
        "    os.remove(memo)\n"
        "again = pricing.resolve_prices('claude-sonnet-4-5', None)\n"  # answered in memory: the file stays gone
        "print(json.dumps([p == again, os.path.exists(memo), pricing.resolve_prices('no-such-model-xyz', None)]))"
    )
    env = {**os.environ, "AGENTLAB_CACHE": str(tmp_path)}
    table = subprocess.run(
        [sys.executable, "-c", "from agentlab import pricing; print(pricing.lookup_prices('claude-sonnet-4-5'))"],
        capture_output=True,
        text=True,
        check=True,
        env={**env, "AGENTLAB_CACHE": str(tmp_path / "unused")},
    ).stdout
    (tmp_path / "prices.json").write_text("{not json")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert json.loads(out.stdout) == [True, False, None]
    shown = subprocess.run(
        [
            sys.executable,
            "-c",
            "from agentlab import pricing; print(pricing.resolve_prices('claude-sonnet-4-5', None))",
        ],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    assert shown == table  # written by the unknown model's lookup, read back by a fresh process


def test_two_installs_of_the_price_data_sharing_a_cache_folder_keep_a_memo_each(tmp_path, monkeypatch):
    """Two environments (a notebook's kernel, a project's venv) share one home: the one's cold start does not
    throw away the other's memo, so neither looks its prices up again (each lookup imports the whole price data)."""
    from agentlab import _price_cache as memo
    from agentlab.pricing import Prices

    monkeypatch.setenv("AGENTLAB_CACHE", str(tmp_path))
    looked_up: list[str] = []

    def in_a_fresh_process_of(install: str) -> Prices | None:
        monkeypatch.setattr(memo, "_memo", None)  # what a new process starts from
        monkeypatch.setattr(memo, "_built", [None, {}])
        monkeypatch.setattr(memo, "data_key", lambda fields: install)

        def lookup(model_id: str) -> Prices:
            looked_up.append(install)
            return Prices(input=1.0 if install == "A" else 2.0, output=5.0)

        found: Prices | None = memo.window_of("claude-x", Prices, lookup)[0]
        return found

    first = [in_a_fresh_process_of(i) for i in ("A", "B")]
    again = [in_a_fresh_process_of(i) for i in ("A", "B", "A")]
    assert looked_up == ["A", "B"]  # once each, then answered from the file
    assert [p.input for p in first + again if p is not None] == [1.0, 2.0, 1.0, 2.0, 1.0]
    for i in range(memo.KEEP + 1):  # the file keeps the installs that wrote last
        in_a_fresh_process_of(f"install {i}")
    in_a_fresh_process_of("A")
    assert looked_up[-1] == "A" and len(looked_up) == 2 + memo.KEEP + 2


def test_a_traced_run_loads_only_the_trace_writer(tmp_path):
    """Writing a trace never imports the read side (readers, records, frames, display) or pandas."""
    code = (
        "import sys, agentlab\n"
        f"agentlab.run('q', model=agentlab.ScriptedModel([agentlab.reply('hi')]), trace={str(tmp_path)!r}, "
        "max_cost=None)\n"
        "print(','.join(m for m in ('agentlab.trace.reader', 'agentlab.trace.runs', 'agentlab.trace.frames',\n"
        "                           'agentlab.trace.display', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
    assert list(tmp_path.glob("*.jsonl"))


LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), str(root / "pyproject.toml"), "--no-cache"],
        capture_output=True,
        text=True,
        cwd=root,
        env=env,
    )


def test_the_import_contracts_hold():
    """The layers and the engine's forbidden imports in pyproject.toml hold for the package as it is."""
    out = _lint_imports(PACKAGE.parent)
    assert out.returncode == 0, out.stdout[-3000:]


def test_the_import_contracts_catch_an_indirect_violation(tmp_path):
    """A chain the old direct-import test missed (the loop guard -> the trace package -> its frames ->
    pandas) breaks the engine's contract: the check follows indirect imports."""
    import shutil

    shutil.copytree(PACKAGE, tmp_path / "agentlab", ignore=shutil.ignore_patterns("__pycache__", "data"))
    shutil.copy(PACKAGE.parent / "pyproject.toml", tmp_path / "pyproject.toml")
    guard = tmp_path / "agentlab" / "_engine" / "loopguard.py"
    guard.write_text(
        guard.read_text() + "\n\ndef _peek():\n    from ..trace import load_runs\n\n    return load_runs\n"
    )
    out = _lint_imports(tmp_path)
    assert out.returncode != 0
    report = " ".join(out.stdout.split())
    assert "agentlab._engine is not allowed to import pandas" in report
    assert "agentlab.loop is not allowed to import pandas" in report  # through the loop guard it imports
    assert "agentlab._engine.loopguard -> agentlab.trace" in report


def test_every_error_the_lab_raises_is_an_agentlab_error():
    """One exception tree: ``except agentlab.errors.AgentlabError`` catches every error class the
    package defines (warnings aside), whatever builtin it also is."""
    import importlib
    import inspect

    from agentlab.errors import AgentlabError

    outside = []
    for name in sorted(_modules()):
        if name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(name)
        except ImportError:  # an optional extra that is not installed
            continue
        for attr, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and obj.__module__ == name
                and issubclass(obj, BaseException)
                and not issubclass(obj, Warning)
                and not issubclass(obj, AgentlabError)
            ):
                outside.append(f"{name}.{attr}")
    assert outside == []


def test_the_architecture_page_and_the_readme_show_every_module():
    """docs/architecture.md and the README's design tree name every module of the package."""
    import re

    root = PACKAGE.parent
    for doc in (root / "docs" / "architecture.md", root / "README.md"):
        text = doc.read_text()
        tree = text[re.search(r"```(?:text)?\nagentlab/", text).start() :]  # the fence may say text
        words = set(re.findall(r"\w+", tree[: tree.index("```\n", 4)]))
        missing = sorted(
            str(f.relative_to(PACKAGE))
            for f in PACKAGE.rglob("*.py")
            if f.name != "__init__.py" and f.stem not in words
        )
        assert missing == [], f"{doc.name} does not show {missing}"


def test_the_engine_reads_a_models_optional_parts_only_through_capabilities():
    """The Model protocol's optional parts are declared once (models.base.Capabilities); the engine
    never probes a model with getattr."""
    from agentlab.models.base import Capabilities, capabilities

    assert "getattr(self.model" not in (PACKAGE / "loop.py").read_text()
    assert "getattr(c.model" not in (PACKAGE / "loop.py").read_text()
    assert capabilities(agentlab.ScriptedModel([agentlab.reply("hi")])).count_tokens is None
    assert set(Capabilities.__dataclass_fields__) == {
        "name",
        "caches",
        "server_tools",
        "count_tokens",
        "user_turn",
        "request_terms",
        "bills",
    }


def test_test_modules_share_builders_through_helpers_not_each_other():
    """A test module imports shared builders from a helpers module, never from another test module."""
    import re

    tests = PACKAGE.parent / "tests"
    crossing = sorted(
        str(f.relative_to(tests))
        for f in tests.rglob("test_*.py")
        if re.search(r"^from \.+test_\w+ import", f.read_text(), flags=re.M)
    )
    assert crossing == []


def test_the_engine_file_a_learner_opens_stays_readable_top_to_bottom():
    """loop.py holds the step and the run's state; the model call, the events, the concurrency machinery and the
    money live in modules of their own (_engine/*, _account.py), so the file stays at most 600 lines."""
    lines = (PACKAGE / "loop.py").read_text().count("\n")
    assert lines <= 600, f"agentlab/loop.py has {lines} lines (at most 600): move a part into agentlab/_engine/"
