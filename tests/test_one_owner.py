"""Every rule has one owner: a rule written a second time outside its owner fails here.

Each test takes one row of docs/architecture.md's "Who owns what" table that a reading of the code can hold: it
walks the syntax tree of every module of ``agentlab/`` for the rule's spelling and fails on one outside the
owner. Each also shows it can fail: the same checker is fed a scratch module that writes the rule again where a
realistic change would (the engine charging inline, an importer writing its own line head, ...), and must name it.
Rows that no syntax check can hold soundly (what kind a failure is, reads together and writes alone, ...) are
held by their behaviour tests instead; docs/architecture.md says which are checked here.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from pathlib import Path

import agentlab
from agentlab import _secret_rules
from agentlab.trace import schema

PACKAGE = Path(agentlab.__file__).parent

Finder = Callable[[ast.Module], Iterator[ast.AST]]
"""What a rule's spelling looks like: the nodes of one module that write it."""


@cache
def package() -> Mapping[str, str]:
    """Every module of agentlab/, by its path inside the package (``trace/schema.py``)."""
    return {str(f.relative_to(PACKAGE)): f.read_text(encoding="utf-8") for f in sorted(PACKAGE.rglob("*.py"))}


def offenders(find: Finder, owners: set[str], sources: Mapping[str, str] | None = None) -> list[str]:
    """``path:line: code`` for each spelling ``find`` sees outside ``owners`` (in the package, or in ``sources``)."""
    out = []
    for path, text in (package() if sources is None else sources).items():
        if path in owners:
            continue
        out += [f"{path}:{getattr(node, 'lineno', 0)}: {ast.unparse(node)[:100]}" for node in find(ast.parse(text))]
    return out


def found_in(find: Finder, path: str) -> bool:
    """Whether the owner's own module holds the spelling (the checker is not blind to it)."""
    return any(True for _ in find(ast.parse(package()[path])))


def holds(
    find: Finder, owners: set[str], home: str, scratch: Mapping[str, str], named: list[str] | None = None
) -> None:
    """One row's three checks: no module outside ``owners`` spells the rule; the checker sees the owner's own
    spelling (in ``home``), so it is not blind; and it names the scratch modules that break the rule (``named``:
    one file per spelling found, in order; by default each scratch module once)."""
    assert offenders(find, owners) == []
    assert found_in(find, home)
    found = [o.split(":")[0] for o in offenders(find, owners, scratch)]
    assert found == (list(scratch) if named is None else named), found


def _docstrings(tree: ast.Module) -> set[int]:
    """The string statements of a module (its docstrings and the ones under its names): prose, not code."""
    return {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}


def _strings(tree: ast.Module) -> Iterator[tuple[ast.Constant, str]]:
    """Every str or bytes literal in code (docstrings left out), as text."""
    prose = _docstrings(tree)
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, (str, bytes)) and id(n) not in prose:
            yield n, n.value.decode("latin-1") if isinstance(n.value, bytes) else n.value


def _name(node: ast.AST, *, keys: bool = True) -> str:
    """The last name of ``x``, ``a.b.x`` or (with ``keys``) ``a["x"]`` ("" for anything else)."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if keys and isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return str(node.slice.value)
    return ""


def _literal_number(node: ast.AST) -> bool:
    """``0.01``, ``10 / 1000``: a number written out, not read from a name."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.BinOp):
        return _literal_number(node.left) and _literal_number(node.right)
    return isinstance(node, ast.UnaryOp) and _literal_number(node.operand)


def _literal_dollars(node: ast.AST) -> bool:
    """A fee written out: ``0.01`` or ``10 / 1000`` (a whole number alone is a count, not dollars)."""
    bare_int = isinstance(node, ast.Constant) and isinstance(node.value, int)
    return _literal_number(node) and not bare_int


def _defined_names(tree: ast.Module) -> Iterator[tuple[ast.AST, str]]:
    """Every name a module binds: assignments (anywhere), functions and classes."""
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield n, n.name
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AnnAssign) else []
        for t in targets:
            for leaf in ast.walk(t):
                if isinstance(leaf, ast.Name):
                    yield n, leaf.id


