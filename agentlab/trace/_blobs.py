"""Large binary payloads in a trace: written once per run, beside its log, and put back when it is read.

An image or a PDF a tool returns (a base64 ``source`` in a content block) would otherwise be written
inline in every event that carries it: the ``tool_results`` that hands it to the model, again for each
call that returns the same file, the messages a resumed or forked run starts from. Instead the writer
stores the decoded bytes once per run, in ``<run_id>.blobs/<sha256>`` beside ``<run_id>.jsonl``
(written atomically, before the line that refers to it), and the event holds
``{"type": "base64", "media_type": ..., "$ref": "sha256:<hex>", "bytes": n}`` in place of ``data``.
The reader resolves every reference back to the same base64 text, so the frames, ``messages_at``,
replay and fork see, and send back to the API, exactly what the run sent.

Only base64 that decodes and re-encodes to the same text is stored this way (anything else stays
inline: nothing is changed on its way to disk). Text, including a plain-text document's, stays in
the line, where the secrets rules apply to it. File names come from :mod:`agentlab.trace.files`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import warnings
from pathlib import Path
from typing import Any

from .files import check_name, inside

BLOB_MIN_CHARS = 4096
"""A base64 payload at least this long (3 KB of bytes) is stored once, by reference."""
REF = "$ref"
PREFIX = "sha256:"
MARKER = b'"base64"'
"""Bytes every line holding a base64 source contains (a cheap test before any walk)."""
REF_MARKER = b'"$ref"'
SUFFIX = ".blobs"


class MissingBlobWarning(UserWarning):
    """A trace refers to a stored payload that is missing or does not match its hash: the reference stays."""


def blob_dir(trace_file: Path) -> Path:
    """The folder of a trace file's stored payloads: ``<run_id>.blobs`` beside ``<run_id>.jsonl``."""
    return inside(trace_file.parent, check_name(trace_file.stem) + SUFFIX)


# ------------------------------------------------------------------ writing
class BlobStore:
    """The payloads one writer has stored, per run, so each is written (and checked on disk) once."""

    def __init__(self, runs: Path) -> None:
        self.runs = runs
        self._stored: dict[str, set[str]] = {}

    def forget(self, run_id: str) -> None:
        """The run's file closed: a resumed run checks the disk again."""
        self._stored.pop(run_id, None)

    def externalize(self, run_id: str, record: dict[str, Any]) -> dict[str, Any]:
        """``record`` with each large base64 payload stored and referred to (a new object where it
        changed; the event itself, shared with the run and other subscribers, is never touched).
        Raises ``OSError`` when a payload cannot be written."""
        out = _walk(record, lambda source: self._store(run_id, source))
        return out if isinstance(out, dict) else record

    def _store(self, run_id: str, source: dict[str, Any]) -> dict[str, Any] | None:
        data = source.get("data")
        if not isinstance(data, str) or len(data) < BLOB_MIN_CHARS:
            return None
        raw = _decode(data)
        if raw is None:
            return None
        digest = hashlib.sha256(raw).hexdigest()
        stored = self._stored.setdefault(run_id, set())
        if digest not in stored:
            folder = inside(self.runs, check_name(run_id) + SUFFIX)
            _write_once(folder, digest, raw)
            stored.add(digest)
        return {**{k: v for k, v in source.items() if k != "data"}, REF: PREFIX + digest, "bytes": len(raw)}


def _decode(data: str) -> bytes | None:
    """The bytes of canonical base64 ``data`` (it re-encodes to the same text), else ``None``."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(data) == 4 * ((len(raw) + 2) // 3) and base64.b64encode(raw).decode("ascii") == data else None


def _write_once(folder: Path, digest: str, raw: bytes) -> None:
    """``raw`` at ``folder/<digest>``, whole or not at all (a temporary file renamed into place)."""
    target = inside(folder, check_name(digest, "blob"))
    if target.is_file() and target.stat().st_size == len(raw):
        return
    folder.mkdir(parents=True, exist_ok=True)
    tmp = inside(folder, f"_{digest}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


# ------------------------------------------------------------------ reading
def resolve(trace_file: Path, events: list[Any]) -> list[Any]:
    """``events`` with every stored reference put back as its base64 text (one string per payload,
    shared by every event that refers to it). A payload missing or changed is warned about once per
    file, and its reference left in place."""
    folder = trace_file.parent / (trace_file.stem + SUFFIX)
    cache: dict[str, str | None] = {}
    missing: list[str] = []

    def load(source: dict[str, Any]) -> dict[str, Any] | None:
        ref = source.get(REF)
        if not isinstance(ref, str) or not ref.startswith(PREFIX):
            return None
        digest = ref[len(PREFIX) :]
        if digest not in cache:
            cache[digest] = _read_blob(folder, digest)
            if cache[digest] is None:
                missing.append(digest)
        data = cache[digest]
        if data is None:
            return None
        return {**{k: v for k, v in source.items() if k not in (REF, "bytes")}, "data": data}

    out = [_walk(e, load, key=REF) for e in events]
    if missing:
        warnings.warn(
            f"{trace_file}: {len(missing)} stored payload(s) missing or changed in {folder} "
            f"(first: {missing[0][:12]}...): those blocks keep their reference instead of their data",
            MissingBlobWarning,
            stacklevel=3,
        )
    return out


def _read_blob(folder: Path, digest: str) -> str | None:
    try:
        raw = inside(folder, check_name(digest, "blob")).read_bytes()
    except (OSError, ValueError):
        return None
    if hashlib.sha256(raw).hexdigest() != digest:
        return None
    return base64.b64encode(raw).decode("ascii")


# ------------------------------------------------------------------ the walk
def _walk(value: Any, change: Any, key: str = "data") -> Any:
    """``value`` with each base64 source dict (one holding ``key``) replaced by ``change(source)``
    when that gives a new dict; containers are copied only along the paths that changed.
    A loop over an explicit stack, not a recursion: content nests (a tool_result in a message)."""
    if not isinstance(value, (dict, list)):
        return value
    order, stack = [], [value]
    while stack:  # every container, parents before their children
        node = stack.pop()
        order.append(node)
        for v in node.values() if isinstance(node, dict) else node:
            if isinstance(v, (dict, list)) and not _is_source(v, key):
                stack.append(v)
    copies: dict[int, Any] = {}
    for node in reversed(order):  # children before their parents
        new: Any = None
        for k, v in node.items() if isinstance(node, dict) else enumerate(node):
            got = change(v) if _is_source(v, key) else copies.get(id(v)) if isinstance(v, (dict, list)) else None
            if got is not None:
                if new is None:
                    new = dict(node) if isinstance(node, dict) else list(node)
                new[k] = got
        if new is not None:
            copies[id(node)] = new
    return copies.get(id(value), value)


def _is_source(v: Any, key: str) -> bool:
    return isinstance(v, dict) and v.get("type") == "base64" and key in v
