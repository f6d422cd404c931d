"""Watch bookkeeping, apart from the loop that reads the stream.

A watch answer is a stream of JSON lines ``{"type": ..., "object": ...}``. :class:`WatchState`
turns them into typed :class:`WatchEvent` values and remembers the last ``resourceVersion``
seen (from objects *and* bookmarks) so the caller can reconnect where it stopped. An ``ERROR``
event becomes our error; a 410 one (the resourceVersion is older than the server keeps) also
marks the state :attr:`~WatchState.expired`: the caller must list again and watch from the
list's resourceVersion. Everything here is pure; the shells only feed it bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, TypeVar

from jobset_core.client._core import error_from_response, truncate
from jobset_core.errors import ApiError, Gone, JobSetError, ServerError, Unreachable

__all__ = ["EventType", "LineBuffer", "WatchEvent", "WatchState"]

T = TypeVar("T")


class EventType(str, Enum):
    """Type of a watch event. ``ERROR`` never appears: it is turned into an error."""

    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    BOOKMARK = "BOOKMARK"


@dataclass(frozen=True)
class WatchEvent(Generic[T]):
    """One change seen by a watch.

    Attributes:
        type: What happened. A ``BOOKMARK`` carries only ``metadata.resourceVersion`` (its
            object has no spec or status worth reading): skip it, but keep its version.
        object: The object after the change (the last state before deletion for ``DELETED``).
        resource_version: The object's ``resourceVersion``: pass it to the next watch to resume.
    """

    type: EventType
    object: T
    resource_version: str


class LineBuffer:
    """Split a byte stream into lines whatever the chunk boundaries are.

    Args:
        max_line: Keep at most this many bytes of a line (``None``: all). The rest, up to its
            newline, is counted and dropped as it comes, so a writer without newlines never
            grows the buffer past the limit; the line is yielded with
            ``...[N more bytes cut]`` appended.
    """

    __slots__ = ("_dropped", "_max", "_pending")

    def __init__(self, max_line: int | None = None) -> None:
        self._pending = bytearray()
        self._max = max_line
        self._dropped = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        """Add a chunk; return the lines it completed (without their newline)."""
        lines: list[bytes] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._keep(chunk[start:end])
            lines.append(self._line())
            start = end + 1
        self._keep(chunk[start:])
        return lines

    def flush(self) -> bytes | None:
        """The unterminated last line when the stream ended, if any."""
        rest = self._line()
        return rest if rest.strip() else None

    def _keep(self, piece: bytes) -> None:
        room = len(piece) if self._max is None else max(0, self._max - len(self._pending))
        self._pending += piece[:room]
        self._dropped += len(piece) - min(room, len(piece))

    def _line(self) -> bytes:
        line = bytes(self._pending)
        if self._dropped:
            line += b"...[%d more bytes cut]" % self._dropped
        self._pending, self._dropped = bytearray(), 0
        return line


class WatchState(Generic[T]):
    """Consumes raw watch events, tracks the resourceVersion, yields typed events.

    Args:
        decode: Turns an event's object (a mapping) into ``T``.
        resource_version: Where the watch starts (the list's resourceVersion), if known.
    """

    __slots__ = ("_decode", "_lines", "expired", "resource_version")

    def __init__(
        self, decode: Callable[[dict[str, Any]], T], resource_version: str | None = None
    ) -> None:
        self._decode = decode
        self._lines = LineBuffer()
        self.resource_version: str | None = resource_version or None
        self.expired = False

    def consume(self, raw: Any) -> WatchEvent[T] | JobSetError | None:
        """Judge one decoded event.

        Returns:
            The typed event; the error an ``ERROR`` event stands for (a :class:`Gone` also sets
            :attr:`expired` and forgets the resourceVersion); ``None`` for unknown event types.
        """
        if not isinstance(raw, Mapping) or not isinstance(raw.get("object"), Mapping):
            return ServerError(200, "MalformedWatchEvent", truncate(repr(raw)))
        kind, obj = raw.get("type"), dict(raw["object"])
        if kind == "ERROR":
            return self._error(obj)
        try:
            event_type = EventType(kind)
        except ValueError:
            return None
        metadata = obj.get("metadata")
        version = (
            str(metadata.get("resourceVersion") or "") if isinstance(metadata, Mapping) else ""
        )
        if version:
            self.resource_version = version
        return WatchEvent(type=event_type, object=self._decode(obj), resource_version=version)

    def consume_line(self, line: bytes) -> WatchEvent[T] | JobSetError | None:
        """Judge one line of the stream (blank lines are keep-alives)."""
        if not line.strip():
            return None
        try:
            raw = json.loads(line)
        except ValueError:
            # A line that is not JSON means the answer was cut off mid-event.
            return Unreachable(
                f"watch stream broken mid-event: {truncate(line.decode('utf-8', 'replace'))}"
            )
        return self.consume(raw)

    def feed(self, chunk: bytes) -> Iterator[WatchEvent[T]]:
        """Yield the events a chunk of the stream completes; raise the error of an ``ERROR``."""
        for line in self._lines.feed(chunk):
            yield from self._emit(self.consume_line(line))

    def close(self) -> Iterator[WatchEvent[T]]:
        """Yield the event of an unterminated last line when the stream ended."""
        line = self._lines.flush()
        if line is not None:
            yield from self._emit(self.consume_line(line))

    @staticmethod
    def _emit(step: WatchEvent[T] | JobSetError | None) -> Iterator[WatchEvent[T]]:
        if isinstance(step, JobSetError):
            raise step
        if step is not None:
            yield step

    def _error(self, status: dict[str, Any]) -> ApiError:
        code = status.get("code")
        error = error_from_response(
            code if isinstance(code, int) else 500, None, json.dumps(status)
        )
        if isinstance(error, Gone):
            self.expired = True
            self.resource_version = None
        return error
