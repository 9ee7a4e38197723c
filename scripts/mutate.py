"""Mutation testing of the money and limit rules: does the unit tier notice when a rule is changed?

``python scripts/mutate.py agentlab/budget.py agentlab/pricing.py [--workers 2] [--write docs/benchmarks.md]``
(``make mutate``); ``--only FILE:LINE`` re-judges some lines, ``--tests PATH...`` narrows the coverage run.

Each mutant changes one thing in one file: a comparison's boundary (``>=`` to ``>``), an operator (``+`` to
``-``, ``*`` to ``/``), ``and`` to ``or``, a ``not`` dropped, a number off by one, ``True`` to ``False``,
``min`` to ``max``. The unit tier (``pytest -m unit``) runs once under coverage to learn which tests run each
line; each mutant then runs those of the money and limit test files (:data:`MONEY_TESTS`, a few seconds
together) and the most targeted others (:data:`TESTS_PER_MUTANT`), stopping at the first failure; a line run
when the module is imported (a default, a constant) runs the money files whole. A mutant is *killed* when a
test fails (or the tests time out), and *survives* when they pass; a line no unit test runs is a survivor
too. The score is killed / all. Mutation tools from PyPI (mutmut 3) rewrite functions into trampolines that
the package's own surface tests see; this one changes the source file itself, in a scratch copy of the
repository, so the tests see the code as a user would.

With ``--write FILE`` the result replaces the block between ``<!-- mutate:begin -->`` and
``<!-- mutate:end -->`` in FILE.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PER_MUTANT_S = 120.0
"""A mutant whose tests run longer than this is killed (a mutant that loops forever)."""
TESTS_PER_MUTANT = 8
"""The other covering tests a mutant runs, after every covering test of :data:`MONEY_TESTS`: those of the
file's own test modules (named ``test_<file>...``) first, then those that run the fewest of its lines. A line
most of the suite runs (a run's budget check) would otherwise cost the whole tier per mutant; the price is a
mutant that only a test further down the list would kill counts as a survivor."""
MONEY_TESTS = (
    "tests/test_account.py",
    "tests/test_budget_numbers.py",
    "tests/test_budget_properties.py",
    "tests/test_engine_budgets.py",
    "tests/test_limit_properties.py",
    "tests/test_money_rules.py",
    "tests/test_pricing.py",
)
"""The unit-tier test files of the money and limit rules (a few seconds together): a mutant runs every one of
their tests that covers its line, however many, so that a rule these files hold never counts as a survivor.
(``test_cost_guard_exact.py`` and ``test_anthropic_money.py`` are integration tests, half a minute together:
the unit tier, so the mutants, never run them; ``test_money_rules.py`` holds their rules at the unit level.)"""
BEGIN, END = "<!-- mutate:begin -->", "<!-- mutate:end -->"

_COMPARE = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
_BINARY = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Mult}
_SYMBOL = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.And: "and",
    ast.Or: "or",
}


@dataclass
class Site:
    line: int
    what: str
    index: int = 0
    """Its place in the file's fixed order of sites."""


def _sites(tree: ast.Module, source_lines: list[str], apply: int | None = None) -> list[Site]:
    """Every place one mutation applies, in a fixed order; with ``apply=k``, the k-th is changed in ``tree``."""
    sites: list[Site] = []
    skip: set[int] = set()  # docstrings, annotations, __all__
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                skip |= {id(n) for n in ast.walk(body[0])}
        for field in ("annotation", "returns"):
            sub = getattr(node, field, None)
            if isinstance(sub, ast.AST):
                skip |= {id(n) for n in ast.walk(sub)}
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            skip |= {id(n) for n in ast.walk(node)}

    def add(node: ast.AST, what: str, change) -> None:
        line = getattr(node, "lineno", 0)
        if id(node) in skip or "pragma: no mutate" in source_lines[line - 1]:
            return
        if apply == len(sites):
            change()
        sites.append(Site(line, what, len(sites)))

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                new = _COMPARE.get(type(op))
                if new is not None:
                    add(
                        node,
                        f"{_SYMBOL[type(op)]} -> {_SYMBOL[new]}",
                        lambda n=node, i=i, new=new: n.ops.__setitem__(i, new()),
                    )
        elif isinstance(node, (ast.BinOp, ast.AugAssign)):
            new = _BINARY.get(type(node.op))
            if new is not None:
                add(
                    node, f"{_SYMBOL[type(node.op)]} -> {_SYMBOL[new]}", lambda n=node, new=new: setattr(n, "op", new())
                )
        elif isinstance(node, ast.BoolOp):
            new = ast.Or if isinstance(node.op, ast.And) else ast.And
            add(node, f"{_SYMBOL[type(node.op)]} -> {_SYMBOL[new]}", lambda n=node, new=new: setattr(n, "op", new()))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
            add(node, f"{'not' if isinstance(node.op, ast.Not) else '-'} dropped", lambda n=node: _drop_unary(n))
        elif isinstance(node, ast.Constant) and type(node.value) in (int, float, bool):
            if isinstance(node.value, bool):
                add(node, f"{node.value} -> {not node.value}", lambda n=node: setattr(n, "value", not n.value))
            else:
                add(node, f"{node.value!r} -> {node.value + 1!r}", lambda n=node: setattr(n, "value", n.value + 1))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max"):
            new_name = "max" if node.func.id == "min" else "min"
            add(
                node, f"{node.func.id} -> {new_name}", lambda n=node, new_name=new_name: setattr(n.func, "id", new_name)
            )
    return sites


def _drop_unary(node: ast.UnaryOp) -> None:
    """``-x`` becomes ``+x``; ``not x`` becomes ``not not x`` (the truth of ``x``: the ``not`` dropped)."""
    if isinstance(node.op, ast.USub):
        node.op = ast.UAdd()
    else:
        node.operand = ast.UnaryOp(op=ast.Not(), operand=node.operand)


def mutant_source(source: str, k: int) -> str:
    tree = ast.parse(source)
    _sites(tree, source.splitlines(), apply=k)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def scratch_copy() -> Path:
    """The repository's tracked files (as they are in the working tree) in a temporary folder."""
    dest = Path(tempfile.mkdtemp(prefix="agentlab-mutate-"))
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, files):
        src = ROOT / name.decode()
        if src.is_file():
            target = dest / name.decode()
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return dest


