"""Where traces live: the runs folder, finding one run's file in it, and the rule for every file the lab writes.

Paths come from us, never from content: a run id or an
experiment name is checked against one rule (:data:`NAME_RULE`) before a
run starts, an id read from a recorded file is made into one by
:func:`name_from`, and every file the lab writes is placed by
:func:`inside`, which refuses anything that resolves outside its folder
(``..``, an absolute path, a symlink pointing out).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import stat
from pathlib import Path

from ..errors import AgentlabError

RUNS_ENV = "AGENTLAB_RUNS"
SUFFIX = ".jsonl"

NAME_RULE = (
    "1 to 128 characters of letters, digits, '.', '_' and '-', starting with a letter, a digit or '_' "
    "(so it names one file in its folder: no '/', no '..', no hidden file)"
)
"""What a run id and an experiment name may be, said in the error that refuses one."""
_POSIX = os.name == "posix"
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")
_NOT_NAME = re.compile(r"[^A-Za-z0-9._-]+")


class UnsafePath(AgentlabError, ValueError):
    """A name or path that would place a file outside its folder, or that breaks :data:`NAME_RULE`."""


def check_name(name: object, what: str = "run_id") -> str:
    """``name`` if it follows :data:`NAME_RULE`, else :class:`UnsafePath` naming ``what`` and the rule."""
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise UnsafePath(f"{what} {name!r} is not allowed: it must be {NAME_RULE}")
    return name


def name_from(text: str) -> str:
    """A name that follows :data:`NAME_RULE`, made from foreign text (an id read from a recorded file).

    A name that already follows the rule is kept as it is; any other gets its
    disallowed characters replaced and a short hash of the original, so two
    different ids never share a file.
    """
    if _NAME.fullmatch(text):
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    stem = _NOT_NAME.sub("-", text).lstrip(".-")[:100]
    return f"{stem}-{digest}" if stem else f"run-{digest}"


def inside(folder: str | os.PathLike[str], name: str) -> Path:
    """``folder / name``, refused (:class:`UnsafePath`) unless it resolves inside ``folder``.

    The one function every file the lab writes goes through: links are
    followed before the check, so a symlink planted in the folder cannot
    send a write elsewhere.
    """
    if not isinstance(name, str) or not name or "\x00" in name:
        raise UnsafePath(f"{name!r} cannot name a file")
    base = Path(folder)
    target = base / name
    if _POSIX and "/" not in name and name not in (".", ".."):
        # One plain name in the folder (every trace file): inside it unless it is a link, whatever the
        # folder's own path resolves to.
        try:
            if not stat.S_ISLNK(os.lstat(target).st_mode):
                return target
        except FileNotFoundError:
            return target
        except OSError:
            pass  # the checks below say what is wrong
    root = base.resolve()
    if Path(name).is_absolute() or not target.resolve().is_relative_to(root) or target.resolve() == root:
        raise UnsafePath(f"{name!r} would be written outside {str(base)!r}: files are written only inside their folder")
    return target


def within(folder: str | os.PathLike[str], path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` (links followed) is inside ``folder``: what a folder walk may read."""
    return Path(path).resolve().is_relative_to(Path(folder).resolve())


_written: dict[str, tuple[str, Path]] = {}
"""Run id -> the working directory and the folder this process wrote it to, so ``result.trace``
finds a run written with ``trace="some/folder"`` (or before a ``chdir``)."""


def remember(run_id: str, folder: Path) -> None:
    """Note where this process writes ``run_id`` (the writer calls this), with the working directory, so a
    later ``chdir`` does not lose it (joined when asked, not resolved: ``..`` is left for the OS to follow, as
    it did when the file was written; one ``getcwd`` a run, the path built only for a run looked up)."""
    _written[run_id] = (os.getcwd(), folder)


def written_to(run_id: str) -> Path | None:
    """The absolute folder this process wrote ``run_id`` to (see :func:`remember`), or None."""
    known = _written.get(run_id)
    return None if known is None else Path(known[0]) / known[1]


_folder = functools.lru_cache(maxsize=64)(Path)  # a Path per folder named (immutable: the same one serves every run)


def runs_dir(path: str | os.PathLike[str] | None = None) -> Path:
    """The runs folder: ``path``, else ``$AGENTLAB_RUNS``, else ``./runs``."""
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a folder path (str or Path) or None, got {type(path).__name__}")
    name = path or os.environ.get(RUNS_ENV) or "runs"
    if type(name) is not str:
        return Path(name)
    return _folder(name)


def trace_files(path: str | os.PathLike[str] | None) -> list[Path]:
    p = runs_dir(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise FileNotFoundError(
            f"no runs folder at {str(p)!r}: pass path= (a folder or a .jsonl file) or set ${RUNS_ENV}"
        )
    return sorted(p.glob(f"*{SUFFIX}"), key=lambda f: f.name)  # one folder: by name is Path order


def find_run_file(run_id: str, path: str | os.PathLike[str] | None) -> Path:
    if not isinstance(run_id, str) or not run_id.strip():
        raise ValueError(f"run_id must be a non-empty string, got {run_id!r}")
    if run_id.endswith(SUFFIX) and Path(run_id).is_file():
        return Path(run_id)
    if "/" in run_id or "\\" in run_id:
        raise ValueError(f"run_id must be a run id (or a path to a {SUFFIX} file), got {run_id!r}")
    folders = [runs_dir(path)]
    first = written_to(run_id) if path is None else None
    if first is not None:
        folders.insert(0, first)
    for folder in folders:
        file = folder / f"{run_id}{SUFFIX}"
        if file.is_file():
            return file
    folder = folders[-1]
    matches = sorted(folder.glob(f"{run_id}*{SUFFIX}")) if folder.is_dir() else []
    if len(matches) == 1:  # a unique prefix, like a short git hash
        return matches[0]
    known = [m.stem for m in matches] or (
        [f.stem for f in sorted(folder.glob(f"*{SUFFIX}"))][-5:] if folder.is_dir() else []
    )
    hint = f"; runs there include: {', '.join(known)}" if known else ("" if folder.is_dir() else " (no such folder)")
    if len(matches) > 1:
        raise ValueError(f"run_id {run_id!r} matches {len(matches)} runs in {str(folder)!r}{hint}")
    raise FileNotFoundError(
        f"no trace for run {run_id!r} in {str(folder)!r}{hint} (a run made with trace=False writes none; "
        f"pass path= or set ${RUNS_ENV} if it went elsewhere)"
    )
