"""Which ``Workflow`` owns a launch step's JobSet (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from jobset_core.models import JobSet, OwnerReference
from kfp_components._owner import owned_by, workflow_owner

WORKFLOW = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "Workflow",
    "name": "pipeline-abc12",
    "uid": "wf-uid",
    "controller": True,
    "blockOwnerDeletion": True,
}


def pod(uid: str = "pod-uid", *refs: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "step", "uid": uid, "ownerReferences": list(refs)}}


@pytest.mark.parametrize(
    ("the_pod", "uid", "owner"),
    [
        pytest.param(pod("pod-uid", WORKFLOW), "pod-uid", "pipeline-abc12", id="argo-step"),
        pytest.param(pod("other", WORKFLOW), "pod-uid", None, id="not-this-pod"),
        pytest.param(pod("pod-uid", WORKFLOW), "", None, id="uid-unknown"),
        pytest.param(pod("pod-uid"), "pod-uid", None, id="no-owner"),
        pytest.param(
            pod("pod-uid", {**WORKFLOW, "controller": False}), "pod-uid", None, id="not-controller"
        ),
        pytest.param(
            pod("pod-uid", {**WORKFLOW, "apiVersion": "example.com/v1"}),
            "pod-uid",
            None,
            id="another-group",
        ),
        pytest.param(
            pod("pod-uid", {**WORKFLOW, "kind": "WorkflowTemplate"}),
            "pod-uid",
            None,
            id="another-kind",
        ),
    ],
)
def test_workflow_owner(the_pod: dict[str, Any], uid: str, owner: str | None) -> None:
    found = workflow_owner(the_pod, uid)
    assert (found.name if found else None) == owner
    if found is not None:  # neither a controller nor blocking (no right on the Workflow needed)
        assert found.to_dict() == {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Workflow",
            "name": "pipeline-abc12",
            "uid": "wf-uid",
        }


def test_owned_by_adds_the_owner_once_and_keeps_the_others() -> None:
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "c-1"}
    jobset = JobSet.model_validate(
        {"metadata": {"name": "js", "ownerReferences": [other]}, "spec": {"replicatedJobs": []}}
    )
    owner = OwnerReference(api_version="argoproj.io/v1alpha1", kind="Workflow", name="w", uid="u")
    once = owned_by(jobset, owner)
    twice = owned_by(once, owner)
    assert [ref.uid for ref in twice.metadata.owner_references or []] == ["c-1", "u"]
    assert jobset.metadata.owner_references is not None
    assert len(jobset.metadata.owner_references) == 1  # the input is left as it was
