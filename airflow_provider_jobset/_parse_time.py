"""What a ``JobSetOperator`` reads from its JobSet when a DAG file is parsed: the restarts
its failure policy allows, which become the task's ``retries``.

A DAG processor parses every DAG file in a fresh process, every 30 s by default, so reading a
YAML text there (1.5-2 ms for a small JobSet, most of the operator's construction) would be
paid again at every parse. The answer is kept by content in the core's file cache
(:mod:`jobset_core.filecache`): the next parse of the same text reads a 20-byte file instead.
A text that cannot be read here (a template, a file path, bad input) gives no bound, as before:
it is read, and refused with every problem, when the task runs.
"""

from __future__ import annotations

import hashlib
from typing import Any

from airflow_provider_jobset import _decisions
from jobset_core import __version__, filecache
from jobset_core.errors import SpecError
from jobset_core.models import JobSet, load_jobset

__all__ = ["ENTRIES", "restarts_at_parse"]

#: Texts whose answer the cache keeps (the oldest go first beyond that).
ENTRIES = 1024
#: Bumped when what is cached changes meaning.
_FORMAT = 1


def restarts_at_parse(source: Any) -> int | None:
    """``failurePolicy.maxRestarts`` of ``source`` when it can be read at DAG-parse time
    (a :class:`JobSet`, a YAML or JSON text without a template, Python data), else ``None``
    (unbounded or unknown: a template, a file path, input that does not load)."""
    if isinstance(source, JobSet):
        return _decisions.max_restarts(source)
    if isinstance(source, str):
        if "{{" in source or "{%" in source or "\n" not in source:
            return None
        digest = hashlib.sha256(f"{__version__}\0{_FORMAT}\0{source}".encode()).hexdigest()
        name = f"parse-time/{digest[:32]}.json"
        known = filecache.read(name)
        if isinstance(known, dict) and "restarts" in known:
            restarts = known["restarts"]
            if restarts is None or isinstance(restarts, int):
                return restarts
        restarts = _read(source)
        filecache.write(name, {"restarts": restarts}, bounded=ENTRIES)
        return restarts
    return _read(source)


def _read(source: Any) -> int | None:
    try:
        return _decisions.max_restarts(load_jobset(source))
    except (SpecError, OSError, ValueError):
        return None