# ------------------------------------------------------------------ the trace's schema
SCHEMA_OWN = (
    "SCHEMA_VERSION",
    "KINDS",
    "PLAIN_KINDS",
    "BASE",
    "BASE_NAMES",
    "FLOAT_TAG",
    "HEAD_PATTERN",
    "LINE_BASE",
    "TABLES",
    "ARROW_TYPES",
    "well_formed",
    "catalogue",
    "event_record",
    "line_head",
    "kind_field",
)
"""The schema's rules by name: the version, the kinds, the line's head and the NaN tag, the columns' table."""


def line_spellings(tree: ast.Module) -> Iterator[ast.AST]:
    """A trace line's head or record written out: ``"v":`` in a literal, or a dict (``{...}`` or ``dict(...)``)
    holding both ``v`` and ``run_id``."""
    for node, text in _strings(tree):
        if '"v":' in text:
            yield node
    for n in ast.walk(tree):
        if isinstance(n, ast.Dict):
            keys = {k.value for k in n.keys if isinstance(k, ast.Constant)}
        elif isinstance(n, ast.Call) and _name(n.func) == "dict":
            keys = {k.arg for k in n.keywords}
        else:
            continue
        if {"v", "run_id"} <= keys:
            yield n


def schema_spellings(tree: ast.Module) -> Iterator[ast.AST]:
    """One of the schema's names defined again (``SCHEMA_VERSION = 1``, ``def well_formed``), the NaN tag
    written as a literal, or a schema name re-exported through another module's ``__all__``."""
    for node, name in _defined_names(tree):
        if name in SCHEMA_OWN:
            yield node
    for node, text in _strings(tree):
        if text == schema.FLOAT_TAG:
            yield node
    imported = {
        a.asname or a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[-1] == "schema"
        for a in n.names
    }
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign) and any(_name(t) == "__all__" for t in n.targets):
            for element in ast.walk(n.value):
                if isinstance(element, ast.Constant) and element.value in imported & set(SCHEMA_OWN):
                    yield element


def test_a_trace_line_and_its_record_are_built_only_by_the_schema():
    """The line's head (``{"v":1,"run_id":...,"seq":``) and a record's base fields: owner ``trace/schema.py``
    (``line_head``, ``record``, ``event_record``). An importer or exporter that writes ``{"v": 1, "run_id": ...}``
    itself keeps a stale version the day the schema moves on."""
    scratch = {
        "recorded/build.py": "def line(run_id, seq):\n    return {'v': 1, 'run_id': run_id, 'seq': seq}\n",
        "otel.py": 'HEAD = b\'{"v":1,"run_id":\'\n',
    }
    holds(line_spellings, {"trace/schema.py"}, "trace/schema.py", scratch)


def test_the_schema_is_declared_once_and_re_exported_nowhere():
    """The event kinds, the version, the NaN tag, the line's pattern and the columns' table: owner
    ``trace/schema.py``, defined there only and used from there (no second ``KINDS``, no ``"$float"`` spelled
    again, no module's ``__all__`` handing a schema name on as its own)."""
    scratch = {
        "events.py": "SCHEMA_VERSION = 1\n",
        "trace/_tags.py": "def untag(v):\n    return v.get('$float')\n",
        "trace/reader.py": "from .schema import KINDS, well_formed\n__all__ = ['KINDS', 'read']\n",
    }
    holds(schema_spellings, {"trace/schema.py"}, "trace/schema.py", scratch)


# ------------------------------------------------------------------ money
TALLIES = {"spent", "model_calls"}
TALLY_OWNERS = {
    "_account.py": "a run's money: what it spent and its model calls (Account.charge)",
    "experiments/ledger.py": "an experiment's total, which its runs' accounts reserve from",
    "_subruns.py": "a parent's ledger of what its sub-runs spent",
    "scenarios/scoreboard.py": "the referee's own tally of a loop it does not trust (any loop, not only ours)",
}


def tally_spellings(tree: ast.Module) -> Iterator[ast.AST]:
    """``x.spent += cost``, ``model_calls -= 1`` or ``x.spent = x.spent + cost``: a running total of money."""
    for n in ast.walk(tree):
        if isinstance(n, ast.AugAssign) and isinstance(n.op, (ast.Add, ast.Sub)) and _name(n.target) in TALLIES:
            yield n
        elif isinstance(n, ast.Assign) and isinstance(n.value, ast.BinOp):
            for t in n.targets:
                if _name(t) in TALLIES and ast.unparse(t) in ast.unparse(n.value):
                    yield n


