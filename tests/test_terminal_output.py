"""Nothing a model or a tool says can drive the terminal of `agentlab run` / `agentlab report` (issue 24).

The commands run as real processes on a pseudo-terminal; every byte that
reaches the terminal is read back. OSC 52 (write the clipboard), OSC 0 (the
window's title), CSI cursor and erase controls, a carriage return that
rewrites a line and the 8-bit CSI must arrive shown (``\\x1b``...), never as
the control itself.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

import agentlab as al
from agentlab import reply
from agentlab.testing import MessagesServer

REPO = Path(__file__).resolve().parents[1]
HOSTILE = (
    "\x1b]52;c;cm0gLXJmIH4=\x07 \x1b]0;pwned\x07 \x1b[2J\x1b[H\x1b[31m red \rover \x9b1;1H \x1bP+q\x1b\\ \u202eevil"
)
CONTROLS = [b"\x1b", b"\x07", b"\r\x20", "\x9b".encode(), b"\xc2\x9b", "\u202e".encode()]


def on_a_terminal(args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, bytes]:
    """Run ``python -m agentlab.cli ARGS`` with stdout and stderr on a pty; return (status, every byte written)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentlab.cli", *args],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
        cwd=cwd,
    )
    os.close(slave)
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    status = proc.wait(timeout=120)
    reader.join(30)
    os.close(master)
    return status, b"".join(chunks).replace(b"\r\n", b"\n")  # the pty's own newline translation


def assert_inert(shown: bytes) -> None:
    for control in CONTROLS:
        assert control not in shown, (control, shown[-2000:])
    text = shown.decode()
    assert "\\x1b]52;c;cm0gLXJmIH4=\\x07" in text and "\\x1b]0;pwned" in text  # shown, for the reader to see


def test_agentlab_run_shows_the_models_control_sequences_without_sending_them(tmp_path):
    with MessagesServer(
        [reply(f"Looking it up. {HOSTILE}", ("get_order", {"order_id": 1042})), reply(f"Order 1042 is late. {HOSTILE}")]
    ) as server:
        status, shown = on_a_terminal(
            ["run", f"Why was order 1042 late? {HOSTILE}", "--runs", str(tmp_path / "runs")],
            {"ANTHROPIC_API_KEY": "sk-ant-test-terminal", "ANTHROPIC_BASE_URL": server.url},
            tmp_path,
        )
    assert status == 0, shown.decode(errors="replace")
    assert b"done: done" in shown
    assert_inert(shown)


def test_agentlab_report_shows_a_tools_control_sequences_without_sending_them(tmp_path):
    @al.tool
    def lookup(order_id: int) -> str:
        """Look an order up."""
        return f"order {order_id}: {HOSTILE} and half an emoji \ud83d"

    @al.tool
    def broken() -> str:
        """Fails."""
        raise al.ToolError(f"no such thing {HOSTILE}")

    model = al.ScriptedModel(
        [reply(HOSTILE, ("lookup", {"order_id": 7}), ("broken", {})), reply(f"Shipped. {HOSTILE}")]
    )
    done = al.run(f"where is 7? {HOSTILE}", [lookup, broken], model=model, trace=tmp_path / "runs", system=HOSTILE)
    assert isinstance(done, al.Done)
    status, shown = on_a_terminal(["report", done.run_id, "--runs", str(tmp_path / "runs")], {}, tmp_path)
    assert status == 0, shown.decode(errors="replace")
    assert b"Step 2 of run" in shown
    assert_inert(shown)
    assert "half an emoji \ufffd" in shown.decode()  # a lone surrogate is shown, not a crash
