"""The client against the real local control plane (kube-apiserver + upstream JobSet webhooks).

The client's verbs are generic (``create``/``get``/``list``/``patch``/``delete``/``watch`` of an
:class:`~jobset_core.resources.ApiResource`); :class:`Api` names them per kind, as a reader of
these tests thinks of them, in one line each. Setup that is not under test (namespaces,
service accounts, webhook configurations) uses the official client through the ``devcluster``
fixture.
"""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobset_core.client import Client, ClientSettings, EventType, RetryPolicy, WatchEvent
from jobset_core.client._core import decode_jobset
from jobset_core.errors import ApiError, Conflict, Forbidden, Gone, Invalid, NotFound, ServerError
from jobset_core.models import JobSet
from jobset_core.resources import CONFIG_MAP, EVENT, JOB, JOBSET, POD, SERVICE
from tests.cluster.faultproxy import FaultProxy

pytestmark = pytest.mark.cluster


class Api:
    """The client's generic verbs under per-kind names (JobSets decoded to the model)."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def jobset_api_served(self) -> bool:
        return await self.client.jobset_api_served()

    async def create_jobset(self, body: Any, *, namespace: str) -> JobSet:
        return decode_jobset(await self.client.create(JOBSET, body, namespace=namespace))

    async def server_side_dry_run_create_jobset(self, body: Any, *, namespace: str) -> JobSet:
        answer = await self.client.create(JOBSET, body, namespace=namespace, dry_run=True)
        return decode_jobset(answer)

    async def get_jobset(self, name: str, *, namespace: str) -> JobSet:
        return decode_jobset(await self.client.get(JOBSET, name, namespace=namespace))

    async def list_jobsets(self, **kw: Any) -> Any:
        listed = await self.client.list(JOBSET, **kw)
        return type(listed)([decode_jobset(i) for i in listed.items], listed.resource_version)

    async def patch_jobset(self, name: str, body: Any, *, namespace: str) -> JobSet:
        return decode_jobset(await self.client.patch(JOBSET, name, body, namespace=namespace))

    async def delete_jobset(self, name: str, **kw: Any) -> Any:
        return await self.client.delete(JOBSET, name, **kw)

    def watch_jobsets(self, **kw: Any) -> AsyncIterator[WatchEvent[Any]]:
        return self.client.watch(JOBSET, **kw)

    def __getattr__(self, verb_kind: str) -> Callable[..., Any]:
        """``create_job``, ``list_config_maps``, ``watch_pods``... over the generic verbs."""
        verb, _, kind = verb_kind.partition("_")
        resource = {
            "job": JOB,
            "jobs": JOB,
            "service": SERVICE,
            "services": SERVICE,
            "config_map": CONFIG_MAP,
            "config_maps": CONFIG_MAP,
            "pod": POD,
            "pods": POD,
            "events": EVENT,
        }[kind]
        return lambda *args, **kw: getattr(self.client, verb)(resource, *args, **kw)

    async def read_pod_log(self, *args: Any, **kw: Any) -> str:
        return await self.client.read_pod_log(*args, **kw)

    def stream_pod_log(self, *args: Any, **kw: Any) -> AsyncIterator[str]:
        return self.client.stream_pod_log(*args, **kw)

    @staticmethod
    async def drain(stream: Any, until: Callable[[Any], bool] = lambda _: False) -> list[Any]:
        """Items of an async iterator until one satisfies ``until`` or it ends."""
        items: list[Any] = []
        async for item in stream:
            items.append(item)
            if until(item):
                break
        return items


@pytest.fixture
def settings(devcluster: Any) -> ClientSettings:
    return ClientSettings(kubeconfig_path=devcluster.kubeconfig)


@pytest.fixture
async def api(settings: ClientSettings) -> AsyncIterator[Api]:
    async with Client(settings) as client:
        yield Api(client)


def jobset(name: str, *, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    pod = {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "registry.invalid/w:1"}],
    }
    rjob = {"name": "workers", "replicas": 1, "template": {"spec": {"template": {"spec": pod}}}}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": {"replicatedJobs": [rjob], **spec},
    }


def job(name: str, *, annotations: dict[str, str] | None = None, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, **metadata},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": dict(annotations or {})},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "registry.invalid/w:1"}],
                },
            },
        },
    }


async def eventually(check: Callable[[], Any], timeout: float = 60.0, desc: str = "it") -> Any:
    """Await ``check()`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {desc} (last: {value!r})")
        await asyncio.sleep(0.3)


async def gone(get: Callable[[], Any]) -> bool:
    try:
        await get()
    except NotFound:
        return True
    return False


# ------------------------------------------------------------------ JobSets


async def test_jobset_api_is_served(api: Api) -> None:
    assert await api.jobset_api_served() is True


async def test_jobset_create_get_list_patch_delete(api: Api, cluster_namespace: str) -> None:
    ns = cluster_namespace
    created = await api.create_jobset(jobset("life", labels={"team": "a"}), namespace=ns)
    assert isinstance(created, JobSet)
    assert created.metadata.uid and created.metadata.namespace == ns
    assert created.spec.success_policy is not None  # the upstream webhook defaulted it
    assert created.spec.success_policy.operator == "All"

    got = await api.get_jobset("life", namespace=ns)
    assert (got.name, got.metadata.uid) == ("life", created.metadata.uid)

    listed = await api.list_jobsets(namespace=ns, label_selector={"team": "a"})
    assert [item.name for item in listed.items] == ["life"]
    assert listed.items[0].kind == "JobSet" and listed.resource_version
    assert (await api.list_jobsets(namespace=ns, label_selector={"team": "b"})).items == []

    patched = await api.patch_jobset("life", {"metadata": {"labels": {"x": "y"}}}, namespace=ns)
    assert patched.metadata.labels == {"team": "a", "x": "y"}

    await api.delete_jobset("life", namespace=ns, uid=created.metadata.uid)
    await eventually(lambda: gone(lambda: api.get_jobset("life", namespace=ns)), desc="deletion")


async def test_no_answer_is_kept_once_read(
    devcluster: Any, cluster_namespace: str, tmp_path: Path
) -> None:
    # kubernetes_asyncio's ApiClient keeps its last answer (``last_response``), body and all,
    # until its next request: a triggerer's informers held their last list page (2.7 MB at
    # 400 runs in a namespace) for the whole wait. Ours forgets it as soon as it has it. That
    # client carries HTTP/1.1 only: the fault proxy, which offers no HTTP/2, makes it.
    with FaultProxy(devcluster.state_dir) as proxy:
        kubeconfig = proxy.admin_kubeconfig(tmp_path / "http1", user="http1")
        async with Client(ClientSettings(kubeconfig_path=str(kubeconfig))) as client:
            for i in range(3):
                body = {"metadata": {"name": f"kept-{i}"}, "data": {"x": "y" * 100_000}}
                await client.create(CONFIG_MAP, body, namespace=cluster_namespace)
            listed = await client.list(CONFIG_MAP, namespace=cluster_namespace)
            kept = [c for c in listed.items if c["metadata"]["name"].startswith("kept-")]
            assert len(kept) == 3
            assert client.stats.protocol == "http/1.1"
            pools = client._pools
            assert pools is not None
            assert [getattr(api, "last_response", None) for api in pools] == [None, None]


async def test_server_side_dry_run_applies_the_webhook_and_stores_nothing(
    api: Api, cluster_namespace: str
) -> None:
    dry = await api.server_side_dry_run_create_jobset(jobset("dry"), namespace=cluster_namespace)
    assert dry.spec.network is not None and dry.spec.network.enable_dns_hostnames is True
    assert dry.spec.startup_policy is not None
    with pytest.raises(NotFound):
        await api.get_jobset("dry", namespace=cluster_namespace)


async def test_missing_jobset_is_not_found(api: Api, cluster_namespace: str) -> None:
    with pytest.raises(NotFound) as info:
        await api.get_jobset("absent", namespace=cluster_namespace)
    assert (info.value.status, info.value.reason) == (404, "NotFound")
    assert info.value.details["name"] == "absent"


async def test_duplicate_create_is_a_conflict(api: Api, cluster_namespace: str) -> None:
    await api.create_jobset(jobset("twice"), namespace=cluster_namespace)
    with pytest.raises(Conflict) as info:
        await api.create_jobset(jobset("twice"), namespace=cluster_namespace)
    assert (info.value.status, info.value.reason) == (409, "AlreadyExists")


async def test_delete_guarded_by_another_uid_is_a_conflict(
    api: Api, cluster_namespace: str
) -> None:
    created = await api.create_jobset(jobset("guarded"), namespace=cluster_namespace)
    with pytest.raises(Conflict, match="the UID in the precondition"):
        await api.delete_jobset("guarded", namespace=cluster_namespace, uid=str(uuid.uuid4()))
    still = await api.get_jobset("guarded", namespace=cluster_namespace)
    assert still.metadata.uid == created.metadata.uid


async def test_webhook_rejection_is_invalid_with_causes(api: Api, cluster_namespace: str) -> None:
    body = jobset("bad")
    body["spec"]["replicatedJobs"][0]["dependsOn"] = [{"name": "other", "status": "Ready"}]
    with pytest.raises(Invalid) as info:
        await api.create_jobset(body, namespace=cluster_namespace)
    assert info.value.status == 422
    messages = [cause.message for cause in info.value.causes]
    assert any("DependsOn can't be set for the first ReplicatedJob" in m for m in messages), (
        messages
    )


async def test_schema_rejection_is_invalid_with_field_paths(
    api: Api, cluster_namespace: str
) -> None:
    body = jobset("bad-enum", successPolicy={"operator": "Sometimes"})
    with pytest.raises(Invalid) as info:
        await api.server_side_dry_run_create_jobset(body, namespace=cluster_namespace)
    paths = [cause.path for cause in info.value.causes]
    assert "spec.successPolicy.operator" in paths, info.value.causes


async def test_unprivileged_identity_is_forbidden_with_the_missing_permission(
    devcluster: Any, cluster_namespace: str
) -> None:
    ns = cluster_namespace
    devcluster.core.create_namespaced_service_account(ns, {"metadata": {"name": "nobody"}})
    token = devcluster.core.create_namespaced_service_account_token(
        "nobody", ns, {"spec": {"expirationSeconds": 600}}
    ).status.token
    admin = yaml.safe_load(devcluster.kubeconfig.read_text())
    cluster = admin["clusters"][0]["cluster"]
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "dev", "cluster": cluster}],
        "users": [{"name": "nobody", "user": {"token": token}}],
        "contexts": [{"name": "nobody", "context": {"cluster": "dev", "user": "nobody"}}],
        "current-context": "nobody",
    }
    async with Client(ClientSettings(kubeconfig=kubeconfig)) as client:
        api = Api(client)
        with pytest.raises(Forbidden) as listing:
            await api.list_jobsets(namespace=ns)
        with pytest.raises(Forbidden) as creating:
            await api.create_jobset(jobset("nope"), namespace=ns)
        assert await client.may("list", JOBSET, namespace=ns) is False
        assert await client.may("list", JOBSET, namespace=None) is False
    assert listing.value.status == 403
    assert 'cannot list resource "jobsets" in API group "jobset.x-k8s.io"' in str(listing.value)
    assert 'cannot create resource "jobsets"' in str(creating.value)
    assert "jobsets.jobset.x-k8s.io" in listing.value.rbac_hint
    assert base64.b64decode(cluster["certificate-authority-data"])  # we really used TLS + CA


# ------------------------------------------------------------------ watches


def named(name: str) -> Callable[[WatchEvent[Any]], bool]:
    return lambda ev: ev.type is EventType.DELETED and _name(ev.object) == name


def _name(obj: Any) -> str:
    return obj.name if isinstance(obj, JobSet) else str(obj.get("metadata", {}).get("name", ""))


async def test_watch_from_a_list_sees_added_modified_deleted(
    api: Api, cluster_namespace: str
) -> None:
    ns = cluster_namespace
    start = await api.list_jobsets(namespace=ns)
    await api.create_jobset(jobset("watched", suspend=True), namespace=ns)
    await api.patch_jobset("watched", {"metadata": {"labels": {"seen": "yes"}}}, namespace=ns)
    await api.delete_jobset("watched", namespace=ns, propagation="Background")

    stream = api.watch_jobsets(
        namespace=ns, resource_version=start.resource_version, timeout_seconds=20
    )
    events = [
        ev for ev in await api.drain(stream, named("watched")) if ev.type is not EventType.BOOKMARK
    ]
    events = [WatchEvent(ev.type, decode_jobset(ev.object), ev.resource_version) for ev in events]
    kinds = [ev.type for ev in events]
    assert kinds[0] is EventType.ADDED and kinds[-1] is EventType.DELETED, kinds
    assert EventType.MODIFIED in kinds
    assert all(isinstance(ev.object, JobSet) and ev.resource_version for ev in events)
    labelled = [ev for ev in events if (ev.object.metadata.labels or {}).get("seen") == "yes"]
    assert labelled, "the patch was not seen"


async def test_a_quiet_watch_gets_periodic_bookmarks(api: Api, cluster_namespace: str) -> None:
    """The API server sends a bookmark about once a minute on a quiet watch (watch cache):
    the client's read timeout relies on it to tell a quiet watch from a dead connection."""
    start = await api.list_config_maps(namespace=cluster_namespace)
    started = time.monotonic()
    stream = api.watch_config_maps(
        namespace=cluster_namespace, resource_version=start.resource_version, timeout_seconds=90
    )
    events = await api.drain(stream, lambda ev: ev.type is EventType.BOOKMARK)
    assert events and events[-1].type is EventType.BOOKMARK, [ev.type for ev in events]
    assert events[-1].resource_version
    assert time.monotonic() - started < 85  # long before the watch's own end


async def test_a_too_old_resource_version_is_gone_and_a_relist_recovers(
    api: Api, cluster_namespace: str
) -> None:
    ns = cluster_namespace
    with pytest.raises(Gone) as info:
        await api.drain(api.watch_jobsets(namespace=ns, resource_version="1", timeout_seconds=5))
    assert info.value.status == 410
    relisted = await api.list_jobsets(namespace=ns)
    await api.create_jobset(jobset("after-relist", suspend=True), namespace=ns)
    stream = api.watch_jobsets(
        namespace=ns, resource_version=relisted.resource_version, timeout_seconds=10
    )
    events = await api.drain(stream, lambda ev: ev.type is EventType.ADDED)
    assert events[-1].type is EventType.ADDED
    assert events[-1].object["metadata"]["name"] == "after-relist"


# ------------------------------------------------------------------ Jobs, Services, ConfigMaps


async def test_anchor_owns_jobs_and_service_and_cascades(api: Api, cluster_namespace: str) -> None:
    ns = cluster_namespace
    anchor = await api.create_config_map(
        {"metadata": {"name": "anchor", "labels": {"run": "r1"}}, "data": {"phase": "new"}},
        namespace=ns,
    )
    owner = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "anchor",
        "uid": anchor["metadata"]["uid"],
        "blockOwnerDeletion": True,
    }
    start = await api.list_jobs(namespace=ns, label_selector={"run": "r1"})
    await api.create_job(job("child", labels={"run": "r1"}, ownerReferences=[owner]), namespace=ns)
    service = {
        "metadata": {"name": "child-svc", "labels": {"run": "r1"}, "ownerReferences": [owner]},
        "spec": {"clusterIP": "None", "selector": {"run": "r1"}},
    }
    await api.create_service(service, namespace=ns)

    stream = api.watch_jobs(
        namespace=ns,
        resource_version=start.resource_version,
        label_selector={"run": "r1"},
        timeout_seconds=10,
    )
    added = await api.drain(stream, lambda ev: ev.type is EventType.ADDED)
    assert added[-1].object["metadata"]["name"] == "child" and added[-1].object["kind"] == "Job"
    assert [j["metadata"]["name"] for j in (await api.list_jobs(namespace=ns)).items] == ["child"]
    assert (await api.get_job("child", namespace=ns))["spec"]["backoffLimit"] == 0
    assert (await api.get_service("child-svc", namespace=ns))["spec"]["clusterIP"] == "None"
    assert [
        s["metadata"]["name"]
        for s in (await api.list_services(namespace=ns, label_selector={"run": "r1"})).items
    ] == ["child-svc"]
    patched_job = await api.patch_job(
        "child", {"metadata": {"annotations": {"a": "b"}}}, namespace=ns
    )
    assert patched_job["metadata"]["annotations"]["a"] == "b"

    anchor_rv = anchor["metadata"]["resourceVersion"]
    cas = {"metadata": {"resourceVersion": anchor_rv}, "data": {"phase": "running"}}
    patched = await api.patch_config_map("anchor", cas, namespace=ns)
    assert patched["data"] == {"phase": "running"}
    with pytest.raises(Conflict):  # the same compare-and-swap again: the version moved on
        await api.patch_config_map("anchor", cas, namespace=ns)
    ops = [{"op": "add", "path": "/data/attempt", "value": "0"}]
    patched = await api.patch_config_map("anchor", ops, namespace=ns, patch_type="json")
    assert patched["data"] == {"phase": "running", "attempt": "0"}
    changes = await api.drain(
        api.watch_config_maps(
            namespace=ns,
            resource_version=anchor_rv,
            field_selector={"metadata.name": "anchor"},
            timeout_seconds=10,
        ),
        lambda ev: ev.type is EventType.MODIFIED and "attempt" in ev.object["data"],
    )
    modified = [ev for ev in changes if ev.type is EventType.MODIFIED]
    assert [ev.object["data"].get("attempt") for ev in modified] == [None, "0"]

    events = await eventually(
        lambda: _events_of(api, ns, "child"), desc="an Event about the Job from the job controller"
    )
    assert all(ev["involvedObject"]["name"] == "child" for ev in events)

    await api.delete_config_map("anchor", namespace=ns, propagation="Foreground")
    await eventually(lambda: gone(lambda: api.get_job("child", namespace=ns)), desc="Job collected")
    await eventually(
        lambda: gone(lambda: api.get_service("child-svc", namespace=ns)), desc="Service collected"
    )
    await eventually(
        lambda: gone(lambda: api.get_config_map("anchor", namespace=ns)), desc="anchor gone"
    )


async def _events_of(api: Api, ns: str, name: str) -> list[dict[str, Any]]:
    listing = await api.list_events(namespace=ns, field_selector={"involvedObject.name": name})
    return list(listing.items)


async def test_delete_of_a_job_and_service(api: Api, cluster_namespace: str) -> None:
    ns = cluster_namespace
    await api.create_job(job("lone"), namespace=ns)
    await api.create_service(
        {"metadata": {"name": "lone"}, "spec": {"clusterIP": "None"}}, namespace=ns
    )
    await api.delete_job("lone", namespace=ns)
    await api.delete_service("lone", namespace=ns)
    # Foreground: the objects linger (with a finalizer) until the garbage collector is done.
    await eventually(lambda: gone(lambda: api.get_job("lone", namespace=ns)), desc="Job deleted")
    await eventually(
        lambda: gone(lambda: api.get_service("lone", namespace=ns)), desc="Svc deleted"
    )
    with pytest.raises(NotFound):
        await api.delete_job("lone", namespace=ns)


# ------------------------------------------------------------------ Pods and logs


async def test_pods_and_their_logs(api: Api, cluster_namespace: str) -> None:
    ns = cluster_namespace
    annotations = {
        "devcluster/log": 'hello\n{"json": true}\nlast line',
        "devcluster/run-seconds": "1",
    }
    await api.create_job(job("talker", annotations=annotations), namespace=ns)
    start = await api.list_pods(namespace=ns, label_selector={"job-name": "talker"})
    stream = api.watch_pods(
        namespace=ns,
        resource_version=start.resource_version,
        label_selector={"job-name": "talker"},
        timeout_seconds=60,
    )
    seen = start.items + [
        ev.object for ev in await api.drain(stream, lambda ev: _phase(ev.object) == "Succeeded")
    ]
    assert seen and _phase(seen[-1]) == "Succeeded", [_phase(p) for p in seen]
    pod = seen[-1]["metadata"]["name"]
    assert (await api.get_pod(pod, namespace=ns))["status"]["phase"] == "Succeeded"
    listed = await api.list_pods(namespace=ns, label_selector={"job-name": "talker"})
    assert [p["metadata"]["name"] for p in listed.items] == [pod]

    text = await api.read_pod_log(pod, namespace=ns, container="main")
    assert text == 'hello\n{"json": true}\nlast line\n'  # JSON-looking lines stay text
    assert await api.read_pod_log(pod, namespace=ns, tail_lines=1) == "last line\n"
    lines = await api.drain(api.stream_pod_log(pod, namespace=ns, follow=False))
    assert lines == ["hello", '{"json": true}', "last line"]
    with pytest.raises(ApiError) as info:
        await api.read_pod_log(pod, namespace=ns, container="nope")
    assert info.value.status == 400


def _phase(pod: dict[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase", ""))


# ------------------------------------------------------------------ retries against a real 5xx


@pytest.fixture
def failing_webhook(devcluster: Any, cluster_namespace: str) -> Any:
    """A validating webhook nobody serves, for ConfigMaps of the test namespace only: the API
    server answers ``500 InternalError (failed calling webhook)`` to every such create."""
    name = f"unreachable-{cluster_namespace}"
    body = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "nobody.devcluster.test",
                "clientConfig": {"url": "https://127.0.0.1:1/validate"},
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["configmaps"],
                    }
                ],
                "namespaceSelector": {
                    "matchLabels": {"kubernetes.io/metadata.name": cluster_namespace}
                },
                "objectSelector": {"matchLabels": {"webhook": "fails"}},
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 2,
            }
        ],
    }
    from kubernetes import client

    admission = client.AdmissionregistrationV1Api(devcluster.api_client())
    admission.create_validating_webhook_configuration(body)
    try:
        yield name
    finally:
        admission.delete_validating_webhook_configuration(name)
        admission.api_client.close()


async def test_server_errors_are_retried_with_backoff_then_surface(
    settings: ClientSettings, cluster_namespace: str, failing_webhook: str
) -> None:
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)

    policy = RetryPolicy(max_attempts=3, base_delay=0.1, multiplier=3.0, jitter=0.0)
    cm = {"metadata": {"name": "blocked", "labels": {"webhook": "fails"}}}
    async with Client(settings, retry=policy, sleep=record) as client:
        api = Api(client)
        with pytest.raises(ServerError) as info:
            await api.create_config_map(cm, namespace=cluster_namespace)
        assert slept == pytest.approx([0.1, 0.3])
        assert (info.value.status, info.value.reason) == (500, "InternalError")
        assert "failed calling webhook" in info.value.message
        # Not matched by the webhook: goes straight through, no retries.
        slept.clear()
        await api.create_config_map({"metadata": {"name": "free"}}, namespace=cluster_namespace)
        assert slept == []
