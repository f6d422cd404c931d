"""The trigger on the devcluster: many triggers of one process share one client and one
informer per kind; the deadline fires ``timeout``; a deleted JobSet fires ``gone``; the event
loop is never blocked (asyncio debug mode)."""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from typing import Any

import pytest

from airflow_provider_jobset.triggers import JobSetTrigger
from jobset_core.lifecycle import Deadline, Handle, RunRequest, Verdict
from jobset_core.observe import shared_stats
from tests.airflow._run_op import first_event

pytestmark = [pytest.mark.cluster, pytest.mark.airflow]


def body(name: str, annotations: dict[str, str], *, suspend: bool = False) -> dict[str, Any]:
    pod = {
        "metadata": {"annotations": annotations},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
    }
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {
            "suspend": suspend,
            "replicatedJobs": [
                {
                    "name": "w",
                    "replicas": 1,
                    "template": {"spec": {"backoffLimit": 0, "template": pod}},
                }
            ],
        },
    }


def trigger_of(name: str, namespace: str, **request: Any) -> JobSetTrigger:
    """The trigger a deferred operator hands its JobSet to (``request``: more of the
    request it carries)."""
    return JobSetTrigger(
        handle=Handle(name, namespace, "", "controller"),
        request=RunRequest(namespace=namespace, on_restart="return", **request),
    )


async def fire(trigger: JobSetTrigger, timeout: float = 120) -> Verdict:
    event = await asyncio.wait_for(first_event(trigger), timeout)
    return Verdict.model_validate(event.payload)


@pytest.mark.alone  # a 100 ms callback is wall time: other tests' load would stretch it
async def test_triggers_share_one_client_and_one_watch(
    cluster_namespace: str, kube_conn: str, devcluster: Any
) -> None:
    names = [f"shared-{i}" for i in range(6)]
    for i, name in enumerate(names):
        devcluster.create_jobset(
            cluster_namespace,
            body(
                name,
                {"devcluster/run-seconds": str(3 + i % 3), "devcluster/termination-message": name},
            ),
        )
    # This process holds every collected test module: a full collection of that heap takes
    # about 0.3 s, whoever allocates when it comes, and is not the triggers' doing. Freeze it
    # first, as the first lease does with a triggerer's start-up state (see _import_client).
    gc.collect()
    gc.freeze()
    loop = asyncio.get_running_loop()
    loop.set_debug(True)  # report any callback that blocks the loop for 100 ms or more
    slow: list[str] = []
    handler = _SlowCallbacks(slow)
    logging.getLogger("asyncio").addHandler(handler)
    try:
        triggers = [trigger_of(n, cluster_namespace) for n in names]
        runs = [asyncio.ensure_future(fire(t)) for t in triggers]
        await asyncio.sleep(2)
        (shared,) = shared_stats().values()  # one observer (one client) for every trigger
        assert shared["leases"] == len(names)
        # One informer per kind, whatever the number of triggers (cluster-wide for the admin);
        # Kueue's Workloads are a kind of their own.
        assert shared["informers"] == {"event": 1, "job": 1, "jobset": 1, "pod": 1, "workload": 1}
        assert shared["kept"]["runs"] == len(names)
        verdicts = await asyncio.gather(*runs)
    finally:
        logging.getLogger("asyncio").removeHandler(handler)
        loop.set_debug(False)
        gc.unfreeze()
    assert [v.kind for v in verdicts] == ["completed"] * len(names)
    assert [v.result for v in verdicts] == names
    assert shared_stats() == {}  # the last lease closed the observer and its client
    assert slow == []


async def test_deadline_fires_timeout(
    cluster_namespace: str, kube_conn: str, devcluster: Any
) -> None:
    devcluster.create_jobset(
        cluster_namespace, body("forever", {"devcluster/never-finish": "true"})
    )
    trigger = trigger_of(
        "forever", cluster_namespace, deadline=Deadline(timeout=3).begin(time.time())
    )
    verdict = await fire(trigger, 60)
    assert verdict.kind == "timeout" and "did not finish within" in verdict.message
    assert devcluster.get_jobset(cluster_namespace, "forever")  # a timeout deletes nothing


