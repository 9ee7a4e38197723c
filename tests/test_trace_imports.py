"""``trace/`` imports one way: no module imports, even inside a function, one that imports it back, the read
side never imports the writer, and the schema imports no other module of ``trace/`` (every other one rests on it)."""

from __future__ import annotations

import ast
from pathlib import Path

import agentlab.trace
from agentlab.trace import schema

TRACE = Path(agentlab.trace.__file__).parent
READ_SIDE = ("reader", "runs", "frames", "_json", "_tags", "_columns", "_store", "_deferred", "_sql", "display")


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports_of(path: Path) -> set[str]:
    """The ``trace/`` modules a file imports anywhere in it (at the top or inside a function; not the names only
    a type checker reads, under ``if TYPE_CHECKING:``)."""
    tree = ast.parse(path.read_text())
    skip = {id(n) for block in ast.walk(tree) if _type_checking(block) for n in ast.walk(block)}
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module:  # from .x import y
                out.add(node.module.split(".")[0])
            elif node.level == 1:  # from . import x
                out |= {a.name for a in node.names}
            elif node.level == 0 and (node.module or "").startswith("agentlab.trace."):
                out.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[2] for a in node.names if a.name.startswith("agentlab.trace.")}
    return out


def graph() -> dict[str, set[str]]:
    mods = {p.stem for p in TRACE.glob("*.py")}
    return {p.stem: imports_of(p) & mods - {p.stem} for p in TRACE.glob("*.py") if p.stem != "__init__"}


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (a list of modules, the first repeated at the end), or None."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(edges.get(m, ())):
            if state.get(n) == 1:
                return path[path.index(n) :] + [n]
            if n not in state and (found := visit(n)):
                return found
        state[m] = 2
        path.pop()
        return None

    for m in sorted(edges):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_no_module_of_trace_imports_one_that_imports_it_back():
    assert cycle(graph()) is None, " -> ".join(cycle(graph()) or [])


def test_the_cycle_check_sees_an_import_inside_a_function():
    edges = graph()
    edges["schema"] = edges["schema"] | {"writer"}  # as if schema imported the writer inside a function
    assert cycle(edges)


def test_the_read_side_does_not_import_the_writer():
    edges = graph()
    assert {m for m in READ_SIDE if "writer" in edges[m]} == set()


def test_the_schema_rests_on_no_other_module_of_trace():
    assert graph()["schema"] == set()


def test_the_line_head_is_the_base_fields_in_their_order(tmp_path):
    """The writer's head, the pattern the store cuts lines with and rebuilt records all spell the base fields,
    and every line a real run writes has that head."""
    import re

    line = schema.LINE_BASE % (schema.line_head("r1"), 3, 1, 0.5) + schema.kind_field("note") + b'"text":"hi"}'
    assert schema.BASE_NAMES == ("v", "run_id", "seq", "step", "t", "kind")
    assert list(schema.record("r1", 3, 1, 0.5, "note", {"text": "hi"})) == [*schema.BASE_NAMES, "text"]
    assert re.sub(schema.HEAD_PATTERN, "{", line.decode(), count=1) == '{"text":"hi"}'

    import agentlab as al

    al.run("q", model=al.ScriptedModel([al.reply("hi")]), trace=tmp_path, max_cost=None, run_id="r2")
    lines = (tmp_path / "r2.jsonl").read_text().splitlines()
    assert lines and all(ln.startswith(schema.line_head("r2").decode()) for ln in lines)
    assert all(re.match(schema.HEAD_PATTERN, ln) for ln in lines)


def test_an_events_record_opens_with_the_schemas_base_fields():
    """The record of an engine event (what the writer's long way, the OpenTelemetry exporter and a subscriber get)
    is the schema's record, base fields first and in order, ``t`` to the microsecond as the line writes it."""
    from agentlab.events import Event

    record = schema.event_record(Event("note", "r1", 2, 5, 0.2500004, {"text": "hi"}))
    assert record == schema.record("r1", 5, 2, 0.25, "note", {"text": "hi"})
    assert list(record) == [*schema.BASE_NAMES, "text"]
