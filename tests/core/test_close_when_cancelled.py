"""Closing goes to its end when a cancellation comes meanwhile (an event loop being torn
down, as ``dag.test()`` does after a trigger's event while a native run's settled write still
holds a lease): the last lease of a shared observer closes its client while the informers
are still closing, and a client closes every pool. Nothing is left open for the collector to
report (through the loop's exception handler, as an error in the task's log)."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from jobset_core.client import Client, ClientSettings
from jobset_core.observe import Target, shared_observer, shared_stats
from jobset_core.resources import CONFIG_MAP

pytestmark = pytest.mark.cluster


def _collected(reported: list[dict[str, Any]]) -> list[str]:
    """What the collector reported left open (after a collection)."""
    gc.collect()
    return [str(c.get("message")) for c in reported]


def test_a_lease_cancelled_while_its_informers_close_still_closes_its_client(
    devcluster: Any, cluster_namespace: str
) -> None:
    settings = ClientSettings(kubeconfig_path=str(devcluster.kubeconfig))
    reported: list[dict[str, Any]] = []
    seen: dict[str, Any] = {}

    async def lease() -> None:
        async with shared_observer(settings) as observer:
            target = Target(backend="controller", namespace=cluster_namespace, name="absent")
            async with observer.track(target) as tracked:
                assert await tracked.until(lambda view: view.synced or None, 60)
                seen["informers"] = observer.stats()["informers"]
        # leaving: the informers stop in the background, the lease's end waits for them

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, c: reported.append(c))
        task = asyncio.create_task(lease())
        while not (seen and shared_stats() == {}) and not task.done():
            await asyncio.sleep(0)  # one step at a time, to catch the lease mid-close
        seen["mid_close"] = not task.done()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        del task
        assert _collected(reported) == []

    asyncio.run(main())
    assert seen["informers"], seen  # the observer had informers (and a client) to close
    assert seen["mid_close"], "the lease ended before it could be cancelled mid-close"
    assert _collected(reported) == []


def test_a_client_cancelled_while_it_closes_closes_every_pool(
    devcluster: Any, cluster_namespace: str
) -> None:
    settings = ClientSettings(kubeconfig_path=str(devcluster.kubeconfig))
    reported: list[dict[str, Any]] = []

    async def main() -> dict[str, Any]:
        asyncio.get_running_loop().set_exception_handler(lambda _, c: reported.append(c))
        client = Client(settings)
        await client.list(CONFIG_MAP, namespace=cluster_namespace)
        closing = asyncio.create_task(client.aclose())
        await asyncio.sleep(0)  # its first step: it waits for a connection to end
        seen = {"protocol": client.stats.protocol, "mid_close": not closing.done()}
        closing.cancel()
        await asyncio.gather(closing, return_exceptions=True)
        seen["cancelled"] = closing.cancelled()
        del client, closing
        return seen

    seen = asyncio.run(main())
    # Over HTTP/2, the closing waits for its connection's end: the cancellation comes there.
    assert seen == {"protocol": "h2", "mid_close": True, "cancelled": True}
    assert _collected(reported) == []  # every pool closed all the same
