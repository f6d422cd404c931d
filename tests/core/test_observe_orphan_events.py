"""The observer's stores keep a Warning Event about a pod that is not known yet until the pod
arrives (pure): a list of Events may come before the list of the pods they are about."""

from __future__ import annotations

from typing import Any

from jobset_core import labels as L
from jobset_core.observe._store import ORPHAN_EVENTS, Stores
from jobset_core.observe._views import Kind

KEY = ("ns", "js")
KINDS = (Kind.JOBSET, Kind.JOB, Kind.POD, Kind.EVENT)


def pod(name: str, version: str = "5") -> dict[str, Any]:
    labels = {L.JOBSET_NAME: "js"}
    meta = {"name": name, "namespace": "ns", "uid": f"u-{name}", "resourceVersion": version}
    return {"metadata": {**meta, "labels": labels}, "status": {"phase": "Pending"}}


def event(name: str, about: str, kind: str = "Pod", type_: str = "Warning") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": "9"},
        "type": type_,
        "reason": "Failed",
        "message": "Error: ErrImagePull",
        "involvedObject": {"kind": kind, "name": about, "namespace": "ns", "uid": f"u-{about}"},
    }


def test_an_event_before_its_pod_is_kept_until_the_pod_comes() -> None:
    stores = Stores()
    stores.track(KEY, KINDS)
    assert stores.apply(Kind.EVENT, "ADDED", event("e1", "p")) is None  # no such pod yet
    assert stores.apply(Kind.EVENT, "ADDED", event("n1", "p", type_="Normal")) is None
    assert stores.apply(Kind.POD, "ADDED", pod("p")) == KEY
    run = stores.tracked(KEY)
    assert run is not None
    assert [e["metadata"]["name"] for e in run.observation().events] == ["e1"]
    assert stores.size["orphan_events"] == 0


def test_orphans_are_bounded_and_forgotten_with_the_last_run() -> None:
    stores = Stores()
    stores.track(KEY, KINDS)
    for i in range(ORPHAN_EVENTS + 50):
        stores.apply(Kind.EVENT, "ADDED", event(f"e{i}", f"other-{i}"))
    assert stores.size["orphan_events"] == ORPHAN_EVENTS
    stores.untrack(KEY)
    assert stores.size["orphan_events"] == 0
    # nobody tracks anything: nothing is kept at all
    stores.apply(Kind.EVENT, "ADDED", event("e", "p"))
    assert stores.size["orphan_events"] == 0
