"""One definition of the trace schema: the docs, the reader's checks, the frames and the store follow from it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import agentlab as al
from agentlab.trace import _docs, _store, schema
from agentlab.trace.schema import TABLES
from agentlab.vocab import EventKind

ROOT = Path(__file__).resolve().parent.parent
HOLDS = {  # field type -> the column dtypes it can fill
    "int": {"int64", "float64"},
    "float": {"float64"},
    "str": {"str", "datetime64[ns, UTC]"},
    "bool": {"bool"},
    "dict": {"json", "float64"},  # the dict itself (args), or a number in it (budget.max_steps)
    "usage": {"int64"},
    "list": {"int64"},  # token counts; a count of blocks (tool_calls)
    "any": {"str"},  # shown as text (result_preview)
}


def test_the_schema_in_the_docs_is_the_one_the_code_defines():
    """docs/traces.md's schema block is generated: edit schema.KINDS or schema.TABLES and it must be regenerated."""
    text = _docs.DOCS.read_text(encoding="utf-8")
    assert _docs.current(text) == _docs.render(), "docs/traces.md is stale: run `python -m agentlab.trace._docs`"


def test_every_event_kind_has_one_definition_and_every_column_reads_a_checked_field():
    """Each kind is defined once; each frame column read from an event names a field the reader type-checks,
    of a type its dtype can hold (so a well-formed line never breaks a frame)."""
    assert list(schema.KINDS) == list(EventKind)
    base = {f.name: f for f in schema.BASE}
    for table, columns in TABLES.items():
        for col in columns:
            if not col.source:
                continue
            kind, _, name = col.source.partition(".")
            fields = {**base, **{f.name: f for f in schema.KINDS[EventKind(kind)].fields}}
            field = fields[name]
            assert field.read, f"{table}.{col.name} reads {col.source}, which the reader does not check"
            assert col.dtype in HOLDS[field.type], (table, col.name, field.type)
    for table, columns in TABLES.items():
        pytest.importorskip("pyarrow")
        assert _store.schema(table).names[: len(columns)] == [c.name for c in columns]


@pytest.mark.parametrize(
    "line, ok",
    [
        ({"kind": "tool_finished", "step": 1, "t": 0.5, "call_id": "c1", "attempts": 2}, True),
        ({"kind": "tool_finished", "step": 1, "t": 0.5}, False),  # call_id is required
        ({"kind": "tool_finished", "step": 1, "t": 0.5, "call_id": "c1", "attempts": "2"}, False),
        ({"kind": "model_called", "step": 1, "t": 0.5, "usage": {"input_tokens": "lots"}}, False),
        ({"kind": "model_called", "step": 1, "t": 0.5, "cost": {"$float": "NaN"}}, True),
        ({"kind": "model_called", "step": 1, "t": True}, False),
        ({"kind": "note", "step": 2**63, "t": 0.0}, False),
        (
            {"kind": "run_finished", "step": 3, "t": 1.0, "text": 42},
            True,
        ),  # not read by the frames: not checked
    ],
)
def test_the_readers_check_follows_the_definition(line, ok):
    assert schema.well_formed(line) is ok


def test_the_writer_skips_redaction_only_for_kinds_defined_as_numbers_and_limits():
    assert schema.PLAIN_KINDS == {"model_request", "step_finished", "paused", "resumed"}
    from agentlab.trace import writer

    assert writer.PLAIN_KINDS is schema.PLAIN_KINDS


def test_a_traced_run_imports_the_writer_only_and_import_agentlab_no_store_engine(tmp_path):
    """Importing agentlab loads neither pyarrow nor duckdb; a traced run loads the trace package's writer side only."""
    code = (
        "import sys, agentlab as al\n"
        "assert 'pyarrow' not in sys.modules and 'duckdb' not in sys.modules\n"
        f"al.run('q', model=al.ScriptedModel([al.reply('hi')]), trace={str(tmp_path)!r}, max_cost=None)\n"
        "print(sorted(m for m in sys.modules if m.startswith('agentlab.trace')))\n"
        "print(sorted(m for m in ('pandas', 'pyarrow', 'duckdb') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    ).stdout.splitlines()
    writer_side = ["agentlab.trace", "agentlab.trace._blobs", "agentlab.trace.files", "agentlab.trace.schema"]
    assert out == [str([*writer_side, "agentlab.trace.writer"]), "[]"]
    assert al.load_runs(tmp_path).runs["outcome"].tolist() == ["done"]
