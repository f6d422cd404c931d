"""The pure half of the client layer: requests as values, answers as typed results.

Nothing here performs I/O, sleeps, logs or reads a clock. The client
(:mod:`jobset_core.client._client`) builds a :class:`Request` here, hands it to the official
client, and brings the answer back here to be decoded, mapped to our error tree, or judged for
a retry; :mod:`jobset_core.client._auth` is the same for credentials.
"""

from __future__ import annotations

import datetime as _dt
import email.utils
import http
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

from jobset_core.errors import (
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    JobSetError,
    NotFound,
    ServerError,
    TooManyRequests,
    Unauthorized,
    Unreachable,
)
from jobset_core.models import JobSet, to_plain
from jobset_core.resources import CONFIG_MAP, EVENT, JOB, JOBSET, POD, SERVICE, ApiResource

__all__ = [
    "CONFIG_MAP",
    "DEFAULT_RETRY",
    "EVENT",
    "JOB",
    "JOBSET",
    "POD",
    "SERVICE",
    "ObjectList",
    "PatchType",
    "Propagation",
    "Request",
    "RetryPolicy",
    "Selector",
    "access_allowed",
    "access_review",
    "as_object",
    "create",
    "decode_body",
    "decode_jobset",
    "decode_list",
    "delete",
    "discovery",
    "error_from_response",
    "get",
    "is_success",
    "jobset_api_in",
    "list_",
    "parse_retry_after",
    "patch",
    "pod_log",
    "render_selector",
    "retry_delay",
    "truncate",
    "unreachable",
    "watch",
]

PatchType = Literal["merge", "json", "strategic"]
Propagation = Literal["Foreground", "Background", "Orphan"]
#: A label or field selector: a rendered string, or ``{key: value}`` where a value may be a
#: string (``key=value``), a list of strings (``key in (a,b)``) or ``None`` (``key`` exists).
Selector = str | Mapping[str, "str | Sequence[str] | None"]

T = TypeVar("T")

