"""Kueue in the devcluster: a labelled JobSet is suspended by Kueue's webhook, gets a
Workload, is admitted and runs to completion on the kwok nodes; a second one over the
ClusterQueue's quota stays queued until the first finishes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cluster.bodies import jobset, replicated_job
from tests.cluster.queues import (
    LOCAL_QUEUE,
    QUEUE_LABEL,
    condition,
    create_local_queue,
    workload_of,
)

pytestmark = [pytest.mark.cluster, pytest.mark.kueue]


def queued(name: str, cpu: str, run_seconds: int) -> dict[str, Any]:
    """A JobSet of one pod requesting ``cpu`` CPUs, in the test LocalQueue."""
    rjob = replicated_job("w", annotations={"devcluster/run-seconds": str(run_seconds)})
    pod = rjob["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["resources"] = {"requests": {"cpu": cpu, "memory": "1Gi"}}
    body = jobset(name, rjob)
    body["metadata"]["labels"] = {QUEUE_LABEL: LOCAL_QUEUE}
    return body


def status_of(cond: dict[str, Any] | None) -> str | None:
    return cond["status"] if cond else None


def test_queued_jobsets_are_admitted_within_the_quota(devcluster, cluster_namespace):
    ns = cluster_namespace
    create_local_queue(devcluster.custom, ns)
    first = devcluster.create_jobset(ns, queued("first", cpu="3", run_seconds=8))
    assert first["spec"].get("suspend") is True  # Kueue's webhook suspends it at creation
    wl1 = devcluster.wait_for(
        lambda: workload_of(devcluster.custom, ns, first["metadata"]["uid"]),
        timeout=60,
        desc="the first JobSet's Workload",
    )
    devcluster.wait_for(
        lambda: (
            status_of(
                condition(workload_of(devcluster.custom, ns, first["metadata"]["uid"]), "Admitted")
            )
            == "True"
        ),
        timeout=60,
        desc="the first Workload admitted",
    )
    second = devcluster.create_jobset(ns, queued("second", cpu="3", run_seconds=1))
    wl2 = devcluster.wait_for(
        lambda: (
            (w := workload_of(devcluster.custom, ns, second["metadata"]["uid"]))
            and condition(w, "QuotaReserved")
            and w
        ),
        timeout=60,
        desc="the second Workload judged",
    )
    # 3 + 3 CPUs exceed the ClusterQueue's 4: the second waits while the first runs
    assert status_of(condition(wl2, "QuotaReserved")) == "False", wl2.get("status")
    assert devcluster.get_jobset(ns, "second")["spec"]["suspend"] is True
    assert not devcluster.get_jobset(ns, "first")["spec"].get("suspend")
    js1 = devcluster.wait_jobset_terminal(ns, "first")
    assert js1["status"]["terminalState"] == "Completed"
    assert wl1["metadata"]["ownerReferences"][0]["uid"] == first["metadata"]["uid"]
    js2 = devcluster.wait_jobset_terminal(ns, "second", timeout=120)
    assert js2["status"]["terminalState"] == "Completed"
    # Kueue marks the Workload finished once it has seen the JobSet end: a moment later.
    done = devcluster.wait_for(
        lambda: (
            (w := workload_of(devcluster.custom, ns, second["metadata"]["uid"]))
            and status_of(condition(w, "Finished")) == "True"
            and w
        ),
        timeout=60,
        desc="the second Workload finished",
    )
    assert status_of(condition(done, "Admitted")) == "True" or condition(done, "Finished")
    nodes = {p.spec.node_name for p in devcluster.core.list_namespaced_pod(ns).items}
    assert all(n and n.startswith("devcluster-node-") for n in nodes), nodes


def test_an_unlabelled_jobset_is_not_kueues(devcluster, cluster_namespace):
    create_local_queue(devcluster.custom, cluster_namespace)
    body = jobset("plain", replicated_job("w"))
    created = devcluster.create_jobset(cluster_namespace, body)
    assert not created["spec"].get("suspend")
    js = devcluster.wait_jobset_terminal(cluster_namespace, "plain")
    assert js["status"]["terminalState"] == "Completed"
    assert workload_of(devcluster.custom, cluster_namespace, created["metadata"]["uid"]) is None
