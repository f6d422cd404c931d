"""Which pipeline run a launch step's JobSet belongs to (pure).

On the KFP backend every step's pod is owned by the run's Argo ``Workflow`` (its controller
owner reference), and Argo gives the objects a workflow makes an owner reference to the
``Workflow`` so that they are deleted with it. The launcher does the same for its JobSet (or the
native backend's anchor): when the run is deleted, garbage collection removes the JobSet, even if
the step's pod was killed before its SIGTERM handler could.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobset_core.models import JobSet, OwnerReference

__all__ = ["WORKFLOW_GROUP", "owned_by", "workflow_owner"]

WORKFLOW_GROUP = "argoproj.io"


def workflow_owner(pod: Mapping[str, Any], pod_uid: str) -> OwnerReference | None:
    """The ``Workflow`` that controls ``pod``, as an owner reference for the step's JobSet
    (``None``: the pod is not the step's own, by UID, or no Argo ``Workflow`` controls it).

    Not a controller reference (the JobSet has its own controller) and no
    ``blockOwnerDeletion`` (which would need permission on the ``Workflow``).
    """
    meta = pod.get("metadata") or {}
    if not pod_uid or meta.get("uid") != pod_uid:
        return None
    for ref in meta.get("ownerReferences") or []:
        group = str(ref.get("apiVersion") or "").partition("/")[0]
        if ref.get("controller") and ref.get("kind") == "Workflow" and group == WORKFLOW_GROUP:
            return OwnerReference(
                api_version=ref["apiVersion"], kind="Workflow", name=ref["name"], uid=ref["uid"]
            )
    return None


def owned_by(jobset: JobSet, owner: OwnerReference) -> JobSet:
    """``jobset`` with ``owner`` among its owner references (once)."""
    refs = list(jobset.metadata.owner_references or [])
    if any(ref.uid == owner.uid for ref in refs):
        return jobset
    meta = jobset.metadata.model_copy(update={"owner_references": [*refs, owner]})
    return jobset.model_copy(update={"metadata": meta})
