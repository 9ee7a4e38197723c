"""Every place agentlab writes a file, each reviewed: it redacts what it writes, or what it writes holds no text a
user or a model supplied.

The audit reads the package's source (``ast``): a call that writes a file (``open`` for writing, ``os.open``,
``write_text``/``write_bytes``, ``json.dump``, Parquet's ``write_table``, ``nbformat.write``, ``savefig``,
``shutil`` copies, ``sqlite3.connect`` ...) is a writer, named by its module, the function it is in and what it
calls. A new writer fails the audit until it is reviewed and added to :data:`REVIEWED` (with why no secret
reaches its bytes); a writer that is gone fails it too, so the list stays the list.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

REDACTS = "redacts"
FROM_REDACTED = "from redacted files"
NO_USER_TEXT = "no user text"

REVIEWED: dict[str, tuple[str, str]] = {
    # --- what a run, an experiment or an import saves: every byte through the redactor
    "agentlab/trace/writer.py::TraceWriter._open_file::open": (REDACTS, "the trace writer: each line redacted"),
    "agentlab/trace/writer.py::_open_nofollow::os.open": (REDACTS, "the opener of the trace writer's files"),
    "agentlab/recorded/__init__.py::import_recorded::open": (REDACTS, "imported runs, built with the redactor"),
    "agentlab/experiments/folder.py::RowFile.__init__::open": (REDACTS, "rows.jsonl: RowFile.write redacts"),
    "agentlab/experiments/folder.py::_write_atomically::.mkstemp": (REDACTS, "manifest.json: options redacted"),
    "agentlab/experiments/folder.py::_write_atomically::os.fdopen": (REDACTS, "manifest.json: options redacted"),
    "agentlab/report.py::export_notebook::nbformat.write": (REDACTS, "the report notebook: each cell redacted"),
    "agentlab/trace/_store.py::_write_table::.write_table": (FROM_REDACTED, "Parquet of the (redacted) trace logs"),
    "agentlab/cli.py::cmd_diff::.write_text": (FROM_REDACTED, "agentlab diff --html: two runs' (redacted) traces"),
    # --- bytes a tool returned as an image or a PDF: stored as they are (binary; see docs/traces.md)
    "agentlab/trace/_blobs.py::_write_once::open": (NO_USER_TEXT, "image and PDF bytes, kept as returned"),
    # --- files that hold no text a user or a model supplied
    "agentlab/experiments/folder.py::Folder.own::os.open": (NO_USER_TEXT, "owner.lock: pid, host, time"),
    "agentlab/experiments/folder.py::Folder.own::.pwrite": (NO_USER_TEXT, "owner.lock: pid, host, time"),
    "agentlab/trace/_store.py::locked::os.open": (NO_USER_TEXT, "the store's lock file (opened, never written)"),
    "agentlab/_price_cache.py::_write::.mkstemp": (NO_USER_TEXT, "public model prices"),
    "agentlab/_price_cache.py::_write::os.fdopen": (NO_USER_TEXT, "public model prices"),
    "agentlab/_price_cache.py::_write::json.dump": (NO_USER_TEXT, "public model prices"),
    "agentlab/cli.py::cmd_demo::.write_text": (NO_USER_TEXT, "the offline demo's numbers"),
    "agentlab/cli.py::_demo_plots.save::.savefig": (NO_USER_TEXT, "the offline demo's charts"),
    "agentlab/cli.py::main::open": (NO_USER_TEXT, "os.devnull"),
    "agentlab/_shown.py::ShownAxes._repr_png_::.savefig": (NO_USER_TEXT, "a chart, into memory"),
    "agentlab/_teaching.py::copy_notebooks::.copyfile": (NO_USER_TEXT, "the packaged notebooks"),
    "agentlab/shop.py::Shop.__init__::.mkdtemp": (NO_USER_TEXT, "a folder"),
    "agentlab/shop.py::Shop._create::sqlite3.connect": (NO_USER_TEXT, "the course shop's seeded data"),
    "agentlab/shop.py::Shop.connect::sqlite3.connect": (NO_USER_TEXT, "the course shop's seeded data"),
    "agentlab/scenarios/shop_study.py::shop_experiment::.mkdtemp": (NO_USER_TEXT, "a folder"),
    "agentlab/trace/_docs.py::write::.write_text": (NO_USER_TEXT, "the schema table of the project's docs"),
    "agentlab/usage_fields.py::<module>::.write_text": (NO_USER_TEXT, "the usage-fields table of the project's docs"),
    "agentlab/trace/_sql.py::sql::duckdb.connect": (NO_USER_TEXT, "an in-memory database"),
    "agentlab/trace/_store_worker.py::main::os.fdopen": (NO_USER_TEXT, "a pipe to the parent: status lines"),
}

_WRITE_METHODS = frozenset(
    {
        "write_text",
        "write_bytes",
        "write_table",
        "write_to_dataset",
        "write_dataset",
        "write_parquet",
        "write_csv",
        "write_ipc",
        "write_json",
        "to_parquet",
        "to_csv",
        "to_feather",
        "to_pickle",
        "savefig",
        "pwrite",
        "copyfile",
        "mkstemp",
        "mkdtemp",
        "NamedTemporaryFile",
        "symlink_to",
        "hardlink_to",
    }
)
_MODULE_CALLS = frozenset(
    {
        ("json", "dump"),
        ("pickle", "dump"),
        ("nbformat", "write"),
        ("os", "write"),
        ("os", "open"),
        ("os", "fdopen"),
        ("io", "open"),
        ("sqlite3", "connect"),
        ("duckdb", "connect"),
        ("shutil", "copy"),
        ("shutil", "copy2"),
        ("shutil", "copytree"),
        ("shutil", "move"),
    }
)


def _mode(call: ast.Call, position: int) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == "mode":
            return kw.value
    return call.args[position] if len(call.args) > position else None


def _writes(mode: ast.expr | None, *, unknown: bool) -> bool:
    if mode is None:
        return False
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return any(c in mode.value for c in "wax+")
    return unknown  # a mode computed at run time


def _kind(call: ast.Call) -> str | None:
    """What ``call`` writes with, or None when it writes no file."""
    f = call.func
    if isinstance(f, ast.Name):
        return "open" if f.id == "open" and _writes(_mode(call, 1), unknown=True) else None
    if not isinstance(f, ast.Attribute):
        return None
    owner = f.value.id if isinstance(f.value, ast.Name) else None
    if (owner, f.attr) in _MODULE_CALLS:
        if f.attr in ("fdopen",) or (owner, f.attr) == ("io", "open"):
            return f"{owner}.{f.attr}" if _writes(_mode(call, 1), unknown=True) else None
        return f"{owner}.{f.attr}"
    if f.attr == "open":  # Path.open("w"); another object's open(...) takes no mode string
        return ".open" if _writes(_mode(call, 0), unknown=False) else None
    return f".{f.attr}" if f.attr in _WRITE_METHODS else None


def writers(source: str, path: str) -> set[str]:
    """Every file-writing call in ``source``, as ``path::function::call``."""
    found: set[str] = set()

    def visit(node: ast.AST, scope: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, (*scope, child.name))
                continue
            if isinstance(child, ast.Call) and (kind := _kind(child)):
                found.add(f"{path}::{'.'.join(scope) or '<module>'}::{kind}")
            visit(child, scope)

    visit(ast.parse(source), ())
    return found


def package_writers() -> set[str]:
    out: set[str] = set()
    for p in sorted((ROOT / "agentlab").rglob("*.py")):
        out |= writers(p.read_text(encoding="utf-8"), p.relative_to(ROOT).as_posix())
    return out


def test_every_file_writer_in_the_package_is_reviewed():
    found = package_writers()
    new = sorted(found - REVIEWED.keys())
    assert not new, (
        "a new place writes files; make it write through agentlab.redact (or show that no user or model text "
        f"reaches it) and add it to REVIEWED in {Path(__file__).name}: {new}"
    )
    gone = sorted(REVIEWED.keys() - found)
    assert not gone, f"these reviewed writers are gone or renamed; update REVIEWED: {gone}"


def test_a_writer_said_to_redact_is_in_a_module_that_uses_the_redactor():
    for key, (verdict, _) in REVIEWED.items():
        if verdict == REDACTS:
            source = (ROOT / key.split("::")[0]).read_text(encoding="utf-8")
            assert "Redactor" in source or "redact" in source, key


@pytest.mark.parametrize(
    "line",
    [
        "open(p, 'w')",
        "open(p, mode='ab', buffering=0)",
        "open(p, m)",
        "Path(p).write_text(s)",
        "p.write_bytes(b)",
        "p.open('a')",
        "os.open(p, os.O_WRONLY)",
        "os.fdopen(fd, 'wb')",
        "json.dump(x, f)",
        "pq.write_table(t, p)",
        "frame.to_parquet(p)",
        "nbformat.write(nb, p)",
        "shutil.copy(a, b)",
        "fig.savefig(p)",
        "sqlite3.connect(p)",
    ],
)
def test_the_audit_sees_each_way_to_write_a_file(line):
    assert writers(f"def f():\n    {line}\n", "x.py"), line


@pytest.mark.parametrize(
    "line", ["open(p)", "open(p, 'rb')", "p.open()", "os.fdopen(fd)", "json.dumps(x)", "d.copy()", "conn.open()"]
)
def test_the_audit_passes_reads_and_copies_in_memory(line):
    assert not writers(f"def f():\n    {line}\n", "x.py"), line


def test_a_secret_in_an_older_trace_is_not_copied_into_the_exported_notebook(tmp_path):
    """A trace made elsewhere (an older agentlab, another tool) may hold what today's rules remove: the report
    notebook redacts what it copies from it."""
    import agentlab as al
    from agentlab import reply
    from agentlab.report import export_notebook

    from .secrets_corpus import FORMAT_SECRETS

    @al.tool
    def lookup(order: int) -> str:
        """Look an order up."""
        return "order shipped; PLACEHOLDER"

    runs = tmp_path / "runs"
    done = al.run(
        "find order 7",
        [lookup],
        model=al.ScriptedModel([reply(None, ("lookup", {"order": 7})), reply("Shipped.")]),
        trace=runs,
        clock=al.FakeClock(),
    )
    trace = runs / f"{done.run_id}.jsonl"
    trace.write_text(trace.read_text().replace("PLACEHOLDER", f"key {FORMAT_SECRETS[0]}"))  # as if never redacted
    out = export_notebook(done.run_id, tmp_path / "run.ipynb", runs=runs)
    text = out.read_text()
    assert "order shipped; key [redacted]" in text
    assert FORMAT_SECRETS[0] not in text