_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}
_TEXT_LIMIT = 256
_ERROR_CLASSES: dict[int, type[ApiError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}


@dataclass(frozen=True)
class Request:
    """One API call, described as a value.

    Attributes:
        method: HTTP method.
        path: Absolute API path with every segment already escaped.
        query: Query parameters, in order, as strings.
        body: JSON-shaped request body, or ``None``.
        content_type: ``Content-Type`` of the body.
        verb: The Kubernetes verb (``create``, ``get``, ``list``, ``watch``, ``patch``,
            ``delete``), for messages and the retry decision.
        resource: ``plural.group`` of the target, for messages.
    """

    method: Literal["GET", "POST", "PATCH", "DELETE"]
    path: str
    query: tuple[tuple[str, str], ...] = ()
    body: Any = None
    content_type: str = "application/json"
    verb: str = "get"
    resource: str = ""

    @property
    def idempotent(self) -> bool:
        """Whether repeating the call after a lost answer cannot change anything: a read; a
        DELETE (a second one finds the object gone, 404, which every caller of ``delete``
        takes as done; a ``uid`` precondition still guards a namesake); or a create of an
        object with a fixed name (a second one that finds the first's object gets 409, which
        every caller of ``create`` takes as "exists" and checks as a namesake it may adopt).
        A create by ``generateName`` or a patch is not: repeating it may apply it twice."""
        if self.method in ("GET", "DELETE"):
            return True
        return self.method == "POST" and _fixed_name(self.body)

    @property
    def permission(self) -> tuple[str, str, str]:
        """What RBAC decides this call on: the verb, the resource and the namespace (``""``
        for a cluster-wide call)."""
        parts = self.path.split("/")
        namespace = parts[parts.index("namespaces") + 1] if "namespaces" in parts[:-1] else ""
        return (self.verb, self.resource, namespace)


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


# --------------------------------------------------------------------------- requests


def _path(
    resource: ApiResource, namespace: str | None, name: str | None = None, sub: str | None = None
) -> str:
    root = f"/apis/{resource.group}/{resource.version}" if resource.group else "/api/v1"
    parts = [root]
    if namespace is not None:
        parts.append(f"namespaces/{_segment(namespace)}")
    parts.append(resource.plural)
    if name is not None:
        parts.append(_segment(name))
    if sub is not None:
        parts.append(sub)
    return "/".join(parts)


def _segment(value: str) -> str:
    if not value or value in (".", ".."):
        raise ValueError(f"not a valid object name or namespace: {value!r}")
    return quote(value, safe="")


def _label(resource: ApiResource) -> str:
    return f"{resource.plural}.{resource.group}" if resource.group else resource.plural


def create(
    resource: ApiResource,
    namespace: str,
    body: Any,
    *,
    dry_run: bool = False,
    field_manager: str | None = None,
    field_validation: str | None = "Strict",
) -> Request:
    """``POST`` a new object (``dryRun=All`` for a server-side dry run).

    ``fieldValidation=Strict`` by default: a field the server does not know is an error
    instead of being silently dropped (the worst outcome for a typo).
    """
    query = _params(
        dryRun="All" if dry_run else None,
        fieldManager=field_manager,
        fieldValidation=field_validation,
    )
    return Request(
        "POST",
        _path(resource, namespace),
        query,
        _body(body),
        verb="create",
        resource=_label(resource),
    )


def get(resource: ApiResource, namespace: str, name: str) -> Request:
    """``GET`` one object."""
    return Request("GET", _path(resource, namespace, name), verb="get", resource=_label(resource))


def list_(
    resource: ApiResource,
    namespace: str | None,
    *,
    label_selector: Selector | None = None,
    field_selector: Selector | None = None,
    limit: int | None = None,
    continue_: str | None = None,
) -> Request:
    """``GET`` a collection (``namespace=None``: across all namespaces).

    Without ``limit`` one answer holds everything; with it the answer is one page and its
    ``continue`` token asks for the next one (every page belongs to the same snapshot).
    """
    query = _params(
        labelSelector=render_selector(label_selector),
        fieldSelector=render_selector(field_selector),
        limit=None if limit is None else str(int(limit)),
        **{"continue": continue_ or None},
    )
    return Request("GET", _path(resource, namespace), query, verb="list", resource=_label(resource))


def watch(
    resource: ApiResource,
    namespace: str | None,
    *,
    resource_version: str | None = None,
    label_selector: Selector | None = None,
    field_selector: Selector | None = None,
    timeout_seconds: int | None = None,
) -> Request:
    """``GET ?watch=true`` with bookmarks, from ``resource_version`` when given."""
    query = _params(
        watch="true",
        allowWatchBookmarks="true",
        resourceVersion=resource_version or None,
        labelSelector=render_selector(label_selector),
        fieldSelector=render_selector(field_selector),
        timeoutSeconds=None if timeout_seconds is None else str(int(timeout_seconds)),
    )
    return Request(
        "GET", _path(resource, namespace), query, verb="watch", resource=_label(resource)
    )


def patch(
    resource: ApiResource,
    namespace: str,
    name: str,
    body: Any,
    *,
    patch_type: PatchType = "merge",
    field_manager: str | None = None,
    subresource: str | None = None,
) -> Request:
    """``PATCH`` an object (merge patch by default; a JSON patch must be a list of operations)."""
    content_type = _PATCH_CONTENT_TYPES.get(patch_type)
    if content_type is None:
        raise ValueError(
            f"unknown patch type {patch_type!r}; use one of {sorted(_PATCH_CONTENT_TYPES)}"
        )
    plain = _body(body)
    if (patch_type == "json") != isinstance(plain, list):
        raise ValueError("a 'json' patch is a list of operations; other patch types are objects")
    return Request(
        "PATCH",
        _path(resource, namespace, name, subresource),
        _params(fieldManager=field_manager),
        plain,
        content_type,
        verb="patch",
        resource=_label(resource),
    )


def delete(
    resource: ApiResource,
    namespace: str,
    name: str,
    *,
    propagation: Propagation = "Foreground",
    uid: str | None = None,
    grace_period_seconds: int | None = None,
) -> Request:
    """``DELETE`` an object with ``DeleteOptions`` (``uid`` makes it a precondition)."""
    options: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "propagationPolicy": propagation,
    }
    if uid is not None:
        options["preconditions"] = {"uid": uid}
    if grace_period_seconds is not None:
        options["gracePeriodSeconds"] = grace_period_seconds
    return Request(
        "DELETE",
        _path(resource, namespace, name),
        body=options,
        verb="delete",
        resource=_label(resource),
    )


