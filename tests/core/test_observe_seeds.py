"""Runs that join a shared informer while it holds its scope take their objects from the hold;
runs that join after it get their older objects listed (a seed), and runs that join together
share the seed lists.

Found by the benchmark's scale family: at 100 namespaces with a per-namespace identity, every
trigger after its namespace's first listed its own JobSet, Jobs, pods and Events (five lists a
run): 3.21x the cncf anchor's requests at start. A burst of joiners now costs a list per kind
per round."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import pytest

from jobset_core.client import Client, ClientSettings
from jobset_core.observe import Observer, Target
from jobset_core.observe import _informer as informer_module
from jobset_core.observe._observer import seed_lists
from jobset_core.observe._views import Kind
from tests.cluster.bodies import jobset, replicated_job

NAME = "jobset.sigs.k8s.io/jobset-name"
UID = "kueue.x-k8s.io/job-uid"


MANY = [(f"r{i:03d}", f"u{i:03d}") for i in range(150)]


@pytest.mark.parametrize(
    ("kind", "runs", "lists"),
    [
        # one run: its own lists, as a one-off look
        (Kind.JOB, [("a", "1")], [(f"{NAME}=a", None, ("a",))]),
        (Kind.JOBSET, [("a", "1")], [(None, "metadata.name=a", ("a",))]),
        (
            Kind.EVENT,
            [("a", "1")],
            [
                (None, "involvedObject.name=a,type=Warning", ("a",)),
                (None, "involvedObject.kind=Job,reason=FailedCreate,type=Warning", ("a",)),
            ],
        ),
        (Kind.WORKLOAD, [("a", "1")], [(f"{UID}=1", None, ("a",))]),
        # several: lists for all, each saying whose objects it holds whole
        (Kind.POD, [("b", "2"), ("a", "1"), ("b", "2")], [(f"{NAME} in (a,b)", None, ("a", "b"))]),
        (Kind.JOB, [("a", "1"), ("c", "3")], [(f"{NAME} in (a,c)", None, ("a", "c"))]),
        (Kind.JOBSET, [("a", "1"), ("b", "2")], [(None, None, ("a", "b"))]),
        (Kind.ANCHOR, [("a", ""), ("b", "")], [("jobset-core/anchor=native", None, ("a", "b"))]),
        (Kind.EVENT, [("a", "1"), ("b", "2")], [(None, "type=Warning", ("a", "b"))]),
        (Kind.WORKLOAD, [("a", "2"), ("b", "1")], [(f"{UID} in (1,2)", None, ("a", "b"))]),
        (Kind.WORKLOAD, [("a", "1"), ("b", "")], [(UID, None, ("a", "b"))]),  # no UID yet
        # 150 names: two selectors of at most 100 (they go in the URL)
        (
            Kind.POD,
            MANY,
            [
                (
                    f"{NAME} in ({','.join(n for n, _ in MANY[:100])})",
                    None,
                    tuple(n for n, _ in MANY[:100]),
                ),
                (
                    f"{NAME} in ({','.join(n for n, _ in MANY[100:])})",
                    None,
                    tuple(n for n, _ in MANY[100:]),
                ),
            ],
        ),
        (Kind.JOBSET, MANY, [(None, None, tuple(n for n, _ in MANY))]),
    ],
)
def test_the_lists_of_a_seed(
    kind: Kind,
    runs: list[tuple[str, str]],
    lists: list[tuple[str | None, str | None, tuple[str, ...]]],
) -> None:
    assert list(seed_lists(kind, runs)) == lists


RUNS = 20


async def _join_after_first(
    devcluster: Any, namespace: str, *, hold: float | None, monkeypatch: pytest.MonkeyPatch
) -> int:
    """One run starts the namespace's informers; once they listed (and, with ``hold``, once
    their hold ended), 20 runs join at once. Each sees its JobSet and its Jobs. Returns the
    lists the joins cost."""
    if hold is not None:
        monkeypatch.setattr(informer_module, "HOLD_SECONDS", hold)
    names = ["first"] + [f"seed-{i:02d}" for i in range(RUNS)]
    for name in names:
        devcluster.create_jobset(
            namespace, jobset(name, replicated_job("w", replicas=2), suspend=True)
        )
    deadline = time.monotonic() + 60
    while len(devcluster.batch.list_namespaced_job(namespace).items) < 2 * len(names):
        assert time.monotonic() < deadline, "the controller made no Jobs"
        await asyncio.sleep(0.3)
    client = Client(ClientSettings(kubeconfig_path=str(devcluster.kubeconfig)))
    async with client, contextlib.AsyncExitStack() as stack:
        observer = Observer(client, scope="namespace")
        stack.push_async_callback(observer.aclose)
        first = await stack.enter_async_context(
            observer.track(Target("controller", namespace, "first"))
        )
        while not first.observation().synced:
            await first.changed(1.0)
        if hold is not None:
            await asyncio.sleep(hold + 0.5)
            assert observer.stats()["kept"]["held_runs"] == 0
        else:
            assert observer.stats()["kept"]["held_runs"] == RUNS
        lists_before = client.stats.requests.get("list", 0)
        joined = await asyncio.gather(
            *(
                stack.enter_async_context(observer.track(Target("controller", namespace, name)))
                for name in names[1:]
            )
        )
        lists = client.stats.requests.get("list", 0) - lists_before
        for one in joined:
            seen = one.observation()
            assert seen.synced, one.key
            assert seen.jobset is not None and seen.jobset["metadata"]["name"] == one.key[1]
            assert len(seen.jobs) == 2, (one.key, [j["metadata"]["name"] for j in seen.jobs])
        assert observer.stats()["kept"]["held_runs"] == 0
    return lists


@pytest.mark.cluster
@pytest.mark.timeout(240)
async def test_runs_joining_during_the_hold_need_no_list(
    devcluster: Any, cluster_namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within the informers' hold (a triggerer's start), joining costs no request: the runs'
    objects were kept from the namespace's list on."""
    lists = await _join_after_first(
        devcluster, cluster_namespace, hold=None, monkeypatch=monkeypatch
    )
    assert lists == 0


@pytest.mark.cluster
@pytest.mark.timeout(240)
async def test_runs_joining_together_after_the_hold_share_their_seed_lists(
    devcluster: Any, cluster_namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the hold, joiners get their older objects listed, together: a few lists per
    kind instead of five a run (100)."""
    lists = await _join_after_first(
        devcluster, cluster_namespace, hold=0.5, monkeypatch=monkeypatch
    )
    kinds = len(Target("controller", cluster_namespace, "x").kinds)
    # One round for the first joiner (its own five lists), one for the others together;
    # a third when a joiner came late to the second. Without sharing: 5 x 20 = 100.
    assert kinds <= lists <= 3 * (kinds + 1), lists
