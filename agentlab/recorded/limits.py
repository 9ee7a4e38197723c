"""What an import may inflate or hold: a hostile file is refused with a clear error, never a crash.

A 38 KiB zip can inflate to gigabytes, a line can be a gigabyte long, a JSON
value can nest a hundred thousand deep. Each limit below is far above what an
agent writes (the largest real sessions seen hold lines of a few MiB) and far
below what takes a machine down; beyond it the file is refused with
:class:`ImportLimit`, naming the file and the limit (a folder import skips it
and goes on).
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from ..errors import AgentlabError

MAX_LINE_BYTES = 64 << 20
"""One JSONL record (a line) may be up to 64 MiB."""
MAX_DOCUMENT_BYTES = 512 << 20
"""A whole-document JSON file (a trajectory, a chat session) may be up to 512 MiB."""
MAX_MEMBER_BYTES = 256 << 20
"""One member of a zip log (an inspect sample), once inflated, may be up to 256 MiB."""
MAX_DEPTH = 1024
"""JSON nesting deeper than this is refused (orjson's own limit)."""


class ImportLimit(AgentlabError, ValueError):
    """A recorded file past one of the import's limits (its size, a line, an inflated member, its nesting)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.why = message.split(": ", 1)[-1]


def _mib(n: int) -> str:
    return f"{n >> 20} MiB"


def lines(file: Path) -> Iterator[tuple[int, bytes]]:
    """``(line number, line)`` for each line of ``file``, holding at most :data:`MAX_LINE_BYTES` of one."""
    with open(file, "rb") as f:
        if f.seek(0, 2) <= MAX_LINE_BYTES:  # no line can pass the limit: read it whole (the usual file)
            f.seek(0)
            yield from enumerate(f.read().splitlines(), 1)
            return
        f.seek(0)
        yield from bounded_lines(f, file)


def bounded_lines(f: IO[bytes], file: Path) -> Iterator[tuple[int, bytes]]:
    """``(line number, line)`` read from ``f`` one at a time, each at most :data:`MAX_LINE_BYTES`."""
    n = 0
    while True:
        line = f.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        n += 1
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            raise ImportLimit(f"{file}: line {n} is longer than {_mib(MAX_LINE_BYTES)} (the limit for one record)")
        yield n, line.rstrip(b"\r\n")


def loads(data: bytes, file: Path, where: str) -> Any:
    """``orjson.loads(data)``; nesting past :data:`MAX_DEPTH` raises :class:`ImportLimit` naming ``where``."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        too_deep(exc, file, where)
        raise


def too_deep(exc: orjson.JSONDecodeError, file: Path, where: str) -> None:
    """Raise :class:`ImportLimit` when ``exc`` is orjson refusing nesting past :data:`MAX_DEPTH` (a hostile
    value, not a file cut short)."""
    if "depth" in str(exc) or "recursion" in str(exc):
        raise ImportLimit(f"{file}: {where} nests deeper than {MAX_DEPTH} levels (the limit)") from None


def document(file: Path) -> bytes:
    """The bytes of a whole-document file, refused past :data:`MAX_DOCUMENT_BYTES`."""
    size = file.stat().st_size
    if size > MAX_DOCUMENT_BYTES:
        raise ImportLimit(
            f"{file}: {size >> 20} MiB is larger than {_mib(MAX_DOCUMENT_BYTES)} (the limit for a document)"
        )
    return file.read_bytes()


def inflate(z: zipfile.ZipFile, info: zipfile.ZipInfo, raw_zstd: bytes | None = None) -> bytes:
    """A zip member's bytes, inflating at most :data:`MAX_MEMBER_BYTES` whatever its header claims.

    ``raw_zstd`` is a zstd-compressed member's raw bytes (Python's ``zipfile`` reads zstd only from 3.14)."""
    if info.file_size > MAX_MEMBER_BYTES:
        raise _too_big(z, info)
    if raw_zstd is not None:
        import zstandard

        reader: IO[bytes] = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw_zstd))
    else:
        reader = z.open(info)
    with reader:
        data = reader.read(MAX_MEMBER_BYTES + 1)
    if len(data) > MAX_MEMBER_BYTES:
        raise _too_big(z, info)
    return data


def _too_big(z: zipfile.ZipFile, info: zipfile.ZipInfo) -> ImportLimit:
    return ImportLimit(
        f"{z.filename}: member {info.filename} inflates past {_mib(MAX_MEMBER_BYTES)} (the limit for one member)"
    )
