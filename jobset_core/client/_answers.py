"""The pure half of the client layer, answers: decoded bodies, typed lists, and error
answers mapped to :mod:`jobset_core.errors` (re-exported by :mod:`jobset_core.client._core`).
Nothing here performs I/O, sleeps, logs or reads a clock."""

from __future__ import annotations

import datetime as _dt
import email.utils
import http
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from jobset_core import errors
from jobset_core.errors import ApiError, ServerError, Unreachable
from jobset_core.models import JobSet
from jobset_core.resources import JOBSET

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


def decode_list(data: Any, item: Callable[[Any], T]) -> ObjectList[T]:
    """Decode a ``...List`` answer, giving every item the list's ``apiVersion``/``kind``.

    The API server leaves ``apiVersion``/``kind`` out of list items; they are filled in so a
    JobSet (whose model requires them) and plain dicts look the same as from a ``get``.
    """
    obj = as_object(data)
    kind = str(obj.get("kind", ""))
    item_kind = kind[: -len("List")] if kind.endswith("List") else ""
    api_version = obj.get("apiVersion")
    items: list[T] = []
    for raw in obj.get("items") or []:
        entry = dict(as_object(raw))
        if item_kind:
            entry.setdefault("kind", item_kind)
        if api_version:
            entry.setdefault("apiVersion", api_version)
        items.append(item(entry))
    metadata = obj.get("metadata") or {}
    return ObjectList(
        items=items,
        resource_version=str(metadata.get("resourceVersion") or ""),
        continue_=str(metadata.get("continue") or ""),
    )


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
