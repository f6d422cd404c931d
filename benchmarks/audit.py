"""Requests counted at the API server: its audit log (JSON lines, level ``Metadata``).

The bench cluster's API server writes every request it answers to ``logs/audit.log`` (the
policy is ``benchmarks/audit-policy.yaml``: level ``Metadata``, the ``RequestReceived`` stage
left out). Each subject of a benchmark talks as a service account of its own, so its requests
are told apart by user name. A watch logs ``ResponseStarted`` when it opens and
``ResponseComplete`` when it ends, so the watches open at any moment are known too.

Everything but :meth:`AuditLog.read` is pure (entries in, numbers out).
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["AuditLog", "Entry", "Writes", "open_watches", "parse", "requests_of"]

#: Verbs that write an object's status.
_WRITES = frozenset({"update", "patch"})


def _when(text: str) -> float:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@dataclass(frozen=True)
class Entry:
    """One audit event.

    Attributes:
        audit_id: The request's ID (a watch has two events with the same ID).
        stage: ``ResponseStarted`` (a watch opened) or ``ResponseComplete``.
        verb: ``get``, ``list``, ``watch``, ``create``, ``update``, ``patch``, ``delete``...
        user: The user name (``system:serviceaccount:<ns>:<name>`` for a token).
        agent: The User-Agent header.
        resource: ``objectRef.resource``, with ``/subresource`` when there is one.
        namespace: ``objectRef.namespace``.
        name: ``objectRef.name``.
        received: When the request arrived (epoch seconds).
        stamp: When this stage happened (epoch seconds).
        code: The answer's HTTP status.
    """

    audit_id: str
    stage: str
    verb: str
    user: str
    agent: str
    resource: str
    namespace: str | None
    name: str | None
    received: float
    stamp: float
    code: int | None


def parse(line: str | bytes) -> Entry | None:
    """One line of the log (``None`` for a line that is not an audit event we count)."""
    try:
        raw: Mapping[str, Any] = json.loads(line)
    except ValueError:
        return None
    stage = raw.get("stage")
    if stage not in ("ResponseStarted", "ResponseComplete", "Panic"):
        return None
    ref = raw.get("objectRef") or {}
    resource = str(ref.get("resource") or "")
    if ref.get("subresource"):
        resource += "/" + str(ref["subresource"])
    status = raw.get("responseStatus") or {}
    return Entry(
        audit_id=str(raw.get("auditID", "")),
        stage="ResponseComplete" if stage == "Panic" else str(stage),
        verb=str(raw.get("verb", "")),
        user=str((raw.get("user") or {}).get("username", "")),
        agent=str(raw.get("userAgent", "")),
        resource=resource,
        namespace=ref.get("namespace"),
        name=ref.get("name"),
        received=_when(str(raw["requestReceivedTimestamp"])),
        stamp=_when(str(raw["stageTimestamp"])),
        code=status.get("code"),
    )


class AuditLog:
    """Reads an audit log from where the last read stopped.

    Args:
        path: The log file.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = path.stat().st_size if path.exists() else 0

    def mark(self) -> int:
        """Start the next read at the end of the file as it is now; returns that offset."""
        self.offset = self.path.stat().st_size if self.path.exists() else 0
        return self.offset

    def read(self, keep: Callable[[Entry], bool] = lambda _: True) -> list[Entry]:
        """The complete lines written since the last read (or mark) that ``keep`` keeps."""
        if not self.path.exists():
            return []
        kept: list[Entry] = []
        with self.path.open("rb") as handle:
            handle.seek(self.offset)
            data = handle.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in data[:end].splitlines():
            entry = parse(line)
            if entry is not None and keep(entry):
                kept.append(entry)
        return kept


def requests_of(
    entries: Iterable[Entry], user: str, start: float, end: float
) -> Counter[tuple[str, str]]:
    """Requests of ``user`` that arrived in ``[start, end)``, by (verb, resource); each
    request counted once (a watch by its opening)."""
    seen: set[str] = set()
    counts: Counter[tuple[str, str]] = Counter()
    for entry in entries:
        if entry.user != user or not start <= entry.received < end:
            continue
        if entry.audit_id in seen:
            continue
        seen.add(entry.audit_id)
        counts[(entry.verb, entry.resource)] += 1
    return counts


def open_watches(entries: Iterable[Entry], user: str, at: float) -> Counter[str]:
    """Watches of ``user`` open at time ``at``, by resource (opened by then, not yet ended)."""
    opened: dict[str, Entry] = {}
    ended: set[str] = set()
    for entry in entries:
        if entry.user != user or entry.verb != "watch":
            continue
        if entry.stage == "ResponseStarted" and entry.stamp <= at:
            opened[entry.audit_id] = entry
        elif entry.stage == "ResponseComplete" and entry.stamp <= at:
            ended.add(entry.audit_id)
    return Counter(e.resource for i, e in opened.items() if i not in ended)


class Writes:
    """The status writes of objects, to find the one that decided a run (pure).

    Args:
        entries: Audit entries (only successful ``update``/``patch`` of a ``.../status``
            subresource are kept).
    """

    def __init__(self, entries: Iterable[Entry]) -> None:
        self._by: dict[tuple[str, str | None, str | None], list[Entry]] = {}
        for entry in entries:
            if (
                entry.stage == "ResponseComplete"
                and entry.verb in _WRITES
                and entry.resource.endswith("/status")
                and entry.code is not None
                and 200 <= entry.code < 300
            ):
                key = (entry.resource.split("/", 1)[0], entry.namespace, entry.name)
                self._by.setdefault(key, []).append(entry)
        for found in self._by.values():
            found.sort(key=lambda e: e.received)

    def decisive(self, resource: str, namespace: str, name: str, seen: float) -> float | None:
        """When the write a watcher saw at ``seen`` reached the API server: the last status
        write of the object whose request arrived before ``seen`` (a later one cannot have
        been seen). Its arrival, not its answer: watchers may hear of a write before its
        writer does. ``None`` when there is none."""
        found = self.decisive_entry(resource, namespace, name, seen)
        return found.received if found is not None else None

    def decisive_entry(self, resource: str, namespace: str, name: str, seen: float) -> Entry | None:
        """The audit entry of that write (see :meth:`decisive`)."""
        found = None
        for entry in self._by.get((resource, namespace, name), ()):
            if entry.received > seen:
                break
            found = entry
        return found

    def __len__(self) -> int:
        return sum(len(v) for v in self._by.values())
