"""The anchor ConfigMap of the native backend: build, parse, identity checks and patch bodies."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobset_core import labels
from jobset_core.backends._anchor import (
    ANCHOR_LABEL,
    ANCHOR_VALUE,
    JOBSET_KEY,
    READS_KEPT,
    STATUS_KEY,
    NotAnAnchor,
    build_anchor,
    not_an_anchor,
    owner_reference,
    parse_anchor,
    read_anchor,
    read_jobset,
    status_patch,
    suspend_patch,
)
from jobset_core.models import Condition, JobSet, JobSetStatus, ReplicatedJobStatus

UID = "0b1c-anchor"


def make_jobset(**meta: Any) -> JobSet:
    return JobSet.model_validate(
        {
            "metadata": {"name": "demo", **meta},
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "w",
                        "template": {
                            "spec": {
                                "template": {
                                    "spec": {
                                        "restartPolicy": "Never",
                                        "containers": [{"name": "c", "image": "busybox"}],
                                    }
                                }
                            }
                        },
                    }
                ]
            },
        }
    )


def as_served(body: dict[str, Any], **meta: Any) -> dict[str, Any]:
    """The ConfigMap as the API server returns it after creation."""
    served = json.loads(json.dumps(body))
    served["metadata"].setdefault("name", "demo-x1")
    served["metadata"].update(
        {"uid": UID, "resourceVersion": "17", "creationTimestamp": "2025-01-02T03:04:05Z", **meta}
    )
    return served


def test_build_stores_defaulted_jobset_empty_status_and_labels() -> None:
    body = build_anchor(make_jobset(labels={"team": "a"}), "ns", {"example.com/run": "r1"})
    assert body["apiVersion"] == "v1" and body["kind"] == "ConfigMap"
    assert body["metadata"] == {
        "name": "demo",
        "namespace": "ns",
        "labels": {  # the JobSet's own labels too: a label selector finds native runs
            "example.com/run": "r1",
            ANCHOR_LABEL: ANCHOR_VALUE,
            labels.JOBSET_NAME: "demo",
            "team": "a",
        },
    }
    stored = json.loads(body["data"][JOBSET_KEY])
    assert stored["metadata"] == {"name": "demo", "labels": {"team": "a"}}
    # with_defaults ran: the webhook/CRD defaults are in the stored spec
    assert stored["spec"]["replicatedJobs"][0]["replicas"] == 1
    assert stored["spec"]["network"]["enableDNSHostnames"] is True
    assert stored["spec"]["successPolicy"]["operator"] == "All"
    assert json.loads(body["data"][STATUS_KEY]) == {}


def test_build_with_generate_name_leaves_naming_to_the_server() -> None:
    js = make_jobset()
    js.metadata.name = None
    js.metadata.generate_name = "demo-"
    body = build_anchor(js, "ns")
    assert body["metadata"]["generateName"] == "demo-"
    assert "name" not in body["metadata"]
    assert labels.JOBSET_NAME not in body["metadata"]["labels"]


@pytest.mark.parametrize(
    "owners",
    [
        [],
        [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "name": "run", "uid": "w-1"}],
    ],
    ids=["none", "a-workflow"],
)
def test_build_gives_the_anchor_the_jobsets_owners(owners: list[dict[str, Any]]) -> None:
    # The anchor stands for the JobSet: who owns the JobSet owns it (and its Jobs follow).
    body = build_anchor(make_jobset(ownerReferences=owners), "ns")
    assert body["metadata"].get("ownerReferences", []) == owners
    stored = json.loads(body["data"]["jobset.json"])
    assert "ownerReferences" not in stored["metadata"]  # said once, on the ConfigMap


def test_parse_round_trip_takes_identity_from_the_configmap() -> None:
    body = build_anchor(make_jobset(), "ns", {"example.com/run": "r1"})
    anchor = parse_anchor(as_served(body, name="demo"))
    assert (anchor.name, anchor.namespace, anchor.uid, anchor.resource_version) == (
        "demo",
        "ns",
        UID,
        "17",
    )
    assert anchor.jobset.metadata.uid == UID
    assert anchor.jobset.metadata.namespace == "ns"
    assert anchor.created_at == "2025-01-02T03:04:05Z"
    assert not anchor.deleting
    assert anchor.status == JobSetStatus()
    assert anchor.jobset.status is None


def test_parse_generate_named_anchor_names_the_jobset() -> None:
    js = make_jobset()
    js.metadata.name, js.metadata.generate_name = None, "demo-"
    anchor = parse_anchor(as_served(build_anchor(js, "ns")))
    assert anchor.name == anchor.jobset.name == "demo-x1"
    assert anchor.jobset.metadata.generate_name is None


def test_parse_reads_status_and_deletion() -> None:
    body = build_anchor(make_jobset(), "ns")
    status = JobSetStatus(restarts=2, restarts_count_towards_max=1, terminal_state="Failed")
    body["data"][STATUS_KEY] = json.dumps(status.to_dict())
    anchor = parse_anchor(as_served(body, deletionTimestamp="2025-01-02T03:05:00Z"))
    assert anchor.status == status
    assert anchor.deleting


def test_a_read_anchor_is_parsed_once_per_object_read() -> None:
    """What a waiter's pass reads several times (its drive, its judge, its result, its log
    follower) is parsed once for the object the observer holds; an object read anew, even
    equal, is parsed anew, and the reads kept are bounded."""
    obj = as_served(build_anchor(make_jobset(), "ns"))
    first = read_anchor(obj)
    assert read_anchor(obj) is first
    assert first == parse_anchor(obj) and parse_anchor(obj) is not first  # its own copy
    again = json.loads(json.dumps(obj))  # the next event's object: equal, not the same
    assert read_anchor(again) is not first and read_anchor(again) == first
    others = [as_served(build_anchor(make_jobset(), "ns"), name=f"r{i}") for i in range(READS_KEPT)]
    for other in others:
        read_anchor(other)
    assert read_anchor(obj) is not first  # pushed out by as many reads of other objects
    jobset = make_jobset(uid=UID).to_dict()  # the controller backend's head
    assert read_jobset(jobset) is read_jobset(jobset) == JobSet.model_validate(jobset)


def test_an_object_that_is_no_anchor_is_refused_at_every_read() -> None:
    obj = as_served(build_anchor(make_jobset(), "ns"))
    obj["data"][JOBSET_KEY] = "{"
    for _ in range(2):
        with pytest.raises(NotAnAnchor):
            read_anchor(obj)


@pytest.mark.parametrize(
    ("mutate", "why"),
    [
        pytest.param(lambda o: o["metadata"]["labels"].pop(ANCHOR_LABEL), "label", id="no-marker"),
        pytest.param(
            lambda o: o["metadata"]["labels"].update({ANCHOR_LABEL: "other"}),
            "label",
            id="other-marker",
        ),
        pytest.param(lambda o: o["data"].pop(JOBSET_KEY), "data", id="no-jobset"),
        pytest.param(lambda o: o["data"].update({JOBSET_KEY: "{"}), "data", id="bad-json"),
        pytest.param(
            lambda o: o["data"].update({STATUS_KEY: '{"restarts": "x"}'}), "data", id="bad-status"
        ),
        pytest.param(lambda o: o.update({"kind": "Secret"}), "Secret", id="not-a-configmap"),
    ],
)
def test_parse_rejects_what_is_not_an_anchor(mutate: Any, why: str) -> None:
    obj = as_served(build_anchor(make_jobset(), "ns"))
    mutate(obj)
    with pytest.raises(NotAnAnchor, match=why):
        parse_anchor(obj)


@pytest.mark.parametrize(
    ("obj", "why"),
    [
        pytest.param(
            {"kind": "ConfigMap", "metadata": {"labels": {ANCHOR_LABEL: ANCHOR_VALUE}}},
            None,
            id="anchor",
        ),
        pytest.param({"metadata": {"labels": {ANCHOR_LABEL: ANCHOR_VALUE}}}, None, id="no-kind"),
        pytest.param(
            {"kind": "ConfigMap", "metadata": {"labels": {"app": "x"}}},
            "it is not a native JobSet anchor",
            id="user-configmap",
        ),
        pytest.param(
            {"kind": "ConfigMap", "metadata": {"labels": {ANCHOR_LABEL: "v0"}}},
            "it is not a native JobSet anchor",
            id="other-marker",
        ),
        pytest.param(
            {"kind": "Secret", "metadata": {"labels": {ANCHOR_LABEL: ANCHOR_VALUE}}},
            "it is a Secret",
            id="not-a-configmap",
        ),
    ],
)
def test_not_an_anchor(obj: dict[str, Any], why: str | None) -> None:
    found = not_an_anchor(obj)
    assert found == why if why is None else (found is not None and found.startswith(why))


def test_owner_reference_is_a_blocking_controller_reference_to_the_configmap() -> None:
    anchor = parse_anchor(as_served(build_anchor(make_jobset(), "ns"), name="demo"))
    assert owner_reference(anchor) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "demo",
        "uid": UID,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def test_status_patch_is_compare_and_swap_of_the_jobset_status_shape() -> None:
    status = JobSetStatus(
        restarts=1,
        restarts_count_towards_max=1,
        conditions=[
            Condition(
                type="Completed",
                status="True",
                reason="AllJobsCompleted",
                message="jobset completed successfully",
                last_transition_time="2025-01-02T03:04:05Z",
            )
        ],
        terminal_state="Completed",
        replicated_jobs_status=[ReplicatedJobStatus(name="w", succeeded=1)],
    )
    patch = status_patch(status, "42")
    assert patch["metadata"] == {"resourceVersion": "42"}
    assert json.loads(patch["data"][STATUS_KEY]) == {
        "conditions": [
            {
                "type": "Completed",
                "status": "True",
                "reason": "AllJobsCompleted",
                "message": "jobset completed successfully",
                "lastTransitionTime": "2025-01-02T03:04:05Z",
            }
        ],
        "restarts": 1,
        "restartsCountTowardsMax": 1,
        "terminalState": "Completed",
        "replicatedJobsStatus": [
            {"name": "w", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
        ],
    }


@pytest.mark.parametrize("suspend", [True, False])
def test_suspend_patch_rewrites_only_spec_suspend(suspend: bool) -> None:
    body = build_anchor(make_jobset(labels={"team": "a"}), "ns")
    anchor = parse_anchor(as_served(body, name="demo"))
    patch = suspend_patch(anchor, suspend)
    assert patch["metadata"] == {"resourceVersion": "17"}
    before, after = json.loads(body["data"][JOBSET_KEY]), json.loads(patch["data"][JOBSET_KEY])
    assert after["spec"].pop("suspend") is suspend
    before["spec"].pop("suspend", None)
    assert after == before
    assert STATUS_KEY not in patch["data"]
