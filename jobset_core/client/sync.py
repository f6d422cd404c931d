"""The synchronous client: a thin shell over the official ``kubernetes`` client.

Every method builds a :class:`~jobset_core.client._core.Request` in the pure core, sends it
through ``kubernetes.client.ApiClient.call_api`` (so authentication, TLS and token refresh are
the official client's), maps failures to :mod:`jobset_core.errors`, and retries as
:func:`~jobset_core.client._core.retry_delay` decides. :class:`AsyncJobSetClient
<jobset_core.client.aio.AsyncJobSetClient>` is its textual twin.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import random
import time
from collections.abc import Callable, Iterator, Mapping
from types import TracebackType
from typing import Any, TypeVar

import urllib3
from kubernetes.client.exceptions import ApiException

from jobset_core.client import _core
from jobset_core.client._core import (
    CONFIG_MAP,
    DEFAULT_RETRY,
    EVENT,
    JOB,
    JOBSET,
    POD,
    SERVICE,
    ObjectList,
    PatchType,
    Propagation,
    Request,
    RetryPolicy,
    Selector,
)
from jobset_core.client._watch import LineBuffer, WatchEvent, WatchState
from jobset_core.client.config import ClientSettings, load_sync_api_client
from jobset_core.errors import JobSetError, NotFound
from jobset_core.models import JobSet
from jobset_core.resources import ApiResource

__all__ = ["JobSetClient"]

T = TypeVar("T")
Obj = dict[str, Any]
Body = Mapping[str, Any] | Any

_TRANSPORT_ERRORS = (urllib3.exceptions.HTTPError, OSError)
_CONNECT_TIMEOUT = 10.0
_WATCH_GRACE = 30.0


class JobSetClient:
    """Synchronous client for JobSets and the objects around them.

    Args:
        settings: Where to connect (ignored when ``api_client`` is given).
        api_client: An existing ``kubernetes.client.ApiClient`` to use (not closed by us).
        retry: How 429, 5xx and lost answers to reads are retried.
        request_timeout: Read timeout of a non-streaming request, in seconds.
        sleep: Waits between attempts (injectable for tests).
        rand: Source of jitter in ``[0, 1)``.
    """

    def __init__(
        self,
        settings: ClientSettings | None = None,
        *,
        api_client: Any = None,
        retry: RetryPolicy = DEFAULT_RETRY,
        request_timeout: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self._owned = api_client is None
        self._api = load_sync_api_client(settings) if api_client is None else api_client
        self._retry = retry
        self._timeout = request_timeout
        self._sleep = sleep
        self._rand = rand

    def close(self) -> None:
        """Release the connection pool (only when this client created it)."""
        if self._owned:
            self._api.close()

    def __enter__(self) -> JobSetClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ JobSets

    def create_jobset(self, jobset: JobSet | Body, *, namespace: str) -> JobSet:
        """Create a JobSet; the answer carries the webhook's defaults, uid and resourceVersion."""
        return _core.decode_jobset(self._send(_core.create(JOBSET, namespace, jobset)))

    def server_side_dry_run_create_jobset(self, jobset: JobSet | Body, *, namespace: str) -> JobSet:
        """Run admission (defaulting and validation webhooks) without storing anything."""
        request = _core.create(JOBSET, namespace, jobset, dry_run=True)
        return _core.decode_jobset(self._send(request))

    def get_jobset(self, name: str, *, namespace: str) -> JobSet:
        """Read one JobSet."""
        return _core.decode_jobset(self._send(_core.get(JOBSET, namespace, name)))

    def list_jobsets(
        self,
        *,
        namespace: str,
        label_selector: Selector | None = None,
        field_selector: Selector | None = None,
    ) -> ObjectList[JobSet]:
        """List JobSets; the list's resourceVersion is where a watch continues."""
        request = _core.list_(
            JOBSET, namespace, label_selector=label_selector, field_selector=field_selector
        )
        return _core.decode_list(self._send(request), _core.decode_jobset)

    def patch_jobset(
        self, name: str, patch: Body, *, namespace: str, patch_type: PatchType = "merge"
    ) -> JobSet:
        """Patch a JobSet (merge patch by default; custom resources take no strategic patch)."""
        request = _core.patch(JOBSET, namespace, name, patch, patch_type=patch_type)
        return _core.decode_jobset(self._send(request))

    def delete_jobset(
        self,
        name: str,
        *,
        namespace: str,
        propagation: Propagation = "Foreground",
        uid: str | None = None,
    ) -> None:
        """Delete a JobSet (children first with ``Foreground``); ``uid`` guards against a
        namesake. Raises :class:`~jobset_core.errors.NotFound` when it is already gone."""
        self._send(_core.delete(JOBSET, namespace, name, propagation=propagation, uid=uid))

    def watch_jobsets(
        self,
        *,
        namespace: str,
        resource_version: str | None = None,
        label_selector: Selector | None = None,
        field_selector: Selector | None = None,
        timeout_seconds: int | None = None,
    ) -> Iterator[WatchEvent[JobSet]]:
        """Watch JobSets; raises :class:`~jobset_core.errors.Gone` when ``resource_version`` is
        too old (list again) and :class:`~jobset_core.client.Unreachable` when the stream drops."""
        request = _core.watch(
            JOBSET,
            namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            field_selector=field_selector,
            timeout_seconds=timeout_seconds,
        )
        return self._watch(request, _core.decode_jobset, resource_version, timeout_seconds)

    def jobset_api_served(self) -> bool:
        """Whether the API server serves ``jobset.x-k8s.io/v1alpha2`` jobsets (discovery)."""
        try:
            return _core.jobset_api_in(self._send(_core.discovery()))
        except NotFound:
            return False

    # ------------------------------------------------------------------ Jobs

    def create_job(self, job: Body, *, namespace: str) -> Obj:
        """Create a batch/v1 Job."""
        return self._create(JOB, namespace, job)

    def get_job(self, name: str, *, namespace: str) -> Obj:
        """Read a Job."""
        return self._get(JOB, namespace, name)

    def list_jobs(
        self,
        *,
        namespace: str,
        label_selector: Selector | None = None,
        field_selector: Selector | None = None,
    ) -> ObjectList[Obj]:
        """List Jobs."""
        return self._list(JOB, namespace, label_selector, field_selector)

    def patch_job(
        self, name: str, patch: Body, *, namespace: str, patch_type: PatchType = "merge"
    ) -> Obj:
        """Patch a Job."""
        return self._patch(JOB, namespace, name, patch, patch_type)

    def delete_job(
        self,
        name: str,
        *,
        namespace: str,
        propagation: Propagation = "Foreground",
        uid: str | None = None,
    ) -> None:
        """Delete a Job (``Foreground`` by default: the API's default for Jobs orphans pods)."""
        self._send(_core.delete(JOB, namespace, name, propagation=propagation, uid=uid))

    def watch_jobs(
        self,
        *,
        namespace: str,
        resource_version: str | None = None,
        label_selector: Selector | None = None,
        field_selector: Selector | None = None,
        timeout_seconds: int | None = None,
    ) -> Iterator[WatchEvent[Obj]]:
        """Watch Jobs (see :meth:`watch_jobsets`)."""
        return self._watch_objects(
            JOB,
            namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            field_selector=field_selector,
            timeout_seconds=timeout_seconds,
        )

    # ------------------------------------------------------------------ Services

    def create_service(self, service: Body, *, namespace: str) -> Obj:
        """Create a Service."""
        return self._create(SERVICE, namespace, service)

    def get_service(self, name: str, *, namespace: str) -> Obj:
        """Read a Service."""
        return self._get(SERVICE, namespace, name)

    def list_services(
        self,
        *,
        namespace: str,
        label_selector: Selector | None = None,
        field_selector: Selector | None = None,
    ) -> ObjectList[Obj]:
        """List Services."""
        return self._list(SERVICE, namespace, label_selector, field_selector)

    def delete_service(
        self,
        name: str,
        *,
        namespace: str,
        propagation: Propagation = "Foreground",
        uid: str | None = None,
    ) -> None:
        """Delete a Service."""
        self._send(_core.delete(SERVICE, namespace, name, propagation=propagation, uid=uid))

    # ------------------------------------------------------------------ ConfigMaps

    def create_config_map(self, config_map: Body, *, namespace: str) -> Obj:
        """Create a ConfigMap."""
        return self._create(CONFIG_MAP, namespace, config_map)

    def get_config_map(self, name: str, *, namespace: str) -> Obj:
        """Read a ConfigMap."""
        return self._get(CONFIG_MAP, namespace, name)

    def list_config_maps(
        self,
        *,
        namespace: str,
        label_selector: Selector | None = None,
        field_selector: Selector | None = None,
    ) -> ObjectList[Obj]:
        """List ConfigMaps."""
        return self._list(CONFIG_MAP, namespace, label_selector, field_selector)

    def patch_config_map(
        self, name: str, patch: Body, *, namespace: str, patch_type: PatchType = "merge"
    ) -> Obj:
        """Patch a ConfigMap. A merge patch carrying ``metadata.resourceVersion`` is a
        compare-and-swap: :class:`~jobset_core.errors.Conflict` when the object moved on."""
        return self._patch(CONFIG_MAP, namespace, name, patch, patch_type)

    def delete_config_map(
        self,
        name: str,
        *,
        namespace: str,
        propagation: Propagation = "Foreground",
        uid: str | None = None,
    ) -> None:
        """Delete a ConfigMap (its owned objects go first with ``Foreground``)."""
        self._send(_core.delete(CONFIG_MAP, namespace, name, propagation=propagation, uid=uid))

    def watch_config_maps(
        self,
        *,
        namespace: str,
        resource_version: str | None = None,
        label_selector: Selector | None = None,
        field_selector: Selector | None = None,
        timeout_seconds: int | None = None,
    ) -> Iterator[WatchEvent[Obj]]:
        """Watch ConfigMaps (see :meth:`watch_jobsets`)."""
        return self._watch_objects(
            CONFIG_MAP,
            namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            field_selector=field_selector,
            timeout_seconds=timeout_seconds,
        )

    # ------------------------------------------------------------------ Pods, logs, events

    def get_pod(self, name: str, *, namespace: str) -> Obj:
        """Read a Pod."""
        return self._get(POD, namespace, name)

    def list_pods(
        self,
        *,
        namespace: str,
        label_selector: Selector | None = None,
        field_selector: Selector | None = None,
    ) -> ObjectList[Obj]:
        """List Pods."""
        return self._list(POD, namespace, label_selector, field_selector)

    def watch_pods(
        self,
        *,
        namespace: str,
        resource_version: str | None = None,
        label_selector: Selector | None = None,
        field_selector: Selector | None = None,
        timeout_seconds: int | None = None,
    ) -> Iterator[WatchEvent[Obj]]:
        """Watch Pods (see :meth:`watch_jobsets`)."""
        return self._watch_objects(
            POD,
            namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            field_selector=field_selector,
            timeout_seconds=timeout_seconds,
        )

    def read_pod_log(
        self,
        name: str,
        *,
        namespace: str,
        container: str | None = None,
        tail_lines: int | None = None,
        follow: bool = False,
        previous: bool = False,
    ) -> str:
        """A container's log as text (with ``follow``, returns when the container ends)."""
        request = _core.pod_log(
            namespace,
            name,
            container=container,
            tail_lines=tail_lines,
            follow=follow,
            previous=previous,
        )
        timeout = None if follow else self._timeout
        data: bytes = self._retrying(request, lambda: _read(self._call_api(request, timeout)))
        return data.decode("utf-8", "replace")

    def stream_pod_log(
        self,
        name: str,
        *,
        namespace: str,
        container: str | None = None,
        tail_lines: int | None = None,
        follow: bool = True,
    ) -> Iterator[str]:
        """Yield a container's log line by line as it is written (without newlines)."""
        request = _core.pod_log(
            namespace, name, container=container, tail_lines=tail_lines, follow=follow
        )
        response = self._retrying(request, lambda: self._call_api(request, None))
        lines = LineBuffer()
        try:
            for chunk in _chunks(request, response):
                for line in lines.feed(chunk):
                    yield line.decode("utf-8", "replace")
            rest = lines.flush()
            if rest is not None:
                yield rest.decode("utf-8", "replace")
        finally:
            _release(response)

    def list_events(
        self,
        *,
        namespace: str,
        field_selector: Selector | None = None,
        label_selector: Selector | None = None,
    ) -> ObjectList[Obj]:
        """List core/v1 Events, e.g. ``field_selector={"involvedObject.name": name}``."""
        return self._list(EVENT, namespace, label_selector, field_selector)

    def watch_events(
        self,
        *,
        namespace: str,
        resource_version: str | None = None,
        field_selector: Selector | None = None,
        label_selector: Selector | None = None,
        timeout_seconds: int | None = None,
    ) -> Iterator[WatchEvent[Obj]]:
        """Watch core/v1 Events (see :meth:`watch_jobsets`)."""
        return self._watch_objects(
            EVENT,
            namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            field_selector=field_selector,
            timeout_seconds=timeout_seconds,
        )

    # ------------------------------------------------------------------ plumbing

    def _create(self, resource: ApiResource, namespace: str, body: Body) -> Obj:
        return _core.as_object(self._send(_core.create(resource, namespace, body)))

    def _get(self, resource: ApiResource, namespace: str, name: str) -> Obj:
        return _core.as_object(self._send(_core.get(resource, namespace, name)))

    def _list(
        self,
        resource: ApiResource,
        namespace: str,
        label_selector: Selector | None,
        field_selector: Selector | None,
    ) -> ObjectList[Obj]:
        request = _core.list_(
            resource, namespace, label_selector=label_selector, field_selector=field_selector
        )
        return _core.decode_list(self._send(request), _core.as_object)

    def _patch(
        self, resource: ApiResource, namespace: str, name: str, body: Body, patch_type: PatchType
    ) -> Obj:
        request = _core.patch(resource, namespace, name, body, patch_type=patch_type)
        return _core.as_object(self._send(request))

    def _watch_objects(
        self,
        resource: ApiResource,
        namespace: str,
        *,
        resource_version: str | None,
        label_selector: Selector | None,
        field_selector: Selector | None,
        timeout_seconds: int | None,
    ) -> Iterator[WatchEvent[Obj]]:
        request = _core.watch(
            resource,
            namespace,
            resource_version=resource_version,
            label_selector=label_selector,
            field_selector=field_selector,
            timeout_seconds=timeout_seconds,
        )
        return self._watch(request, _core.as_object, resource_version, timeout_seconds)

    def _watch(
        self,
        request: Request,
        decode: Callable[[Obj], T],
        resource_version: str | None,
        timeout_seconds: int | None,
    ) -> Iterator[WatchEvent[T]]:
        state = WatchState(decode, resource_version)
        read_timeout = None if timeout_seconds is None else timeout_seconds + _WATCH_GRACE
        response = self._retrying(request, lambda: self._call_api(request, read_timeout))
        try:
            for chunk in _chunks(request, response):
                yield from state.feed(chunk)
            yield from state.close()
        finally:
            _release(response)

    def _send(self, request: Request) -> Any:
        """Send a request and decode its JSON answer, retrying as the policy says."""
        data = self._retrying(request, lambda: _read(self._call_api(request, self._timeout)))
        return _core.decode_body(data)

    def _retrying(self, request: Request, attempt: Callable[[], T]) -> T:
        for number in itertools.count(1):
            try:
                return attempt()
            except ApiException as exc:
                error = _api_error(request, exc)
                delay = self._delay(request, number, error)
                if delay is None:
                    raise error from exc
            except _TRANSPORT_ERRORS as exc:
                error = _core.unreachable(request, exc)
                delay = self._delay(request, number, error)
                if delay is None:
                    raise error from exc
            self._sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _delay(self, request: Request, attempt: int, error: JobSetError) -> float | None:
        return _core.retry_delay(
            self._retry, attempt, error, idempotent=request.idempotent, rand=self._rand()
        )

    def _call_api(self, request: Request, read_timeout: float | None) -> Any:
        accept = "application/json" if request.resource != "pods/log" else "*/*"
        return self._api.call_api(
            request.path,
            request.method,
            query_params=list(request.query),
            header_params={"Content-Type": request.content_type, "Accept": accept},
            body=request.body,
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
            _preload_content=False,
            _request_timeout=(_CONNECT_TIMEOUT, read_timeout),
        )


def _api_error(request: Request, exc: Any) -> JobSetError:
    if not exc.status:  # the library failed before any answer (TLS, bad arguments)
        return _core.unreachable(request, exc)
    now = _dt.datetime.now(_dt.timezone.utc)
    return _core.error_from_response(exc.status, exc.headers, exc.body, now=now)


def _read(response: Any) -> bytes:
    try:
        data: bytes = response.data
        return data
    finally:
        response.release_conn()


def _chunks(request: Request, response: Any) -> Iterator[bytes]:
    try:
        yield from response.stream(amt=None, decode_content=False)
    except _TRANSPORT_ERRORS as exc:
        raise _core.unreachable(request, exc) from exc


def _release(response: Any) -> None:
    response.close()
    response.release_conn()
