"""A Jupyter front-end (JupyterLab or Notebook 7) on a free 127.0.0.1 port, for the browser tests.

One place starts it, waits for it and stops it; each test brings its own notebook.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WAIT_MS = int(os.environ.get("AGENTLAB_BROWSER_WAIT_MS", "90000"))
"""How long a browser test waits for the page before it fails (a loaded CI machine is slow, never stuck)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def quiet_settings(settings: Path, config: Path) -> None:
    """No news or update pop-ups over the panel, and no network calls for them."""
    notif = settings / "@jupyterlab" / "apputils-extension"
    notif.mkdir(parents=True)
    (notif / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    config.mkdir(parents=True)
    (config / "jupyter_server_config.json").write_text(json.dumps({"LabApp": {"news_url": None}}))


def wait_ready(proc: subprocess.Popen, port: int, token: str, timeout: float = 120) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=5) as r:
                if r.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.2)  # polling a server that is starting; not a synchronisation of the test itself
    return False


@contextlib.contextmanager
def jupyter_server(
    app: str, root: Path, tmp_path: Path, extra_env: dict[str, str] | None = None
) -> Iterator[tuple[int, str]]:
    """Start ``python -m app`` (``jupyterlab`` or ``notebook``) serving ``root``; yield (port, token)."""
    quiet_settings(tmp_path / "settings", tmp_path / "config")
    token = secrets.token_hex(16)
    env = {
        **os.environ,
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
        "PYTHONPATH": str(REPO),
        **(extra_env or {}),
    }
    log = open(tmp_path / f"{app}.log", "w")  # noqa: SIM115 - closed below
    for _attempt in range(3):  # a free port can be taken between our check and the server's bind
        port = free_port()
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                app,
                "--no-browser",
                "--allow-root",
                f"--ServerApp.port={port}",
                "--ServerApp.ip=127.0.0.1",
                "--ServerApp.port_retries=0",
                f"--IdentityProvider.token={token}",
                f"--ServerApp.root_dir={root}",
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=root,
        )
        if wait_ready(proc, port, token):
            break
        proc.terminate()
        proc.wait(timeout=30)
    else:
        log.close()
        pytest.fail(f"{app} did not start: " + (tmp_path / f"{app}.log").read_text()[-3000:])
    try:
        yield port, token
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
        log.close()


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
"""Debian's Chromium, headless, with no background calls to a network this machine does not have."""


def launch_chromium(p) -> object:
    """Debian's Chromium through Playwright (never a browser Playwright downloads)."""
    return p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
