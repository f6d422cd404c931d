"""The pure half of the client layer: requests as values, answers as typed results.

Requests are built here; answers are decoded and mapped to the error tree in
:mod:`jobset_core.client._answers`, and the retry decision is
:mod:`jobset_core.client._retry` (both re-exported here, the one face of the pure half).
Nothing here performs I/O, sleeps, logs or reads a clock. The client
(:mod:`jobset_core.client._client`) builds a :class:`Request` here, hands it to the official
client, and brings the answer back here to be decoded, mapped to our error tree, or judged for
a retry; :mod:`jobset_core.client._auth` is the same for credentials.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from jobset_core.client._answers import (
    ObjectList,
    as_object,
    decode_body,
    decode_jobset,
    decode_list,
    error_from_response,
    is_success,
    jobset_api_in,
    parse_retry_after,
    truncate,
    unreachable,
)
from jobset_core.client._retry import DEFAULT_RETRY, FORBIDDEN_ATTEMPTS, RetryPolicy, retry_delay
from jobset_core.models import to_plain
from jobset_core.resources import CONFIG_MAP, EVENT, JOB, JOBSET, POD, SERVICE, ApiResource

__all__ = [
    "CONFIG_MAP",
    "DEFAULT_RETRY",
    "EVENT",
    "FORBIDDEN_ATTEMPTS",
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

_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
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
        optional: Whether a 403 is an answer the caller expects and does without (Kueue's
            Workloads, for an identity without the optional Role): asked once, not retried
            unless likely transient, and not warned about here (the caller says it once).
    """

    method: Literal["GET", "POST", "PATCH", "DELETE"]
    path: str
    query: tuple[tuple[str, str], ...] = ()
    body: Any = None
    content_type: str = "application/json"
    verb: str = "get"
    resource: str = ""
    optional: bool = False

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
    def dry_run(self) -> bool:
        """Whether the call is a server-side dry run (``dryRun=All``): nothing is stored."""
        return ("dryRun", "All") in self.query

    @property
    def permission(self) -> tuple[str, str, str]:
        """What RBAC decides this call on: the verb, the resource and the namespace (``""``
        for a cluster-wide call)."""
        parts = self.path.split("/")
        namespace = parts[parts.index("namespaces") + 1] if "namespaces" in parts[:-1] else ""
        return (self.verb, self.resource, namespace)


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


def get(resource: ApiResource, namespace: str | None, name: str) -> Request:
    """``GET`` one object (``namespace=None``: a cluster-scoped one)."""
    return Request("GET", _path(resource, namespace, name), verb="get", resource=_label(resource))


def list_(
    resource: ApiResource,
    namespace: str | None,
    *,
    label_selector: Selector | None = None,
    field_selector: Selector | None = None,
    limit: int | None = None,
    continue_: str | None = None,
    optional: bool = False,
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
    return Request(
        "GET",
        _path(resource, namespace),
        query,
        verb="list",
        resource=_label(resource),
        optional=optional,
    )


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
    given = {"namespace": namespace, "name": name}
    attributes |= {key: value for key, value in given.items() if value is not None}
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