def test_what_a_run_spent_is_counted_only_by_its_account():
    """A call's money, charged and counted: owner ``_account.Account`` (the engine calls it once per outcome);
    the other running totals are the ledgers the account reserves from, each counting its own total."""
    inline = "def _charge(self, cost):\n    self.spent += cost\n    self.model_calls += 1\n"
    loop_side = "def _lost(run, cost):\n    run.account.spent = run.account.spent + cost\n"
    scratch = {"loop.py": inline, "_engine/model_call.py": loop_side}
    holds(tally_spellings, set(TALLY_OWNERS), "_account.py", scratch, ["loop.py", "loop.py", "_engine/model_call.py"])


def price_spellings(tree: ast.Module) -> Iterator[ast.AST]:
    """A price fact written out: the web-search fee as a number (``{"web_search": 10 / 1000}``), the one-hour
    cache-write multiplier used (``ONE_HOUR_WRITE``), or a rate scaled by a literal (``2.0 * prices.input``)."""
    rates = {"input", "output", "cache_write", "cache_read", "cache_write_1h"}
    for n in ast.walk(tree):
        if isinstance(n, ast.Dict):
            for k, v in zip(n.keys, n.values, strict=True):
                if isinstance(k, ast.Constant) and "web_search" in str(k.value).lower() and _literal_dollars(v):
                    yield v
        elif isinstance(n, ast.keyword) and "web_search" in (n.arg or "").lower() and _literal_dollars(n.value):
            yield n.value
        elif isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None and _literal_dollars(n.value):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if any("web_search" in _name(t).lower() for t in targets):
                yield n
        elif isinstance(n, ast.Name) and n.id == "ONE_HOUR_WRITE":
            yield n
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult):
            sides = (n.left, n.right)
            if any(_literal_number(s) for s in sides) and any(_name(s) in rates for s in sides):
                yield n


def test_prices_are_written_only_in_pricing():
    """Prices, the web-search fee and the one-hour cache write (2x base input): owner ``pricing.py``
    (``WEB_SEARCH_USD``, ``Prices.write_1h_rate``). The cost guard's fee table takes the fee from there."""
    scratch = {
        "budget.py": "DEFAULT_SERVER_TOOL_FEES = {'web_search': 10 / 1000}\n",
        "recorded/build.py": "def _long_ttl_extra(p, n):\n    return n * (2.0 * p.input - p.cache_write)\n",
    }
    holds(price_spellings, {"pricing.py"}, "pricing.py", scratch)


def worst_case_spellings(tree: ast.Module) -> Iterator[ast.AST]:
    """A call's worst case worked out again: every allowed output token priced (``max_tokens * output``)."""
    for n in ast.walk(tree):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult):
            names = {_name(n.left), _name(n.right)}
            if "max_tokens" in names and any("output" in name for name in names):
                yield n


def test_the_worst_case_of_a_call_is_worked_out_only_by_the_budget():
    """The most a call can cost (its input, every allowed output token, its fees): owner
    ``budget.worst_case_cost``; the cost guard, the account's reservation and the exercises' grader call it."""
    scratch = {
        "_account.py": "def reserve(n, rates, max_tokens):\n    return n * rates.input + max_tokens * rates.output\n",
        "scenarios/exercises.py": "worst = (input_tokens * p.input + max_tokens * p.output) / 1e6\n",
    }
    holds(worst_case_spellings, {"budget.py"}, "budget.py", scratch)


# ------------------------------------------------------------------ limits and checks
LIMITS = {"deadline_s", "max_steps"}


def limit_spellings(tree: ast.Module) -> Iterator[ast.AST]:
    """A limit's arithmetic written out: ``deadline_s - elapsed``, or ``deadline_s`` / ``max_steps`` compared
    with anything but a literal (``elapsed >= budget.deadline_s``, ``steps >= max_steps``). A limit read as a
    dict key (``limits["max_steps"]``: a recorded run's, or a learner's loop graded by a scenario) is data about
    another loop, not this engine's check, so only names and attributes count."""
    for n in ast.walk(tree):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Sub) and "deadline_s" in (_name(n.left), _name(n.right)):
            yield n
        elif isinstance(n, ast.Compare):
            sides = [n.left, *n.comparators]
            if any(_name(s, keys=False) in LIMITS for s in sides) and not all(
                _name(s, keys=False) in LIMITS or isinstance(s, ast.Constant) for s in sides
            ):
                yield n


