"""Mutation testing of the money and limit rules: does the unit tier notice when a rule is changed?

``python scripts/mutate.py agentlab/budget.py agentlab/pricing.py [--write docs/benchmarks.md]`` (``make mutate``).

Each mutant changes one thing in one file: a comparison's boundary (``>=`` to ``>``), an operator (``+`` to
``-``, ``*`` to ``/``), ``and`` to ``or``, a ``not`` dropped, a number off by one, ``True`` to ``False``,
``min`` to ``max``. The unit tier (``pytest -m unit``) runs once under coverage to learn which tests run each
line; each mutant then runs the most targeted of those tests (at most :data:`TESTS_PER_MUTANT`), stopping at
the first failure. A mutant is *killed* when a
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
"""The covering tests a mutant runs, the most targeted first: those of the file's own test modules (named
``test_<file>...``), then those that run the fewest of its lines. A line most of the suite runs (a run's
budget check) would otherwise cost the whole tier per mutant; the price is a mutant that only a test further
down the list would kill counts as a survivor."""
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
        sites.append(Site(line, what))

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


def tests_by_line(copy: Path, targets: list[str]) -> dict[str, dict[int, list[str]]]:
    """Run the unit tier once under coverage (unless ``copy`` holds that run's data): for each target file and
    line, the test node ids that run it, the most targeted first."""
    failed = copy / ".failing"
    if not (copy / ".coverage").exists():
        rc = copy / ".coveragerc"
        rc.write_text("[run]\ndynamic_context = test_function\nsource_pkgs =\n    agentlab\n")
        env = {**os.environ, "PYTHONPATH": str(copy), "COVERAGE_FILE": str(copy / ".coverage")}
        cmd = [sys.executable, "-m", "coverage", "run", f"--rcfile={rc}", "-m", "pytest", "-q", "-m", "unit"]
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
        for line, contexts in (data.contexts_by_lineno(path) or {}).items():
            nodes = {_node_id(c) for c in contexts if c}
            lines[line] = {n for n in nodes if n and not any(f.split("[")[0] == n for f in failing)}
        reach: dict[str, int] = {}  # how many of the file's lines each test runs
        for nodes in lines.values():
            for n in nodes:
                reach[n] = reach.get(n, 0) + 1
        own = f"test_{Path(target).stem.lstrip('_')}"

        def targeted(node: str, own: str = own, reach: dict[str, int] = reach) -> tuple[bool, int, str]:
            return (not Path(node.split("::")[0]).name.startswith(own), reach[node], node)

        out[target] = {line: sorted(nodes, key=targeted)[:TESTS_PER_MUTANT] for line, nodes in lines.items()}
    return out


def _node_id(context: str) -> str | None:
    """``tests.test_budget_numbers.test_x`` (a coverage test_function context) as a pytest node id."""
    parts = context.split(".")
    for i in range(len(parts), 0, -1):
        module = Path(*parts[:i]).with_suffix(".py")
        if (ROOT / module).is_file():
            rest = parts[i:]
            return "::".join([module.as_posix(), *rest[:2]]) if rest else None
    return None


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
    parser.add_argument("--shard", default="0/1", help="i/n: this worker's share of the mutants (each in its copy)")
    args = parser.parse_args(argv)
    write = args.write.resolve() if args.write else None
    shard, shards = map(int, args.shard.split("/"))
    started = time.monotonic()
    copy = args.reuse.resolve() if args.reuse else scratch_copy()
    try:
        covered = tests_by_line(copy, args.files)
        sys.dont_write_bytecode = True
        sys.path.insert(0, str(copy))
        os.chdir(copy)
        os.environ["PYTHONPATH"] = str(copy)
        for name in _PRELOADED:
            __import__(name)
        rows: list[tuple[str, Site, str]] = []
        for target in args.files:
            path = copy / target
            source = path.read_text(encoding="utf-8")
            sites = _sites(ast.parse(source), source.splitlines())
            for k, site in enumerate(sites):
                if k % shards != shard:
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