def pod_log(
    namespace: str,
    name: str,
    *,
    container: str | None = None,
    tail_lines: int | None = None,
    follow: bool = False,
    previous: bool = False,
) -> Request:
    """``GET`` a pod container's log (the body is raw text, never JSON-decoded)."""
    query = _params(
        container=container,
        tailLines=None if tail_lines is None else str(int(tail_lines)),
        follow="true" if follow else None,
        previous="true" if previous else None,
    )
    return Request(
        "GET", _path(POD, namespace, name, "log"), query, verb="get", resource="pods/log"
    )


def discovery(group: str = JOBSET.group, version: str = JOBSET.version) -> Request:
    """``GET`` the discovery document of one API group version."""
    return Request("GET", f"/apis/{_segment(group)}/{_segment(version)}", verb="get")


def access_review(
    verb: str, resource: ApiResource, namespace: str | None = None, name: str | None = None
) -> Request:
    """``POST`` a ``SelfSubjectAccessReview``: may this identity ``verb`` the resource (in
    ``namespace``; ``None``: across all namespaces)? Every authenticated identity may ask."""
    attributes = {"verb": verb, "group": resource.group, "resource": resource.plural}
    if namespace is not None:
        attributes["namespace"] = namespace
    if name is not None:
        attributes["name"] = name
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }
    return Request(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        body=body,
        verb="create",
        resource="selfsubjectaccessreviews.authorization.k8s.io",
    )


def access_allowed(answer: Any) -> bool:
    """Whether a ``SelfSubjectAccessReview`` answer allows the request."""
    status = answer.get("status") if isinstance(answer, dict) else None
    return bool(isinstance(status, dict) and status.get("allowed") is True)


def _params(**values: str | None) -> tuple[tuple[str, str], ...]:
    return tuple((key, value) for key, value in values.items() if value is not None)


def _fixed_name(body: Any) -> bool:
    meta = body.get("metadata") if isinstance(body, dict) else None
    return isinstance(meta, dict) and isinstance(meta.get("name"), str) and bool(meta["name"])


def _body(body: Any) -> Any:
    plain = to_plain(body)
    if not isinstance(plain, (dict, list)):
        raise TypeError(f"a request body must be an object or a list, not {type(body).__name__}")
    return plain


def render_selector(selector: Selector | None) -> str | None:
    """Render a label/field selector: ``{"a": "x", "b": ["y", "z"], "c": None}`` →
    ``a=x,b in (y,z),c``. Strings pass through; empty selectors become ``None``."""
    if selector is None:
        return None
    if isinstance(selector, str):
        return selector or None
    terms: list[str] = []
    for key, value in selector.items():
        _check_selector_token(key, "key")
        if value is None:
            terms.append(key)
        elif isinstance(value, str):
            _check_selector_token(value, "value", allow_empty=True)
            terms.append(f"{key}={value}")
        else:
            values = list(value)
            if not values:
                raise ValueError(f"selector {key!r}: an 'in' term needs at least one value")
            for item in values:
                _check_selector_token(item, "value", allow_empty=True)
            terms.append(f"{key} in ({','.join(values)})")
    return ",".join(terms) or None


def _check_selector_token(token: str, what: str, *, allow_empty: bool = False) -> None:
    if (not token and not allow_empty) or any(c in token for c in ",()=! \t\n"):
        raise ValueError(f"invalid selector {what} {token!r}")


# --------------------------------------------------------------------------- answers


def is_success(status: int) -> bool:
    """Whether an HTTP status is a success (2xx)."""
    return 200 <= status < 300