def tests_by_line(copy: Path, targets: list[str], tests: list[str] | None = None) -> dict[str, dict[int, list[str]]]:
    """Run the unit tier (or its tests among ``tests``) once under coverage, unless ``copy`` holds that run's
    data: for each target file and line, the test node ids a mutant there runs."""
    failed = copy / ".failing"
    if not (copy / ".coverage").exists():
        rc = copy / ".coveragerc"
        rc.write_text("[run]\nsource_pkgs =\n    agentlab\n")
        (copy / f"{_CONTEXTS}.py").write_text(_CONTEXTS_PLUGIN)
        env = {**os.environ, "PYTHONPATH": str(copy), "COVERAGE_FILE": str(copy / ".coverage")}
        cmd = [
            sys.executable,
            "-m",
            "coverage",
            "run",
            f"--rcfile={rc}",
            "-m",
            "pytest",
            "-q",
            "-m",
            "unit",
            "-p",
            _CONTEXTS,
            *(tests or []),
        ]
        done = subprocess.run(
            [*cmd, "-p", "no:cacheprovider", "--no-header", "-rf"], cwd=copy, env=env, capture_output=True, text=True
        )
        failed.write_text(
            repr(sorted(line.split()[1] for line in done.stdout.splitlines() if line.startswith("FAILED ")))
        )
    failing = set(ast.literal_eval(failed.read_text())) if failed.exists() else set()
    if failing:  # a test that fails unmutated would "kill" every mutant: left out, and named
        print(f"left out, failing before any mutation: {sorted(failing)}", flush=True)
    import coverage

    data = coverage.CoverageData(basename=str(copy / ".coverage"))
    data.read()
    out: dict[str, dict[int, list[str]]] = {}
    for target in targets:
        path = next((f for f in data.measured_files() if f.endswith(os.sep + target)), str(copy / target))
        lines: dict[int, set[str]] = {}
        imported: set[int] = set()  # lines run when the module is imported (defaults, constants, signatures)
        for line, contexts in (data.contexts_by_lineno(path) or {}).items():
            nodes = {_node_id(c) for c in contexts if c}
            lines[line] = {n for n in nodes if n and not any(f.split("[")[0] == n for f in failing)}
            if "" in contexts:
                imported.add(line)
        reach: dict[str, int] = {}  # how many of the file's lines each test runs
        for nodes in lines.values():
            for n in nodes:
                reach[n] = reach.get(n, 0) + 1
        own = f"test_{Path(target).stem.lstrip('_')}"

        def targeted(node: str, own: str = own, reach: dict[str, int] = reach) -> tuple[bool, int, str]:
            return (not Path(node.split("::")[0]).name.startswith(own), reach[node], node)

        def chosen(line: int, nodes: set[str], imported: set[int] = imported) -> list[str]:
            if line in imported and not any(f.split("::")[0] in MONEY_TESTS for f in failing):
                # no test ran it, every test depends on it (a default, a constant): the money files, whole
                money = [f for f in MONEY_TESTS if (copy / f).is_file()]
            else:
                money = sorted(n for n in nodes if n.split("::")[0] in MONEY_TESTS)
            others = sorted((n for n in nodes if n.split("::")[0] not in MONEY_TESTS), key=targeted)
            return money + others[:TESTS_PER_MUTANT]

        out[target] = {line: chosen(line, nodes) for line, nodes in lines.items()}
    return out


