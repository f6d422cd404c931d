"""A create whose answer is lost (the API server, or whatever is in between, dies after the
object was stored and before the client heard) is repeated, and the repeat's 409 is taken as
what it is: the run's own object, adopted once its identity labels match.

Before, a lost answer to a create surfaced at once as ``Unreachable``: the soak's API-server
restart made a task's retries fail one after another within seconds (each try's create lost),
until Airflow had no tries left, with the JobSet or anchor left behind.

The other race of a create's 409: the namesake it met (an earlier try's run, being deleted) is
gone when it is read; the create is tried again. Before, the read's 404 ended the try (a cold
CI run's RBAC proof met it). Both backends, both faces, on the real local control plane behind
the fault proxy (``tests/cluster/faultproxy.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from jobset_core.models import JobSet
from jobset_core.outcome import Phase
from tests.cluster.faultproxy import FaultProxy
from tests.cluster.holds import hold, hold_child
from tests.core._runs import FLAVOURS, open_face

pytestmark = pytest.mark.cluster

IDENTITY = {"run": "lost-answers"}
POD = {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}


def manifest(name: str) -> JobSet:
    pod = {"metadata": {"annotations": {"devcluster/run-seconds": "0.5"}}, "spec": POD}
    rjob = {"name": "workers", "replicas": 2, "template": {"spec": {"template": pod}}}
    return JobSet.model_validate({"metadata": {"name": name}, "spec": {"replicatedJobs": [rjob]}})


@pytest.fixture
def proxy(devcluster: Any) -> Iterator[FaultProxy]:
    with FaultProxy(devcluster.state_dir) as running:
        yield running


@pytest.fixture
def proxied(proxy: FaultProxy, cluster_namespace: str, tmp_path: Path) -> Path:
    """A kubeconfig through the proxy (it ends TLS: a token, no client certificate)."""
    kubeconfig = tmp_path / "proxied.kubeconfig"
    proxy.admin_kubeconfig(kubeconfig, user="proxied", namespace=cluster_namespace)
    return kubeconfig


def run_objects(devcluster: Any, namespace: str, backend: str) -> list[str]:
    if backend == "controller":
        items = devcluster.custom.list_namespaced_custom_object(
            "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets"
        )["items"]
        return [item["metadata"]["name"] for item in items]
    anchors = devcluster.core.list_namespaced_config_map(
        namespace, label_selector="jobset-core/anchor=native"
    ).items
    return [anchor.metadata.name for anchor in anchors]


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize(
    ("backend", "lost"),
    [
        ("controller", 1),  # the JobSet's create (the controller makes the Jobs)
        ("native", 4),  # the anchor's, the Service's and both Jobs' creates
    ],
)
async def test_a_create_whose_answer_is_lost_is_repeated_and_adopted(
    *,
    backend: str,
    lost: int,
    flavour: str,
    devcluster: Any,
    proxy: FaultProxy,
    cluster_namespace: str,
    proxied: Path,
) -> None:
    proxy.lose_answers("create", lost)
    async with open_face(flavour, proxied, backend) as face:  # type: ignore[arg-type]
        submitted = await face.submit(
            manifest("lost"), namespace=cluster_namespace, identity=IDENTITY
        )
        # The first create took effect; its repeat met it (409) and adopted it.
        assert not submitted.created
        assert run_objects(devcluster, cluster_namespace, backend) == ["lost"]
        outcome = await face.wait(submitted.handle, timeout=90)
    assert proxy.stats.answers_lost == lost
    assert outcome.phase is Phase.COMPLETED, outcome
    jobs = devcluster.batch.list_namespaced_job(cluster_namespace).items
    assert sorted(j.metadata.name for j in jobs) == ["lost-workers-0", "lost-workers-1"]


RESOURCE = {"controller": "jobsets", "native": "configmaps"}


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("backend", ["controller", "native"])
async def test_a_namesake_gone_between_the_creates_409_and_its_read_means_create_again(
    *,
    backend: str,
    flavour: str,
    devcluster: Any,
    proxy: FaultProxy,
    cluster_namespace: str,
    proxied: Path,
) -> None:
    async with open_face(flavour, proxied, backend) as face:  # type: ignore[arg-type]
        first = await face.submit(
            manifest("vanish"), namespace=cluster_namespace, identity=IDENTITY
        )
        hold(devcluster, backend, cluster_namespace, "vanish", True)
        await face.delete(first.handle, wait=False)
        # The start's create meets the run being deleted (409); its read of that namesake is
        # held at the proxy while the namesake goes, then reaches the API server: 404.
        read = proxy.hold_next("get", RESOURCE[backend], "vanish")
        start = asyncio.ensure_future(
            face.submit(manifest("vanish"), namespace=cluster_namespace, identity=IDENTITY)
        )
        try:
            assert await asyncio.to_thread(read.reached.wait, 60), "the create met no namesake"
            hold(devcluster, backend, cluster_namespace, "vanish", False)
            ends = time.monotonic() + 60
            while run_objects(devcluster, cluster_namespace, backend):
                assert time.monotonic() < ends, "the held namesake did not go"
                await asyncio.sleep(0.2)
            read.release()
            second = await asyncio.wait_for(start, 90)
        finally:
            read.release()
            start.cancel()
        assert second.created and second.handle.uid != first.handle.uid
        assert run_objects(devcluster, cluster_namespace, backend) == ["vanish"]
        outcome = await face.wait(second.handle, timeout=90)
    assert outcome.phase is Phase.COMPLETED, outcome


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_an_older_runs_children_still_going_hold_the_creates_back_without_a_loop(
    *,
    flavour: str,
    devcluster: Any,
    proxy: FaultProxy,
    cluster_namespace: str,
    proxied: Path,
) -> None:
    """The earlier run's anchor was deleted in the background (``kubectl delete``'s default):
    its Jobs and Service are still going when the same run starts again. The new run's creates
    meet them (409, owned by the old anchor); it tries again after a backoff or when they go,
    not at once (before, a pass followed a pass: hundreds of creates a second, which on a cold
    CI run slowed the garbage collector past the wait's 90 s), and it ends with a Service of
    its own (before, the old one was taken for it and then collected)."""
    ns = cluster_namespace
    async with open_face(flavour, proxied, "native") as face:
        first = await face.submit(manifest("again"), namespace=ns, identity=IDENTITY)
        children = [("Job", "again-workers-0"), ("Job", "again-workers-1"), ("Service", "again")]
        waiting: asyncio.Future[Any] | None = None
        try:
            for kind, name in children:
                hold_child(devcluster, kind, ns, name, True)
            devcluster.core.delete_namespaced_config_map(
                "again", ns, propagation_policy="Background"
            )
            ends = time.monotonic() + 60
            while run_objects(devcluster, ns, "native"):
                assert time.monotonic() < ends, "the anchor did not go"
                await asyncio.sleep(0.2)
            second = await face.submit(manifest("again"), namespace=ns, identity=IDENTITY)
            assert second.created and second.handle.uid != first.handle.uid
            waiting = asyncio.ensure_future(face.wait(second.handle, timeout=90))
            # The old run's pods end meanwhile (each change of them is one more pass); then
            # nothing changes, and only the backoff's passes try again, three creates each.
            await asyncio.sleep(4)
            before = proxy.stats.by_verb.get("create", 0)
            await asyncio.sleep(3)
            creates = proxy.stats.by_verb.get("create", 0) - before
            assert creates <= 9, f"{creates} creates in 3 s while the namesakes were going"
            # The Service first (its going is not watched), then the Jobs (their going is).
            hold_child(devcluster, "Service", ns, "again", False)
            while any(s.metadata.name == "again" for s in services(devcluster, ns)):
                assert time.monotonic() < ends + 60, "the old Service did not go"
                await asyncio.sleep(0.2)
            for kind, name in children[:2]:
                hold_child(devcluster, kind, ns, name, False)
            outcome = await asyncio.wait_for(waiting, 120)
        finally:  # nothing held or waiting is left behind
            if waiting is not None:
                waiting.cancel()
            for kind, name in children:
                with contextlib.suppress(ApiException):
                    hold_child(devcluster, kind, ns, name, False)
    assert outcome.phase is Phase.COMPLETED, outcome
    (service,) = [s for s in services(devcluster, ns) if s.metadata.name == "again"]
    assert [o.uid for o in service.metadata.owner_references] == [second.handle.uid]


def services(devcluster: Any, namespace: str) -> list[Any]:
    return list(devcluster.core.list_namespaced_service(namespace).items)
