"""Refusals that retrying cannot fix are asked once, not once a run: an identity that may not
read Kueue's Workloads (the optional Role not bound) tracks runs one after the other in a
namespace, as a long-lived triggerer does for tasks that come and go; the first run's list of
Workloads is refused (403) and the next runs reuse that answer instead of asking again.

Found by the benchmark's scale family: 40 refused Workload lists at start for 330 tasks in
10 namespaces (four a namespace), as runs left and joined."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import pytest

from jobset_core.client import Client, ClientSettings
from jobset_core.errors import Forbidden
from jobset_core.observe import Kind, Observer, Target
from jobset_core.observe import _observer as observer_module
from tests.cluster.bodies import jobset, replicated_job

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

RUNS = 3


class Counting:
    """Counts the lists the client sends, by resource (every call still reaches the server)."""

    def __init__(self, client: Client) -> None:
        self.lists: Counter[str] = Counter()
        real = client.list

        async def counted(resource: Any, **kwargs: Any) -> Any:
            self.lists[resource.plural] += 1
            return await real(resource, **kwargs)

        client.list = counted  # type: ignore[method-assign]


async def track_one_after_the_other(observer: Observer, namespace: str) -> list[Any]:
    problems = []
    for i in range(RUNS):
        target = Target("controller", namespace, f"run-{i}")
        async with observer.track(target) as tracked:
            while not tracked.observation().synced:
                await tracked.changed(1.0)
            problems.append(observer.informer_problem(Kind.WORKLOAD, target))
    return problems


@pytest.mark.parametrize("scope", ["namespace", "run"])
async def test_a_refused_kind_is_asked_once_for_runs_one_after_the_other(
    devcluster: Any, cluster_namespace: str, tmp_path: Any, scope: str, caplog: Any
) -> None:
    from tests.cluster.identities import least_privilege

    ns = cluster_namespace
    roles = ["jobset-airflow-triggerer-controller"]  # not the Kueue reader
    who = least_privilege(devcluster, ns, tmp_path, "no-workloads", roles, ttl=600)
    for i in range(RUNS):
        devcluster.create_jobset(ns, jobset(f"run-{i}", replicated_job("w"), suspend=True))
    client = Client(ClientSettings(kubeconfig_path=str(who.kubeconfig)))
    async with client:
        counting = Counting(client)
        observer = Observer(client, scope=scope)  # type: ignore[arg-type]
        try:
            problems = await track_one_after_the_other(observer, ns)
        finally:
            await observer.aclose()
    assert all(isinstance(p, Forbidden) for p in problems), problems
    # Kept for good, without the frames of the request that failed (its answer, its stream).
    assert all(p.__traceback__ is None for p in problems), problems
    assert counting.lists["workloads"] == 1, counting.lists
    assert counting.lists["jobsets"] == RUNS, counting.lists  # the others are asked each time
    # ...and that one list is sent once: an expected refusal is not retried as a restarting
    # API server's would be (3.5 s before the first sync), nor warned about in every task log.
    assert client.stats.retries == 0, client.stats
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not [m for m in warned if "403" in m or "Forbidden" in m], warned


async def test_a_refusal_is_asked_again_once_remembered_long_enough(
    devcluster: Any, cluster_namespace: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Role bound meanwhile is seen: the memory runs out (shortened here to none)."""
    from tests.cluster.identities import least_privilege

    ns = cluster_namespace
    roles = ["jobset-airflow-triggerer-controller"]
    who = least_privilege(devcluster, ns, tmp_path, "no-workloads", roles, ttl=600)
    for i in range(RUNS):
        devcluster.create_jobset(ns, jobset(f"run-{i}", replicated_job("w"), suspend=True))
    monkeypatch.setattr(observer_module, "REFUSAL_MEMORY", 0.0)
    client = Client(ClientSettings(kubeconfig_path=str(who.kubeconfig)))
    async with client:
        counting = Counting(client)
        observer = Observer(client, scope="namespace")
        try:
            await track_one_after_the_other(observer, ns)
        finally:
            await observer.aclose()
    assert counting.lists["workloads"] == RUNS, counting.lists


async def test_a_run_that_joins_a_refused_informer_is_whole(
    devcluster: Any, cluster_namespace: str, tmp_path: Any
) -> None:
    """A run that comes while another holds an informer refused for good (a triggerer's
    triggers starting together: the first one's Workload list was refused while the rest were
    still joining) has that kind as the first run has it: nothing, and known. It never stayed
    incomplete: the JobSet's deletion would never have become a verdict, and a judge that
    waits for the whole run would never have judged it."""
    from tests.cluster.identities import least_privilege

    ns = cluster_namespace
    roles = ["jobset-airflow-triggerer-controller"]
    who = least_privilege(devcluster, ns, tmp_path, "no-workloads", roles, ttl=600)
    for i in range(2):
        devcluster.create_jobset(ns, jobset(f"run-{i}", replicated_job("w"), suspend=True))
    client = Client(ClientSettings(kubeconfig_path=str(who.kubeconfig)))
    async with client:
        observer = Observer(client, scope="namespace")  # one informer per kind, shared
        try:
            first = Target("controller", ns, "run-0")
            async with observer.track(first) as one:
                assert await one.until(lambda seen: seen.synced or None, 60)
                assert isinstance(observer.informer_problem(Kind.WORKLOAD, first), Forbidden)
                second = Target("controller", ns, "run-1")
                async with observer.track(second) as other:
                    whole = await other.until(lambda seen: seen.synced or None, 30)
                    assert whole, other.observation()
                    assert other.observation().jobset is not None
        finally:
            await observer.aclose()
