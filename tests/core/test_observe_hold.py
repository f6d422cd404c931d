"""A hold keeps the objects of runs nobody tracks, current, while a shared informer lists its
scope and for a while after; a run tracked meanwhile takes them over and knows the kind at
once, with no list of its own (pure).

Found by the benchmark's scale family: at 100 namespaces with a per-namespace identity, the
runs that joined their namespace's informers after its list cost ~20 seed lists per namespace
at a triggerer's start (2.78x the cncf anchor's requests at start)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from jobset_core import labels as L
from jobset_core.observe._store import Stores
from jobset_core.observe._views import Kind

KINDS = (Kind.JOBSET, Kind.JOB, Kind.POD, Kind.EVENT)
ALL_NS = [(kind, "ns") for kind in KINDS]


def jobset(name: str, version: int, ns: str = "ns", **labels: str) -> dict[str, Any]:
    meta = {"name": name, "namespace": ns, "uid": f"u-{name}", "resourceVersion": str(version)}
    return {"metadata": {**meta, "labels": labels}, "spec": {}, "status": {}}


def child(name: str, run: str, version: int, ns: str = "ns") -> dict[str, Any]:
    meta = {"name": name, "namespace": ns, "uid": f"u-{name}", "resourceVersion": str(version)}
    return {"metadata": {**meta, "labels": {L.JOBSET_NAME: run}}, "status": {}}


def warning(name: str, about: str, ns: str = "ns") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": ns, "resourceVersion": "9"},
        "type": "Warning",
        "reason": "FailedScheduling",
        "message": "0/3 nodes are available",
        "involvedObject": {"kind": "Pod", "name": about, "namespace": ns},
    }


def held_stores(scopes: Sequence[tuple[Kind, str | None]] = ALL_NS) -> Stores:
    stores = Stores()
    for scope in scopes:
        stores.hold(scope)
    return stores


def names(objs: tuple[dict[str, Any], ...]) -> list[str]:
    return [o["metadata"]["name"] for o in objs]


def test_a_run_tracked_after_the_list_takes_its_held_objects_and_knows_them() -> None:
    stores = held_stores()
    assert stores.apply(Kind.JOBSET, "ADDED", jobset("a", 1)) is None  # nobody waits for it
    stores.apply(Kind.JOB, "ADDED", child("a-w-0", "a", 2))
    stores.apply(Kind.POD, "ADDED", child("a-w-0-0", "a", 3))
    stores.apply(Kind.EVENT, "ADDED", warning("e1", "a-w-0-0"))
    for scope in ALL_NS:
        stores.listed(scope)
    assert stores.held((Kind.JOB, "ns")) == [("ns", "a")]
    run = stores.track(("ns", "a"), KINDS)
    seen = run.observation()
    assert seen.synced
    assert seen.jobset is not None and names(seen.jobs) == ["a-w-0"]
    assert names(seen.pods) == ["a-w-0-0"] and names(seen.events) == ["e1"]
    assert stores.size["held_runs"] == 0
    # from now on it is a tracked run: changes are its own
    assert stores.apply(Kind.JOB, "MODIFIED", child("a-w-0", "a", 7)) == ("ns", "a")


def test_held_objects_stay_current() -> None:
    stores = held_stores()
    stores.apply(Kind.JOBSET, "ADDED", jobset("a", 1))
    stores.apply(Kind.JOBSET, "MODIFIED", jobset("a", 5, phase="two"))
    stores.apply(Kind.JOB, "ADDED", child("a-w-0", "a", 2))
    stores.apply(Kind.JOB, "ADDED", child("a-w-1", "a", 3))
    stores.apply(Kind.JOB, "DELETED", child("a-w-1", "a", 6))
    stores.apply(Kind.JOB, "ADDED", child("a-w-1", "a", 4))  # a list older than the deletion
    for scope in ALL_NS:
        stores.listed(scope)
    seen = stores.track(("ns", "a"), KINDS).observation()
    assert seen.jobset is not None and seen.jobset["metadata"]["labels"] == {"phase": "two"}
    assert names(seen.jobs) == ["a-w-0"]
    assert names(seen.gone_jobs) == ["a-w-1"]


def test_a_run_with_nothing_held_is_known_empty_once_listed_and_not_before() -> None:
    stores = held_stores()
    early = stores.track(("ns", "early"), KINDS)
    assert not early.observation().synced  # the list is under way
    changed = set()
    for scope in ALL_NS:
        changed |= stores.listed(scope)
    assert changed == {("ns", "early")} and early.observation().synced
    late = stores.track(("ns", "late"), KINDS)
    assert late.observation().synced and late.observation().jobset is None


@pytest.mark.parametrize(
    ("scopes", "synced"),
    [
        (ALL_NS, set(KINDS)),
        ([(kind, None) for kind in KINDS], set(KINDS)),  # cluster-wide holds cover every ns
        ([(Kind.JOB, "ns"), (Kind.POD, "ns")], {Kind.JOB, Kind.POD}),
        ([(kind, "other") for kind in KINDS], set()),  # another namespace's holds
    ],
)
def test_only_the_listed_holds_of_the_runs_scope_count(
    scopes: list[tuple[Kind, str | None]], synced: set[Kind]
) -> None:
    stores = held_stores(scopes)
    for scope in scopes:
        stores.listed(scope)
    assert stores.track(("ns", "a"), KINDS).synced == synced


def test_release_forgets_what_the_hold_kept_and_later_runs_are_not_known() -> None:
    stores = held_stores()
    stores.apply(Kind.JOBSET, "ADDED", jobset("a", 1))
    stores.apply(Kind.POD, "ADDED", child("a-w-0-0", "a", 3))
    for scope in ALL_NS:
        stores.listed(scope)
    stores.release((Kind.POD, "ns"))
    assert stores.size["held_runs"] == 1  # its JobSet is still held
    for scope in ALL_NS:
        stores.release(scope)
    assert stores.size["held_runs"] == 0
    run = stores.track(("ns", "a"), KINDS)
    assert run.synced == set() and run.observation().jobset is None  # a seed lists it
    stores.apply(Kind.JOBSET, "ADDED", jobset("b", 1))
    assert stores.size["held_runs"] == 0  # no hold: untracked objects are dropped again


def test_a_run_left_during_a_hold_is_held_again_and_taken_back() -> None:
    stores = held_stores()
    for scope in ALL_NS:
        stores.listed(scope)
    stores.track(("ns", "a"), KINDS)
    stores.apply(Kind.JOB, "ADDED", child("a-w-0", "a", 2))
    stores.untrack(("ns", "a"))
    stores.apply(
        Kind.JOB,
        "MODIFIED",
        child(
            "a-w-0",
            "a",
            4,
        ),
    )
    back = stores.track(("ns", "a"), KINDS).observation()
    assert back.synced and back.jobs[0]["metadata"]["resourceVersion"] == "4"


def test_a_run_left_with_fewer_kinds_is_not_known_for_the_others() -> None:
    stores = held_stores()
    for scope in ALL_NS:
        stores.listed(scope)
    stores.track(("ns", "a"), (Kind.JOBSET,))  # its pods were dropped meanwhile
    stores.apply(Kind.POD, "ADDED", child("a-w-0-0", "a", 3))
    stores.untrack(("ns", "a"))
    assert stores.track(("ns", "a"), KINDS).synced == {Kind.JOBSET}


def test_a_relist_drops_held_objects_it_no_longer_holds() -> None:
    stores = held_stores()
    stores.apply(Kind.JOB, "ADDED", child("a-w-0", "a", 2))
    stores.apply(Kind.JOB, "ADDED", child("a-w-1", "a", 3))
    listed: dict[tuple[str, str], set[str]] = {}
    stores.relist_page(Kind.JOB, [child("a-w-0", "a", 2)], listed)
    stores.relist_end(Kind.JOB, listed, "10", stores.held((Kind.JOB, "ns")))
    for scope in ALL_NS:
        stores.listed(scope)
    assert names(stores.track(("ns", "a"), KINDS).observation().jobs) == ["a-w-0"]


def test_events_about_held_pods_are_held_with_them() -> None:
    stores = held_stores()
    stores.apply(Kind.EVENT, "ADDED", warning("before", "a-w-0-0"))  # before its pod: orphan
    stores.apply(Kind.POD, "ADDED", child("a-w-0-0", "a", 3))
    stores.apply(Kind.EVENT, "ADDED", warning("after", "a-w-0-0"))
    stores.apply(Kind.EVENT, "ADDED", warning("other", "nobody"))
    for scope in ALL_NS:
        stores.listed(scope)
    seen = stores.track(("ns", "a"), KINDS).observation()
    assert names(seen.events) == ["before", "after"]