def test_the_step_limit_and_the_deadline_are_computed_only_by_the_budget():
    """Whether the step limit is reached and how much time is left before the deadline: owner ``budget.py``
    (``check_before_call``, ``time_left``; every deadline check compares ``time_left`` with 0), called by the
    engine and the what-if replay alike. A second spelling is how ``>=`` here and ``>`` there drift, and a run
    resumed at ``max_steps`` makes one call too many."""
    scratch = {
        "loop.py": "def _late(self):\n    return self.elapsed >= self.budget.deadline_s\n",
        "analysis.py": "def left(budget, t):\n    return budget.deadline_s - t\n",
        "_engine/model_call.py": "def _may_call(self):\n    return self.steps < self.config.max_steps\n",
    }
    holds(limit_spellings, {"budget.py"}, "budget.py", scratch)


def whole_number_spellings(tree: ast.Module) -> Iterator[ast.AST]:
    """ "A number, never a bool" written out: one boolean expression asking both ``isinstance(x, bool)`` and
    ``isinstance(x, int)`` (or ``numbers.Integral`` / ``numbers.Real``) of the same ``x``."""
    numbers = {"int", "numbers.Integral", "Integral", "numbers.Real", "Real"}
    for n in ast.walk(tree):
        if not isinstance(n, ast.BoolOp):
            continue
        asked: dict[str, set[str]] = {}
        for value in n.values:
            call = value.operand if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not) else value
            if isinstance(call, ast.Call) and _name(call.func) == "isinstance" and len(call.args) == 2:
                asked.setdefault(ast.unparse(call.args[0]), set()).add(ast.unparse(call.args[1]))
        if any("bool" in types and types & numbers for types in asked.values()):
            yield n


def test_whole_numbers_and_seconds_are_checked_by_one_rule():
    """ "A whole number of at least N" and "a number of seconds" (never a bool): owner ``_checks.is_whole`` /
    ``_checks.is_seconds``, called by ``Policy``, ``Retry`` and the options; no module spells the test out again,
    in any order or spacing."""
    scratch = {
        "errors.py": "def ok(n):\n    return isinstance(n, int) and not isinstance(n, bool) and n >= 1\n",
        "retry.py": "def bad(s):\n    return isinstance(s, bool) or not isinstance(s, numbers.Real)\n",
    }
    holds(whole_number_spellings, {"_checks.py"}, "_checks.py", scratch)


# ------------------------------------------------------------------ secrets
def secret_rule_spellings(tree: ast.Module) -> Iterator[ast.AST]:
    """A credential's format written outside the table: one of its prefixes as a literal (``b"ghp_"``), a
    pattern starting at one (``r"\\bghp_..."``), a pattern of the table copied, a PEM marker; or the table
    imported by another module than the one that compiles it."""
    prefixes = {p for f in _secret_rules.FORMATS for p in f.prefixes}
    patterns = [f.pattern.lower() for f in _secret_rules.FORMATS] + [_secret_rules.URL_CREDENTIAL.lower()]
    for node, text in _strings(tree):
        low = text.lower()
        if (
            low in prefixes
            or any("\\b" + p in low for p in prefixes)
            or any(p in low for p in patterns)
            or "-----begin" in low
        ):
            yield node
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and "_secret_rules" in ((n.module or "") + " ".join(a.name for a in n.names)):
            yield n


def test_what_counts_as_a_secret_is_written_only_in_the_rules_table():
    """What counts as a secret (names, formats, labels): owner ``_secret_rules.py``, compiled by ``redact.py``
    alone into every scanner (the walk, the stream, the writer's prefilter). A hand-written second copy of a
    format is the copy that falls behind."""
    owners = {"_secret_rules.py", "redact.py"}
    scratch = {
        "trace/writer.py": "HINTS = (b'ghp_', b'sk-ant-')\n",
        "lab/_state.py": "import re\nKEY = re.compile(r'\\bghp_[A-Za-z0-9]{20,}')\n",
        "otel.py": "from ._secret_rules import FORMATS\n",
    }
    holds(secret_rule_spellings, owners, "redact.py", scratch)  # redact.py imports the table