_CONTEXTS = "_mutate_contexts"
_CONTEXTS_PLUGIN = '''"""Each test's lines under its pytest node id (coverage's own ``test_function`` context names the
innermost function called ``test_*``: every Hypothesis property would be ``ConjectureRunner.test_function``).

The package's memoized functions (``functools`` caches: a price looked up once) are emptied before each test, so
each test is seen running the lines it depends on, not only the first test to ask."""

import sys

import coverage
import pytest


def _forget():
    for name, module in list(sys.modules.items()):
        if name == "agentlab" or name.startswith("agentlab."):
            for value in list(vars(module).values()):
                if getattr(value, "__module__", None) == name and callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cov = coverage.Coverage.current()
    if cov is not None:
        _forget()
        cov.switch_context(item.nodeid)
    yield
    if cov is not None:
        cov.switch_context("")
'''
"""A pytest plugin the coverage run loads: the lines a test runs are recorded under its node id."""


def _node_id(context: str) -> str | None:
    """A test's coverage context (its pytest node id) as the node id a mutant runs: all its parameters."""
    return context.split("[", 1)[0] or None


_PRELOADED = ("pytest", "hypothesis", "numpy", "pandas", "pydantic", "httpx", "anthropic", "orjson", "ahocorasick_rs")
"""Imported once, before the mutants fork: each mutant's tests then import only the package (fresh, mutated)."""


def run_tests(copy: Path, target: Path, nodes: list[str]) -> str:
    """``killed`` or ``survived`` (or ``timeout``, which counts as killed) for the current files of ``copy``.

    A forked child runs the tests, so the libraries the tests use are imported once; the package itself is
    imported by the child only, from the scratch copy, with no stale bytecode of the mutated file."""
    for cached in (target.parent / "__pycache__").glob(f"{target.stem}.*.pyc"):
        cached.unlink()
    pid = os.fork()
    if pid == 0:  # the child: the tests, quietly, then out without running the parent's clean-up
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            import pytest

            rc = pytest.main(["-q", "-x", "-m", "unit", "-p", "no:cacheprovider", "--no-header", *nodes])
        except BaseException:
            rc = 99
        os._exit(int(rc))
    deadline = time.monotonic() + PER_MUTANT_S
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return "survived" if os.waitstatus_to_exitcode(status) == 0 else "killed"
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timeout"
        time.sleep(0.02)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="source files to mutate, relative to the repository")
    parser.add_argument("--write", type=Path, help="put the result between the mutate markers of this file")
    parser.add_argument("--reuse", type=Path, help="a scratch copy (and its coverage run) of an earlier, stopped run")
    parser.add_argument("--workers", type=int, default=1, help="mutants run by this many processes, each in its copy")
    parser.add_argument(
        "--only", action="append", default=[], metavar="FILE:LINE", help="only the mutants of these lines (repeatable)"
    )
    parser.add_argument(
        "--tests",
        nargs="+",
        default=[],
        help="the coverage run runs these test paths' unit tests instead of the whole unit tier (a quick re-check)",
    )
    args = parser.parse_args(argv)
    write = args.write.resolve() if args.write else None
    only = {(f, int(n)) for f, n in (item.rsplit(":", 1) for item in args.only)}
    started = time.monotonic()
    copy = args.reuse.resolve() if args.reuse else scratch_copy()
    try:
        covered = tests_by_line(copy, args.files, args.tests)
        sys.dont_write_bytecode = True
        for name in _PRELOADED:
            __import__(name)
        rows = _in_workers(copy, args.files, covered, only, max(args.workers, 1))
    finally:
        os.chdir(ROOT)
        if not args.reuse:
            shutil.rmtree(copy, ignore_errors=True)
    report = render(rows, time.monotonic() - started)
    print(report)
    if write is not None:
        text = write.read_text(encoding="utf-8")
        if BEGIN not in text or END not in text:
            raise SystemExit(f"{write} has no {BEGIN} ... {END} block to replace")
        head, rest = text.split(BEGIN, 1)
        write.write_text(head + BEGIN + "\n" + report + "\n" + END + rest.split(END, 1)[1], encoding="utf-8")
    return 0


