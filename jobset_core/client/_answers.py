"""The pure half of the client layer, answers: decoded bodies, typed lists, and error
answers mapped to :mod:`jobset_core.errors` (re-exported by :mod:`jobset_core.client._core`).
Nothing here performs I/O, sleeps, logs or reads a clock."""

from __future__ import annotations

import datetime as _dt
import email.utils
import http
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from jobset_core import errors
from jobset_core.errors import ApiError, ServerError, Unreachable
from jobset_core.models import JobSet
from jobset_core.resources import JOBSET, ApiResource

if TYPE_CHECKING:
    from jobset_core.client._core import Request

__all__ = [
    "ObjectList",
    "as_object",
    "decode_body",
    "decode_jobset",
    "decode_list",
    "error_from_response",
    "is_success",
    "jobset_api_in",
    "parse_retry_after",
    "truncate",
    "unreachable",
]

T = TypeVar("T")

_TEXT_LIMIT = 256
_ERROR_CLASSES: dict[int, type[ApiError]] = {
    401: errors.Unauthorized,
    403: errors.Forbidden,
    404: errors.NotFound,
    409: errors.Conflict,
    410: errors.Gone,
    422: errors.Invalid,
    429: errors.TooManyRequests,
}


@dataclass(frozen=True)
class ObjectList(Generic[T]):
    """The items of a list call and the collection's ``resourceVersion`` to watch from.

    Attributes:
        items: The objects of this answer (one page when the call set a ``limit``).
        resource_version: The snapshot the items belong to: where a watch continues.
        continue_: The token of the next page (``""``: this was the last one).
    """

    items: list[T]
    resource_version: str
    continue_: str = ""


# --------------------------------------------------------------------------- answers


def is_success(status: int) -> bool:
    """Whether an HTTP status is a success (2xx)."""
    return 200 <= status < 300


def decode_body(body: bytes | str | None) -> Any:
    """Decode a JSON response body (``None`` for an empty one).

    Bytes are decoded as they are (a list page of a few MB is not copied into a text first);
    bytes that are not UTF-8 are read with their bad sequences replaced."""
    if body is None or not body.strip():
        return None
    try:
        return json.loads(body)
    except UnicodeDecodeError:
        assert isinstance(body, bytes)
        return json.loads(body.decode("utf-8", "replace"))


def as_object(data: Any) -> dict[str, Any]:
    """The answer as an API-shaped mapping; anything else is a server fault."""
    if not isinstance(data, dict):
        raise ServerError(200, "UnexpectedResponse", truncate(repr(data)))
    return data


def decode_jobset(data: Any) -> JobSet:
    """A JobSet from the server: unknown (newer) fields are kept, never dropped."""
    return JobSet.model_validate(as_object(data))


def decode_list(
    body: bytes | str | None, resource: ApiResource, item: Callable[[dict[str, Any]], T | None]
) -> ObjectList[T]:
    """Decode a ``...List`` answer one item at a time: ``item`` makes each what the caller
    keeps of it (``None``: nothing), before the next is decoded.

    A page of a thousand pods decodes to tens of megabytes of small objects; decoded whole,
    what a caller keeps of it (a trimmed part) stays spread over that memory, which the
    interpreter's allocator can then hand back to no one. One item at a time, each reuses the
    memory the one before let go.

    The API server leaves ``apiVersion``/``kind`` out of list items; they are filled in from
    ``resource`` (the list's own ``kind`` may come after its items: a custom resource's list
    is written with its keys sorted), so a JobSet (whose model requires them) and plain dicts
    look the same as from a ``get``.
    """
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    text = body or ""
    items: list[T] = []
    metadata: Any = {}
    pos = _expect(text, _space(text, 0), "{")
    if text.startswith("}", pos):
        pos += 1
    else:
        while True:
            key, pos = _value(text, pos)
            pos = _expect(text, pos, ":")
            if key == "items" and text.startswith("[", pos):
                pos = _items(text, _space(text, pos + 1), resource, item, items)
            else:
                value, pos = _value(text, pos)
                if key == "metadata":
                    metadata = value
            pos = _space(text, pos)
            if text.startswith(",", pos):
                pos = _space(text, pos + 1)
                continue
            pos = _expect(text, pos, "}")
            break
    if text[pos:].strip():
        raise ServerError(200, "UnexpectedResponse", truncate(text[pos:]))
    metadata = metadata if isinstance(metadata, dict) else {}
    return ObjectList(
        items=items,
        resource_version=str(metadata.get("resourceVersion") or ""),
        continue_=str(metadata.get("continue") or ""),
    )