async def test_deleted_jobset_fires_gone(
    cluster_namespace: str, kube_conn: str, devcluster: Any
) -> None:
    devcluster.create_jobset(cluster_namespace, body("doomed", {"devcluster/never-finish": "true"}))
    trigger = trigger_of("doomed", cluster_namespace)
    run = asyncio.ensure_future(fire(trigger, 90))
    await asyncio.sleep(2)
    devcluster.delete_jobset(cluster_namespace, "doomed")
    verdict = await run
    assert verdict.kind == "gone" and "was deleted" in verdict.message


async def test_cleanup_never_deletes(
    cluster_namespace: str, kube_conn: str, devcluster: Any
) -> None:
    devcluster.create_jobset(cluster_namespace, body("kept", {"devcluster/never-finish": "true"}))
    trigger = trigger_of("kept", cluster_namespace)
    run = asyncio.ensure_future(fire(trigger))
    await asyncio.sleep(2)
    run.cancel()  # what a triggerer restart does
    await trigger.cleanup()
    assert devcluster.get_jobset(cluster_namespace, "kept")["metadata"]["name"] == "kept"


class _SlowCallbacks(logging.Handler):
    """Collects asyncio debug mode's "Executing ... took N seconds" warnings."""

    def __init__(self, found: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.found = found

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "took" in message and "seconds" in message:
            self.found.append(message)


#: More namespaces than the 100 connections of the client's request pool: the old design
#: (one watch per namespace on that pool) stalled past it.
WIDE_NAMESPACES = 110
TRIGGERS_PER_NAMESPACE = 2


def _resume(devcluster: Any, namespace: str, name: str) -> None:
    devcluster.custom.patch_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", name, {"spec": {"suspend": False}}
    )


