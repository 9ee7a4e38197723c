"""Every code block in README.md and docs/ runs as written (executable documentation).

The blocks are found and run by Sybil (a maintained tool for exactly this), one document at a
time in a fresh folder, in order, sharing one namespace per document as a reader following the
page would. Python blocks may ``await`` at the top level, as in a notebook. ``sh`` blocks run
each ``agentlab ...`` line through the real command (``agentlab.cli.main``) and must exit 0
(or the N its comment announces with "exits N").
A block that cannot run here is preceded by ``<!-- skip: next "the reason" -->``: the reason is
required, and printed with the skip.

Blocks that name a Claude model run as written too: ``ANTHROPIC_API_KEY`` and
``ANTHROPIC_BASE_URL`` point the real ``anthropic`` SDK at agentlab's local Messages API server
on 127.0.0.1 (``agentlab.testing.MessagesServer``), which answers every request with a short
final reply. No request leaves the machine (``AGENTLAB_LOCAL_ONLY=1``).
"""

from __future__ import annotations

import ast
import asyncio
import io
import os
import re
import shlex
import sys
import tempfile
import threading
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from unittest import SkipTest

import pytest
from sybil import Example, Sybil
from sybil.parsers.markdown import CodeBlockParser, SkipParser

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKIP = re.compile(r"<!--\s*skip:\s*next(.*?)-->", re.S)


def _loop(example: Example) -> asyncio.AbstractEventLoop:
    """One event loop per document, kept between blocks like a notebook kernel's."""
    ns = example.namespace
    if "__docs_loop__" not in ns:
        ns["__docs_loop__"] = asyncio.new_event_loop()
    return ns["__docs_loop__"]


async def _drain(tasks: set[asyncio.Task]) -> None:
    await asyncio.gather(*tasks, return_exceptions=True)


