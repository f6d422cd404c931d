"""Runs that start being tracked while a shared informer's first list is still paging: their
objects may be on a page read before they joined (and dropped then: nobody tracked them), so
that list must not count as complete for them. On the devcluster, with one object a page.

Found by the benchmark's sensor fleet: with 1,000 triggers starting at once over 100
namespaces, 303 of them saw their JobSet "deleted before it finished" while it ran. Such a run
then had the whole kind listed again for it (and for every few joiners after it: 150 lists at
1,000 runs); now it gets its own objects listed, with the others that joined meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import pytest

from jobset_core.client import Client, ClientSettings
from jobset_core.observe import Observer, Target
from tests.cluster.bodies import jobset, replicated_job

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

RUNS = 24


async def test_runs_that_join_during_the_first_list_see_their_objects(
    devcluster: Any, cluster_namespace: str
) -> None:
    names = [f"join-{i:02d}" for i in range(RUNS)]
    for name in names:
        devcluster.create_jobset(  # suspended: objects only, nothing runs
            cluster_namespace, jobset(name, replicated_job("w"), suspend=True)
        )
    client = Client(ClientSettings(kubeconfig_path=str(devcluster.kubeconfig)))
    async with client:
        observer = Observer(client, scope="namespace", page_size=1)  # a page per object
        try:
            async with contextlib.AsyncExitStack() as stack:
                tracked = []
                for name in names:  # one after the other, while the first lists page by page
                    target = Target("controller", cluster_namespace, name)
                    tracked.append(await stack.enter_async_context(observer.track(target)))
                    await asyncio.sleep(0.02)
                deadline = time.monotonic() + 60
                for one in tracked:
                    while not one.observation().synced:
                        assert time.monotonic() < deadline, f"{one.key} never synced"
                        await one.changed(1.0)
                    seen = one.observation().jobset
                    assert seen is not None, f"{one.key}: synced without its JobSet"
                    assert seen["metadata"]["name"] == one.key[1]
                stats = observer.stats()
        finally:
            await observer.aclose()
    assert stats["informers"]["jobset"] == 1  # still one informer, shared by every run
    # Each informer listed its kind once: the runs that joined during that list got their
    # own objects listed (seeds), not the whole kind again for every few of them.
    assert stats["lists"] == sum(stats["informers"].values()), stats