_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


def _space(text: str, pos: int) -> int:
    """Where the JSON whitespace from ``pos`` ends."""
    found = _SPACE.match(text, pos)
    return found.end() if found else pos


def _value(text: str, pos: int) -> tuple[Any, int]:
    """The JSON value at ``pos`` and where it ends; a fault of the server's if it is none."""
    try:
        return _DECODER.raw_decode(text, pos)
    except json.JSONDecodeError as error:
        raise ServerError(200, "UnexpectedResponse", f"not JSON: {error}") from None


def _expect(text: str, pos: int, mark: str) -> int:
    """Past ``mark`` at ``pos`` (and the whitespace around it); a server fault if not there."""
    pos = _space(text, pos)
    if not text.startswith(mark, pos):
        raise ServerError(
            200, "UnexpectedResponse", f"expected {mark!r} at {pos}: {truncate(text[pos:])}"
        )
    return _space(text, pos + 1)


def _items(
    text: str,
    pos: int,
    resource: ApiResource,
    item: Callable[[dict[str, Any]], T | None],
    into: list[T],
) -> int:
    """The list's items from ``pos`` (inside its ``[``), each made by ``item`` at once."""
    if text.startswith("]", pos):
        return pos + 1
    while True:
        raw, pos = _value(text, pos)
        entry = as_object(raw)
        entry.setdefault("kind", resource.kind)
        entry.setdefault("apiVersion", resource.api_version)
        made = item(entry)
        del raw, entry
        if made is not None:
            into.append(made)
        pos = _space(text, pos)
        if text.startswith(",", pos):
            pos = _space(text, pos + 1)
            continue
        return _expect(text, pos, "]")


def jobset_api_in(document: Any) -> bool:
    """Whether a discovery ``APIResourceList`` serves the ``jobsets`` resource."""
    if not isinstance(document, dict):
        return False
    return any(
        isinstance(entry, dict) and entry.get("name") == JOBSET.plural
        for entry in document.get("resources") or []
    )


# --------------------------------------------------------------------------- errors


def truncate(text: str, limit: int = _TEXT_LIMIT) -> str:
    """Cut a text body to ``limit`` characters so tokens or payloads don't spill into logs."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _header(headers: Any, name: str) -> str | None:
    if headers is None:
        return None
    items: Iterable[tuple[Any, Any]] = headers.items() if hasattr(headers, "items") else headers
    for key, value in items:
        if str(key).lower() == name.lower():
            return str(value)
    return None


def parse_retry_after(value: str | None, now: _dt.datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds, or an HTTP date (needs
    ``now``). ``None`` when absent or unreadable."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    if now is None:
        return None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.UTC)
    return max(0.0, (when - now).total_seconds())


def error_from_response(
    status: int,
    headers: Any = None,
    body: bytes | str | None = None,
    *,
    now: _dt.datetime | None = None,
) -> ApiError:
    """Map an error answer to our tree, keeping the ``Status`` only when it is one.

    Args:
        status: HTTP status code.
        headers: Response headers (a mapping or ``(name, value)`` pairs), any case.
        body: The raw response body.
        now: Current time, only needed to read a ``Retry-After`` given as an HTTP date.

    Returns:
        The error to raise (the shell chains the library's exception with ``raise ... from``).
    """
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else (body or "")
    try:
        payload = json.loads(text) if text.strip() else None
    except ValueError:
        payload = None
    if isinstance(payload, dict) and payload.get("kind") == "Status":
        reason = str(payload.get("reason") or "")
        message = str(payload.get("message") or "")
        raw_details = payload.get("details")
        details: dict[str, Any] = raw_details if isinstance(raw_details, dict) else {}
    else:
        reason, message, details = "", truncate(text.strip()), {}
    if not reason:
        reason = _phrase(status)
    retry_after = parse_retry_after(_header(headers, "Retry-After"), now)
    if retry_after is None and isinstance(details.get("retryAfterSeconds"), int):
        retry_after = float(details["retryAfterSeconds"])
    cls = ServerError if status >= 500 else _ERROR_CLASSES.get(status, ApiError)
    return cls(status, reason, message, details, retry_after)


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase.replace(" ", "")
    except ValueError:
        return ""


def unreachable(request: Request, error: BaseException) -> Unreachable:
    """The error for a request that got no answer (connection refused, reset, timed out)."""
    what = f"{request.verb} {request.resource}".strip() if request.resource else request.verb
    detail = truncate(str(error).strip() or type(error).__name__)
    return Unreachable(f"API server unreachable during {what} {request.path}: {detail}")