def run_python(example: Example) -> None:
    code = compile(example.parsed, f"{example.path}:{example.line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, example.namespace)  # noqa: S307 - the documentation's own code
    if asyncio.iscoroutine(result):
        _loop(example).run_until_complete(result)
    forgotten = [name for name, value in example.namespace.items() if asyncio.iscoroutine(value)]
    for name in forgotten:
        example.namespace[name].close()
    assert not forgotten, f"{example.path}:{example.line}: {forgotten} hold coroutines never awaited (missing `await`?)"


def run_shell(example: Example) -> None:
    """Each ``agentlab ...`` line through the real CLI; anything else is not ours to run."""
    from agentlab.cli import main

    for line in example.parsed.splitlines():
        command, _, comment = (part.strip() for part in line.partition("  #"))
        expected = int(m.group(1)) if (m := re.search(r"\bexits (\d+)", comment)) else 0
        if not command or command.startswith("#"):
            continue
        argv = [os.path.expanduser(a) for a in shlex.split(command)]
        if argv[0] != "agentlab":
            raise AssertionError(
                f"{example.path}:{example.line}: cannot run {command!r} here: mark the block "
                '<!-- skip: next "why" --> or write it with agentlab commands only'
            )
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = main(argv[1:], out=out, err=err)
            except SystemExit as exit_:  # argparse's own exits: --help, --version, a bad flag
                code = exit_.code if isinstance(exit_.code, int) else 2
        assert code == expected, f"{command!r} exited {code}, not {expected}:\n{err.getvalue()}{out.getvalue()}"


def setup(namespace: dict) -> None:
    """What every document starts with: the repository root (for invisible set-up blocks that
    stand for the reader's own files) and nothing else, so each page must import what it uses."""
    namespace["DOCS_ROOT"] = ROOT


def save_toml(example: Example) -> None:
    """A TOML block whose first line names its file (``# exp.toml``) is saved there for the blocks
    after it to use, after checking it parses; the ``sh`` block that follows runs it."""
    import tomllib

    text = example.parsed
    tomllib.loads(text)
    first = text.splitlines()[0]
    if first.startswith("# ") and first.endswith(".toml"):
        Path(first[2:].strip()).write_text(text, encoding="utf-8")


SYBIL = Sybil(
    parsers=[
        CodeBlockParser("python", run_python),
        CodeBlockParser("sh", run_shell),
        CodeBlockParser("toml", save_toml),
        SkipParser(),
    ]
)


def local_answer(body: dict) -> dict:
    """What the local server says to any request: a final answer, so every run ends ``done``."""
    from agentlab import reply

    return reply("(an answer from the local test server)")


@pytest.fixture
def local_claude(monkeypatch):
    from agentlab.testing import MessagesServer

    with MessagesServer([local_answer] * 500) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-docs-local-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        yield server


@pytest.fixture
def local_collector(monkeypatch):
    """An OTLP/HTTP endpoint on 127.0.0.1 that keeps what it is sent, for the OpenTelemetry recipe."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    received: list[tuple[str, int]] = []

    class Collector(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            received.append((self.path, len(self.rfile.read(int(self.headers.get("content-length", 0))))))
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    yield received
    try:
        from opentelemetry import trace

        provider = trace.get_tracer_provider()
        if hasattr(provider, "shutdown"):  # a page set the global provider: stop it before its endpoint goes
            provider.shutdown()
    except ImportError:
        pass
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_code_block_runs_as_written(document, tmp_path, monkeypatch, local_claude, local_collector):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # a page's own modules (mytools.py) import as they would for a reader
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # `python` = this one
    parsed = SYBIL.parse(document)
    setup(parsed.namespace)
    for name, module in list(sys.modules.items()):  # a module another test made in a temporary folder
        file = str(getattr(module, "__file__", "") or "")
        if (
            file.startswith(tempfile.gettempdir())
            and not file.startswith(str(ROOT))
            and not file.startswith(sys.prefix)
        ):
            del sys.modules[name]
    before = set(sys.modules)
    ran, skipped = 0, []
    try:
        for example in parsed.examples():
            try:
                example.evaluate()
            except SkipTest as why:
                skipped.append(f"line {example.line}: {why}")
                continue
            ran += example.region.evaluator in (run_python, run_shell, save_toml)
    finally:
        loop = parsed.namespace.get("__docs_loop__")
        if loop is not None:  # as asyncio.run ends: cancel what is left, then close
            left = asyncio.all_tasks(loop)
            for task in left:
                task.cancel()
            if left:
                loop.run_until_complete(_drain(left))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
        for name in set(sys.modules) - before:  # mytools.py of one page is not the next page's
            if str(getattr(sys.modules[name], "__file__", "") or "").startswith(str(tmp_path)):
                del sys.modules[name]
    print(f"{document.name}: {ran} examples ran; skipped: {skipped}")
    text = document.read_text(encoding="utf-8")
    blocks = len(re.findall(r"^```(?:python|sh|toml)\s*$", text, flags=re.M)) + text.count("<!-- invisible-code-block:")
    assert ran + len(skipped) == blocks, f"{document.name}: {blocks} runnable blocks, {ran} ran, {len(skipped)} skipped"
    if "OTLPSpanExporter()" in document.read_text(encoding="utf-8"):  # the recipe really sent spans
        assert any(path == "/v1/traces" and size > 0 for path, size in local_collector), local_collector


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_block_that_does_not_run_says_why(document):
    for directive in SKIP.findall(document.read_text(encoding="utf-8")):
        assert re.fullmatch(r'\s*"[^"]{10,}"\s*', directive), f"{document.name}: skip without a reason: {directive!r}"


def test_every_fenced_block_is_one_the_runner_knows():
    """A ```python, ```sh or ```toml/```text block: an unlabelled or other fence would be silently untested."""
    for document in DOCUMENTS:
        for label in re.findall(r"^```(\S*)\s*$", document.read_text(encoding="utf-8"), flags=re.M)[::2]:
            assert label in ("python", "sh", "toml", "text"), f"{document.name}: fence ```{label}"
