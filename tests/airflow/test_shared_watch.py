"""The shared namespace watch at the client seam: one list then one watch, fan-out by name,
relist after 410 Gone, reconnect after a dropped stream, stop when the last lease ends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from airflow_provider_jobset import _shared
from jobset_core.client import EventType, ObjectList, WatchEvent
from jobset_core.errors import Gone
from jobset_core.models import JobSet

pytestmark = pytest.mark.airflow


def js(name: str, version: str, restarts: int = 0) -> JobSet:
    return JobSet.model_validate(
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": version},
            "status": {"restarts": restarts},
        }
    )


class FakeClient:
    """Scripted list and watch answers; records every call."""

    def __init__(self, lists: list[list[JobSet]], watches: list[list[Any]]) -> None:
        self.lists, self.watches = lists, watches
        self.calls: list[tuple[str, str | None]] = []
        self.closed = False

    async def list_jobsets(self, *, namespace: str) -> ObjectList[JobSet]:
        items = self.lists.pop(0)
        self.calls.append(("list", None))
        return ObjectList(items=items, resource_version=f"L{len(self.calls)}")

    def watch_jobsets(self, **kwargs: Any) -> AsyncIterator[WatchEvent[JobSet]]:
        self.calls.append(("watch", kwargs["resource_version"]))
        script = self.watches.pop(0) if self.watches else None

        async def stream() -> AsyncIterator[WatchEvent[JobSet]]:
            if script is None:
                await asyncio.sleep(3600)
                return
            for item in script:
                await asyncio.sleep(0.01)
                if isinstance(item, Exception):
                    raise item
                yield item

        return stream()

    async def aclose(self) -> None:
        self.closed = True


def event(kind: EventType, obj: JobSet) -> WatchEvent[JobSet]:
    return WatchEvent(type=kind, object=obj, resource_version=obj.metadata.resource_version or "")


async def test_fan_out_relist_and_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeClient(
        lists=[[js("a", "1"), js("b", "2")], [js("a", "9", restarts=2)]],
        watches=[
            [event(EventType.MODIFIED, js("a", "3", restarts=1)), Gone(410, "Expired")],
            [event(EventType.DELETED, js("b", "10"))],
        ],
    )
    monkeypatch.setattr(_shared, "AsyncJobSetClient", lambda settings: fake)
    async with _shared.lease_watch("k", None, "ns") as watch:
        async with _shared.lease_watch("k", None, "ns") as same:
            assert same is watch
            a, b = watch.subscribe("a"), watch.subscribe("b")
            assert _shared.registry_stats() == {"clients": 1, "watches": {"ns": 2}}
            await asyncio.wait_for(watch.synced.wait(), 5)
            seen = []
            while len(seen) < 3:
                assert await a.changed(5)
                current = a.current()
                if (
                    current is not None
                    and current.status
                    and (not seen or current.status.restarts != seen[-1])
                ):
                    seen.append(current.status.restarts)
            assert seen == [0, 1, 2]  # list, watch event, relist after 410
            assert await b.changed(5)
            while b.current() is not None:
                assert await b.changed(5)
            a.close()
            b.close()
        assert watch.lists == 2
        assert ("watch", "L1") in fake.calls and ("watch", "L3") in fake.calls
    assert fake.closed
    assert _shared.registry_stats() == {"clients": 0, "watches": {}}
