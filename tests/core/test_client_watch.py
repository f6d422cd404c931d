"""Watch bookkeeping: typed events, resourceVersion tracking, bookmarks, ERROR and 410."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobset_core.client import EventType, WatchEvent, WatchState
from jobset_core.client._core import as_object, decode_jobset
from jobset_core.client._watch import LineBuffer
from jobset_core.errors import ApiError, Gone, ServerError, TooManyRequests, Unreachable
from jobset_core.models import JobSet


def obj(name: str, rv: str, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "resourceVersion": rv},
        **extra,
    }


def event(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": body}


def line(kind: str, body: dict[str, Any]) -> bytes:
    return json.dumps(event(kind, body)).encode() + b"\n"


GONE = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "too old resource version: 5 (90)",
    "reason": "Expired",
    "code": 410,
}


@pytest.mark.parametrize("kind", ["ADDED", "MODIFIED", "DELETED"])
def test_object_events_are_typed_and_advance_the_resource_version(kind: str) -> None:
    state = WatchState(decode_jobset, "10")
    step = state.consume(event(kind, obj("a", "11", spec={"suspend": True})))
    assert isinstance(step, WatchEvent)
    assert step.type is EventType(kind)
    assert isinstance(step.object, JobSet)
    assert (step.object.name, step.object.spec.suspend, step.resource_version) == ("a", True, "11")
    assert (state.resource_version, state.expired) == ("11", False)


def test_bookmarks_advance_the_resource_version_and_are_marked() -> None:
    state = WatchState(as_object, "10")
    bookmark = {
        "kind": "JobSet",
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "metadata": {"resourceVersion": "50"},
    }
    step = state.consume(event("BOOKMARK", bookmark))
    assert isinstance(step, WatchEvent)
    assert (step.type, step.resource_version) == (EventType.BOOKMARK, "50")
    assert state.resource_version == "50"


def test_a_bookmark_decodes_as_a_jobset_too() -> None:
    state = WatchState(decode_jobset)
    step = state.consume(event("BOOKMARK", obj("", "7")))
    assert isinstance(step, WatchEvent)
    assert step.object.metadata.resource_version == "7"


def test_410_error_event_is_gone_and_asks_for_a_relist() -> None:
    state = WatchState(as_object, "5")
    step = state.consume(event("ERROR", GONE))
    assert isinstance(step, Gone)
    assert (step.status, step.reason, step.message) == (
        410,
        "Expired",
        "too old resource version: 5 (90)",
    )
    assert state.expired
    assert state.resource_version is None


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        pytest.param(
            {**GONE, "code": 500, "reason": "InternalError", "message": "boom"},
            ServerError,
            id="500",
        ),
        pytest.param(
            {**GONE, "code": 429, "reason": "TooManyRequests", "message": "slow"},
            TooManyRequests,
            id="429",
        ),
        pytest.param(
            {"kind": "Status", "message": "no code"}, ServerError, id="no-code-is-a-server-error"
        ),
    ],
)
def test_other_error_events_keep_the_resource_version(
    status: dict[str, Any], cls: type[ApiError]
) -> None:
    state = WatchState(as_object, "5")
    step = state.consume(event("ERROR", status))
    assert type(step) is cls
    assert (state.resource_version, state.expired) == ("5", False)


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(["not", "a", "mapping"], id="list"),
        pytest.param({"type": "ADDED"}, id="no-object"),
        pytest.param({"type": "ADDED", "object": "text"}, id="object-not-a-mapping"),
    ],
)
def test_malformed_events_are_server_errors(raw: Any) -> None:
    assert isinstance(WatchState(as_object).consume(raw), ServerError)


def test_unknown_event_types_are_skipped() -> None:
    state = WatchState(as_object, "5")
    assert state.consume(event("SOMETHING_NEW", obj("a", "6"))) is None
    assert state.resource_version == "5"


def test_an_object_without_resource_version_keeps_the_last_one() -> None:
    state = WatchState(as_object, "5")
    step = state.consume(event("ADDED", {"metadata": {"name": "a"}}))
    assert isinstance(step, WatchEvent)
    assert (step.resource_version, state.resource_version) == ("", "5")


def test_feed_yields_events_across_chunk_boundaries() -> None:
    stream = (
        line("ADDED", obj("a", "1"))
        + b"\n"
        + line("BOOKMARK", obj("", "3"))
        + line("DELETED", obj("a", "4"))
    )
    state = WatchState(as_object)
    seen = []
    for size in (1, 7, 64, len(stream)):
        state = WatchState(as_object)
        seen = [
            (ev.type.value, ev.resource_version)
            for start in range(0, len(stream), size)
            for ev in state.feed(stream[start : start + size])
        ]
        assert seen == [("ADDED", "1"), ("BOOKMARK", "3"), ("DELETED", "4")], size
    assert list(state.close()) == []
    assert state.resource_version == "4"


def test_feed_raises_gone_after_the_events_before_it() -> None:
    state = WatchState(as_object, "1")
    events = state.feed(
        line("MODIFIED", obj("a", "2")) + line("ERROR", GONE) + line("MODIFIED", obj("a", "3"))
    )
    first = next(events)
    assert first.resource_version == "2"
    with pytest.raises(Gone):
        next(events)
    assert state.expired


def test_close_yields_an_unterminated_last_event() -> None:
    state = WatchState(as_object)
    assert list(state.feed(line("ADDED", obj("a", "1"))[:-1])) == []
    (last,) = list(state.close())
    assert last.resource_version == "1"


def test_a_cut_off_event_means_the_stream_broke() -> None:
    state = WatchState(as_object)
    list(state.feed(line("ADDED", obj("a", "1"))[:20]))
    with pytest.raises(Unreachable, match="mid-event"):
        list(state.close())


@pytest.mark.parametrize(
    ("chunks", "lines", "rest"),
    [
        pytest.param([b"a\nb", b"c\n"], [b"a", b"bc"], None, id="joined"),
        pytest.param([b"\n\n"], [b"", b""], None, id="blank-lines"),
        pytest.param([b"x"], [], b"x", id="unterminated"),
        pytest.param([b"x\n", b"  "], [b"x"], None, id="whitespace-rest-dropped"),
    ],
)
def test_line_buffer(chunks: list[bytes], lines: list[bytes], rest: bytes | None) -> None:
    buffer = LineBuffer()
    assert [item for chunk in chunks for item in buffer.feed(chunk)] == lines
    assert buffer.flush() == rest
    assert buffer.flush() is None


@pytest.mark.parametrize(
    ("chunks", "lines", "rest"),
    [
        pytest.param([b"abcd\n"], [b"abcd"], None, id="at-the-limit"),
        pytest.param([b"abcdef\nxy\n"], [b"abcd...[2 more bytes cut]", b"xy"], None, id="cut"),
        pytest.param(
            [b"ab", b"cd", b"ef", b"gh\n"], [b"abcd...[4 more bytes cut]"], None, id="across-chunks"
        ),
        pytest.param([b"abcdefgh"], [], b"abcd...[4 more bytes cut]", id="cut-unterminated"),
    ],
)
def test_line_buffer_keeps_at_most_max_line_bytes_of_a_line(
    chunks: list[bytes], lines: list[bytes], rest: bytes | None
) -> None:
    buffer = LineBuffer(max_line=4)
    assert [item for chunk in chunks for item in buffer.feed(chunk)] == lines
    assert buffer.flush() == rest


def test_a_writer_without_newlines_never_grows_the_buffer() -> None:
    buffer = LineBuffer(max_line=1024)
    for _ in range(10_000):  # 100 MB of one line
        assert buffer.feed(b"x" * 10_000) == []
        assert len(buffer._pending) <= 1024
    assert buffer.flush() == b"x" * 1024 + b"...[99998976 more bytes cut]"