def decode_body(body: bytes | str | None) -> Any:
    """Decode a JSON response body (``None`` for an empty one)."""
    if body is None:
        return None
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    return json.loads(text) if text.strip() else None


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
        when = when.replace(tzinfo=_dt.timezone.utc)
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


# --------------------------------------------------------------------------- retries


@dataclass(frozen=True)
class RetryPolicy:
    """How throttling (429), server errors (5xx) and lost answers to reads, deletes and
    creates of fixed names are retried. The default (seven attempts, 0.5 s doubling up to
    10 s) keeps trying for about 25 s: long enough for an API server that restarts on a
    loaded machine (the soak saw one refuse connections, then answer 503 while it installed
    its paths, for 19 s).

    Attributes:
        max_attempts: Attempts in total, the first one included (1 disables retries).
        base_delay: Backoff before the second attempt, in seconds.
        multiplier: Growth of the backoff per attempt.
        max_delay: Cap of the backoff (a ``Retry-After`` is capped by ``max_retry_after``).
        jitter: Fraction of the backoff randomised (0.5 → between 50 % and 150 %).
        max_retry_after: The longest ``Retry-After`` honoured; longer ones surface the error.
    """

    max_attempts: int = 7
    base_delay: float = 0.5
    multiplier: float = 2.0
    max_delay: float = 10.0
    jitter: float = 0.5
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError("jitter must be between 0 and 1")


DEFAULT_RETRY = RetryPolicy()
#: Attempts in total for a 403 that is not known to be transient (see :func:`retry_delay`).
FORBIDDEN_ATTEMPTS = 4


def retry_delay(
    policy: RetryPolicy,
    attempt: int,
    error: JobSetError,
    *,
    idempotent: bool,
    rand: float,
    forbidden_may_pass: bool = False,
) -> float | None:
    """Decide whether to try again after ``attempt`` (1-based) failed with ``error``.

    Args:
        policy: The retry policy.
        attempt: The number of the attempt that just failed.
        error: What it failed with.
        idempotent: Whether the request may be repeated after a lost answer (a read, a delete,
            a create of a fixed name: see :attr:`Request.idempotent`; only those are retried
            on :class:`Unreachable`: a lost answer to a patch may hide a success).
        rand: A number in ``[0, 1)`` that drives the jitter (the shell passes ``random.random()``).
        forbidden_may_pass: Whether a 403 is likely a restarted API server's: the same
            identity was allowed the same call (verb, resource, namespace) before, or the
            server could not be reached moments ago. An API server that has just started
            refuses everything until its authorizer's caches are filled (a second or two, more
            on a loaded machine), so a 403 is retried: for :data:`FORBIDDEN_ATTEMPTS` attempts
            (about 3.5 s by default; a missing permission surfaces that much later), or like
            a server error when it is likely transient (a Role is rarely taken away in the
            middle of a wait). A 403 that outlasts the retries surfaces. A 403 of an
            admission plugin (:attr:`Forbidden.by_admission`: a quota) is never retried.

    Returns:
        Seconds to wait before the next attempt, or ``None`` to give up and raise ``error``.
    """
    if attempt >= policy.max_attempts:
        return None
    if isinstance(error, Forbidden) and error.by_admission:
        return None  # a quota, a LimitRange: the same request gets the same answer
    if isinstance(error, Forbidden) and not forbidden_may_pass and attempt >= FORBIDDEN_ATTEMPTS:
        return None
    retryable = (
        isinstance(error, (TooManyRequests, ServerError))
        or (idempotent and isinstance(error, Unreachable))
        or isinstance(error, Forbidden)
    )
    if not retryable:
        return None
    backoff = min(policy.max_delay, policy.base_delay * policy.multiplier ** (attempt - 1))
    backoff *= 1.0 - policy.jitter + 2.0 * policy.jitter * rand
    retry_after = error.retry_after if isinstance(error, ApiError) else None
    if retry_after is None:
        return backoff
    if retry_after > policy.max_retry_after:
        return None
    return max(retry_after, backoff)