@pytest.mark.timeout(900)
async def test_triggers_in_more_namespaces_than_connections_all_fire(
    devcluster: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A triggerer whose identity may list only namespace by namespace (a Role bound in each
    of 110 namespaces, as a team's triggerer would have): 220 triggers, one observer, one
    informer per kind and namespace, each on a stream of its own; every trigger fires."""
    import json
    from concurrent.futures import ThreadPoolExecutor

    from tests.kfp._cluster import kubeconfig_as_account

    home = devcluster.create_namespace("wide-home")
    with ThreadPoolExecutor(8) as pool:
        namespaces = list(
            pool.map(lambda i: devcluster.create_namespace(f"wide{i}"), range(WIDE_NAMESPACES))
        )
    try:
        for namespace in namespaces:
            _bind_across(devcluster, namespace, home)
        kubeconfig = kubeconfig_as_account(devcluster, home, tmp_path)
        conn = {"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}}
        monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", json.dumps(conn))
        names = [
            (namespace, f"wide-{i}")
            for namespace in namespaces
            for i in range(TRIGGERS_PER_NAMESPACE)
        ]
        with ThreadPoolExecutor(8) as pool:
            list(
                pool.map(
                    lambda item: devcluster.create_jobset(
                        item[0],
                        body(
                            item[1],
                            {
                                "devcluster/run-seconds": "2",
                                "devcluster/termination-message": item[1],
                            },
                            suspend=True,
                        ),
                    ),
                    names,
                )
            )
        started = time.monotonic()
        runs = [asyncio.ensure_future(fire(trigger_of(n, ns), timeout=600)) for ns, n in names]
        # Suspended until every trigger watches (on a loaded machine, JobSets that ran at
        # once ended before the last triggers started, and their informers were gone).
        peak: dict[str, Any] = {}
        ready = time.monotonic() + 300
        while time.monotonic() < ready and not all(r.done() for r in runs):
            await asyncio.sleep(1)
            (shared,) = shared_stats().values() or ({},)
            if shared and shared["client"]["watches_open"] >= peak.get("client", {}).get(
                "watches_open", 0
            ):
                peak = shared
            if peak.get("client", {}).get("watches_open", 0) >= 4 * WIDE_NAMESPACES:
                break
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda item: _resume(devcluster, *item), names))
        verdicts = await asyncio.gather(*runs)
        took = time.monotonic() - started
    finally:
        for namespace in [home, *namespaces]:
            devcluster.delete_namespace(namespace)
    assert [v.kind for v in verdicts] == ["completed"] * len(names)
    assert [v.result for v in verdicts] == [n for _, n in names]
    print(f"{len(names)} triggers in {len(namespaces)} namespaces fired in {took:.1f}s: {peak}")
    # Namespace by namespace (no cluster-wide list for this identity): one informer per kind
    # and namespace, all streaming at once: 4 x 110 watches, past the 100-connection pool
    # (the Role does not read Kueue's Workloads: those informers stop at their first 403).
    assert peak["scope"] == "auto" and peak["cluster_wide"] == {
        "event": False,
        "job": False,
        "jobset": False,
        "pod": False,
        "workload": False,
    }
    kinds = ("event", "job", "jobset", "pod", "workload")
    assert peak["informers"] == {k: WIDE_NAMESPACES for k in kinds}
    assert peak["client"]["watches_open"] >= 4 * WIDE_NAMESPACES
    assert shared_stats() == {}


def _bind_across(devcluster: Any, namespace: str, home: str) -> None:
    """The controller backend's launcher Role in ``namespace``, bound to the account of
    ``home`` (a RoleBinding may name a service account of another namespace)."""
    import yaml
    from kubernetes import client

    from tests.kfp._cluster import RBAC

    rbac = client.RbacAuthorizationV1Api(devcluster.api_client())
    text = (RBAC / "jobset-launcher-controller.yaml").read_text(encoding="utf-8")
    for document in yaml.safe_load_all(text):
        document["metadata"]["namespace"] = namespace
        if document["kind"] == "Role":
            rbac.create_namespaced_role(namespace, document)
        else:
            document["subjects"][0]["namespace"] = home
            rbac.create_namespaced_role_binding(namespace, document)


async def test_the_trigger_follows_the_logs_while_it_waits(
    cluster_namespace: str, kube_conn: str, devcluster: Any
) -> None:
    """Deferred, the lines go to the trigger's log (Airflow 3 shows it in the task's log),
    each prefixed with its pod, before the verdict; the run's cursor is kept on the JobSet."""
    from jobset_core.lifecycle import LogOptions
    from jobset_core.lifecycle._logs import CURSOR_ANNOTATION

    notes = {"devcluster/log": "epoch 1\nepoch 2", "devcluster/run-seconds": "2"}
    document = body("chatty", notes)
    document["spec"]["replicatedJobs"][0]["replicas"] = 2
    devcluster.create_jobset(cluster_namespace, document)
    trigger = trigger_of("chatty", cluster_namespace, logs=LogOptions(pods="all"))
    said: list[str] = []
    info = trigger.log.info

    def tap(msg: str, *args: Any) -> None:
        said.append(msg % args)
        info(msg, *args)

    trigger.log.info = tap  # type: ignore[method-assign]
    verdict = await fire(trigger, 90)
    assert verdict.kind == "completed", verdict
    lines = [m for m in said if m.startswith("[chatty-w-")]
    assert len(lines) == 4 and {m.split("] ", 1)[1] for m in lines} == {"epoch 1", "epoch 2"}
    assert said.index(lines[-1]) < next(i for i, m in enumerate(said) if "completed (" in m)
    annotations = devcluster.get_jobset(cluster_namespace, "chatty")["metadata"]["annotations"]
    assert CURSOR_ANNOTATION in annotations


def test_a_trigger_dropped_after_its_event_leaves_nothing_open(
    cluster_namespace: str, kube_conn: str, devcluster: Any
) -> None:
    """``dag.test()`` runs a trigger as Airflow's in-process supervisor does: the first event
    on an event loop of its own, then the loop closes. A native run's settled end fires while
    its status write is still on its way; nothing the trigger used may be left open (asyncio
    reports what is, through the loop's exception handler, as an error in the task's log)."""
    from jobset_core.lifecycle import ClientSettings, blocking
    from jobset_core.models import load_jobset

    request = RunRequest(
        jobset=load_jobset(body("dropped", {"devcluster/run-seconds": "2"})),
        namespace=cluster_namespace,
        backend="native",
    )
    settings = ClientSettings(kubeconfig_path=str(devcluster.kubeconfig))
    started = blocking(settings, lambda lifecycle: lifecycle.start(request))
    trigger = JobSetTrigger(
        handle=started.handle,
        request=RunRequest(namespace=cluster_namespace, on_restart="return", backend="native"),
    )
    reported: list[dict[str, Any]] = []

    async def as_dag_test_runs_it() -> Any:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, context: reported.append(context))
        return await anext(trigger.run(), None)

    event = asyncio.run(as_dag_test_runs_it())
    gc.collect()  # what nothing closed is reported when it is collected
    assert Verdict.model_validate(event.payload).kind == "completed"
    assert [c.get("message") for c in reported] == []