def _in_workers(
    copy: Path, files: list[str], covered: dict[str, dict[int, list[str]]], only: set[tuple[str, int]], workers: int
) -> list[tuple[str, Site, str]]:
    """The verdicts of every mutant, in the sites' order; with several workers, worker ``i`` forks, copies
    ``copy`` (a mutant changes its copy's file) and judges every ``workers``-th mutant from the ``i``-th."""
    if workers == 1:
        return _judge(copy, files, covered, only, 0, 1)
    results: list[Path] = []
    pids = []
    for i in range(workers):
        out = copy.with_name(f"{copy.name}-worker{i}.json")
        results.append(out)
        pid = os.fork()
        if pid == 0:
            rc = 0
            try:
                mine = copy.with_name(f"{copy.name}-worker{i}")
                shutil.rmtree(mine, ignore_errors=True)
                shutil.copytree(copy, mine)
                rows = _judge(mine, files, covered, only, i, workers)
                out.write_text(json.dumps([(t, s.line, s.what, s.index, v) for t, s, v in rows]))
                shutil.rmtree(mine, ignore_errors=True)
            except BaseException:
                import traceback

                traceback.print_exc()
                rc = 1
            os._exit(rc)
        pids.append(pid)
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit("a worker failed (its error is above)")
    rows = [
        (t, Site(line, what, index), v) for out in results for t, line, what, index, v in json.loads(out.read_text())
    ]
    for out in results:
        out.unlink()
    order = {t: i for i, t in enumerate(files)}
    return sorted(rows, key=lambda r: (order[r[0]], r[1].index))


def _judge(
    copy: Path,
    files: list[str],
    covered: dict[str, dict[int, list[str]]],
    only: set[tuple[str, int]],
    shard: int,
    shards: int,
) -> list[tuple[str, Site, str]]:
    """This shard's mutants of ``files`` in ``copy``, each judged by its covering tests."""
    sys.path.insert(0, str(copy))
    os.chdir(copy)
    os.environ["PYTHONPATH"] = str(copy)
    rows: list[tuple[str, Site, str]] = []
    for target in files:
        path = copy / target
        source = path.read_text(encoding="utf-8")
        sites = _sites(ast.parse(source), source.splitlines())
        for k, site in enumerate(sites):
            if k % shards != shard or (only and (target, site.line) not in only):
                continue
            nodes = covered[target].get(site.line, [])
            if not nodes:
                rows.append((target, site, "not covered"))
                continue
            path.write_text(mutant_source(source, k), encoding="utf-8")
            try:
                verdict = run_tests(copy, path, nodes)
            finally:
                path.write_text(source, encoding="utf-8")
            rows.append((target, site, verdict))
            print(f"{target}:{site.line} {site.what}: {verdict}", flush=True)
    return rows


def render(rows: list[tuple[str, Site, str]], seconds: float) -> str:
    killed = sum(v in ("killed", "timeout") for _, _, v in rows)
    lines = [
        f"{len(rows)} mutants, {killed} killed: score **{killed / max(len(rows), 1):.0%}** "
        f"({seconds / 60:.0f} min on this machine).",
        "",
        "| file | mutants | killed | survived | not covered by a unit test |",
        "|---|---|---|---|---|",
    ]
    for target in dict.fromkeys(t for t, _, _ in rows):
        mine = [v for t, _, v in rows if t == target]
        lines.append(
            f"| `{target}` | {len(mine)} | {sum(v in ('killed', 'timeout') for v in mine)} | "
            f"{mine.count('survived')} | {mine.count('not covered')} |"
        )
    survivors = [(t, s, v) for t, s, v in rows if v in ("survived", "not covered")]
    if survivors:
        lines += ["", "Surviving mutants (file:line, the change, why it lived):", ""]
        lines += [f"- `{t}:{s.line}` `{s.what}` ({v})" for t, s, v in survivors]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
