"""A waiter judges a big run at every change of one of its pods (pure): the views of unchanged
pods are kept from one look to the next, a run looked at again unchanged is the same snapshot,
and the Events are matched to pods through an index that says what the one rule says (an Event
is about a pod when both have a UID and they are equal, else when their names are).

Found by the benchmark's pods family: a worker waiting for a 1,000-pod JobSet spent ~24 s of
CPU reading every pod again and ~7 s matching every Event to every pod, at each of ~420 looks
(ours 39 s against 7 s before the pod-start policy read pods through the view)."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping
from typing import Any

import pytest

from jobset_core import labels as L
from jobset_core.observe._store import Stores
from jobset_core.observe._views import Kind
from jobset_core.pods import VIEWS_KEPT_FROM, PodView, PodViews
from jobset_core.policy.pod_start import _event_end, _PodEvents


def about(event: Mapping[str, Any], pod: PodView) -> bool:
    """The rule, as written before the index."""
    involved = event.get("involvedObject")
    if not isinstance(involved, Mapping) or involved.get("kind") != "Pod":
        return False
    uid = involved.get("uid")
    if uid and pod.uid:
        return bool(uid == pod.uid)
    return bool(involved.get("name") == (pod.name or None))


def event(i: int, kind: str, name: Any, uid: Any, last: str) -> dict[str, Any]:
    involved = {"kind": kind, "name": name, "uid": uid}
    return {"metadata": {"name": f"e{i}"}, "involvedObject": involved, "lastTimestamp": last}


PODS = [
    PodView.of({"metadata": {"name": name, "uid": uid}})
    for name, uid in [("p", "u1"), ("p", ""), ("q", "u2"), ("", ""), ("", "u3")]
]
NAMES = ["p", "q", None, 5, ""]
UIDS = ["u1", "u2", "", None, 7, "u9"]
TIMES = ["2026-12-01T10:00:02Z", "2026-12-01T10:00:01Z", "2026-12-01T10:00:02Z"]


@pytest.mark.parametrize("kind", ["Pod", "Job"])
def test_the_index_matches_what_the_rule_matches(kind: str) -> None:
    events = [
        event(i, kind, name, uid, TIMES[i % len(TIMES)])
        for i, (name, uid) in enumerate(itertools.product(NAMES, UIDS))
    ]
    index = _PodEvents(events)
    for pod in PODS:
        expected = sorted((e for e in events if about(e, pod)), key=_event_end)
        assert index.of(pod) == expected, (pod.name, pod.uid)
    if kind == "Pod":
        assert any(index.of(pod) for pod in PODS)


def pod(name: str, version: str, phase: str = "Running", uid: str | None = None) -> dict[str, Any]:
    meta = {"name": name, "uid": f"u-{name}" if uid is None else uid, "resourceVersion": version}
    return {"metadata": meta, "status": {"phase": phase}}


def test_unchanged_pods_keep_their_views_and_only_the_last_look_is_kept() -> None:
    """A big run's pods that are the same objects as at the last look keep their views."""
    views = PodViews()
    rest = [pod(f"r{i:03d}", "1") for i in range(VIEWS_KEPT_FROM)]
    a, b, c = pod("a", "1"), pod("b", "1"), pod("c", "1")
    first = views.of([a, b, c, *rest])
    b2 = pod("b", "2", phase="Succeeded")  # the observer replaces a pod that changed
    second = views.of([a, b2, copy.deepcopy(c), *rest])
    assert second[0] is first[0]  # the same object: unchanged
    assert second[1] is not first[1] and second[1].phase == "Succeeded"
    assert second[2] is not first[2]  # an equal copy is read again
    assert [v.name for v in second[:3]] == ["a", "b", "c"]
    assert views.of([b2, *rest])[0] is second[1]
    assert views.of([a, *rest])[0] is not first[0]  # forgotten: not in the last look


def test_a_small_runs_views_are_not_kept_through_the_wait() -> None:
    """Below :data:`VIEWS_KEPT_FROM` pods, a look reads its pods and keeps nothing."""
    views = PodViews()
    big = [pod(f"p{i:03d}", "1") for i in range(VIEWS_KEPT_FROM)]
    views.of(big)
    small = big[: VIEWS_KEPT_FROM - 1]
    first = views.of(small)
    assert views._known == {}
    again = views.of(small)
    assert again == first and again[0] is not first[0]


def test_a_run_looked_at_again_unchanged_is_the_same_snapshot() -> None:
    stores = Stores()
    run = stores.track(("ns", "js"), (Kind.JOBSET, Kind.POD))
    first = run.observation()
    assert run.observation() is first
    stores.apply(
        Kind.POD,
        "ADDED",
        {
            **pod("js-0", "1"),
            "metadata": {
                "name": "js-0",
                "namespace": "ns",
                "uid": "u",
                "resourceVersion": "1",
                "labels": {L.JOBSET_NAME: "js"},
            },
        },
    )
    second = run.observation()
    assert second is not first and len(second.pods) == 1
    stores.mark_synced(Kind.POD, [("ns", "js")])
    stores.mark_synced(Kind.JOBSET, [("ns", "js")])
    third = run.observation()
    assert third is not second and third.synced
    stores.track(("ns", "js"), (Kind.EVENT,))  # a holder that needs more kinds
    assert not run.observation().synced
