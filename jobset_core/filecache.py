"""Small JSON files a later process reads instead of doing the same work again.

One folder, ``$XDG_CACHE_HOME/jobset-core`` (else ``~/.cache/jobset-core``), holds what a
short-lived process would otherwise recompute each time it starts: the batch/v1 schema tables
of the installed Kubernetes client (read by every ``jobsetctl validate``) and what a
``JobSetOperator`` reads from its JobSet at DAG parse (a DAG processor parses each file in a
fresh process, every 30 s by default).

An entry is named by its caller, who puts in the name everything the value depends on (a
version, a digest of the input). Writes are atomic (a reader sees the old file or the whole new
one, never half of it); a file that cannot be read or written is a miss, never an error: a
read-only home costs time, nothing else. A folder of entries keyed by input (``bounded=``) is
kept to a number of files, the least recently written going first.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["folder", "read", "write"]


def folder() -> Path:
    """The cache folder (it may not exist yet)."""
    return Path(_root())


def _root() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jobset-core")


def read(name: str) -> Any | None:
    """The value of entry ``name`` (a path under :func:`folder`), or ``None`` when there is
    none, or it cannot be read or decoded."""
    try:  # os.path and open, not pathlib: a DAG parse reads an entry per task
        with open(os.path.join(_root(), name), encoding="utf-8") as entry:
            return json.loads(entry.read())
    except (OSError, ValueError):
        return None


def write(name: str, value: Any, *, bounded: int | None = None) -> None:
    """Store ``value`` (JSON) as entry ``name``, atomically; silently not, when the folder
    cannot be written. With ``bounded``, the entry's own folder keeps at most that many
    files: the oldest go when it holds more."""
    path = folder() / name
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        scratch.write_text(json.dumps(value, sort_keys=True), encoding="utf-8")
        scratch.replace(path)
        if bounded is not None:
            _bound(path.parent, bounded)
    except OSError:
        pass


def _bound(where: Path, limit: int) -> None:
    """Remove the oldest files of ``where`` beyond ``limit`` (down to half of it, so that
    the folder is not listed again at every write)."""
    entries = list(os.scandir(where))
    if len(entries) <= limit:
        return
    entries.sort(key=lambda entry: entry.stat().st_mtime)
    for entry in entries[: len(entries) - limit // 2]:
        with contextlib.suppress(OSError):
            os.unlink(entry.path)
