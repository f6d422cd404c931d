"""A finalizer of the tests' that holds a run object (a JobSet, or a native run's anchor
ConfigMap) while it is being deleted: what a slow garbage collector looks like, on demand.
Written through the official client of the ``devcluster`` fixture."""

from __future__ import annotations

from typing import Any

__all__ = ["HOLD", "finalizers", "hold", "hold_child", "run_names"]

#: The tests' finalizer.
HOLD = "test.example/hold"
_JOBSETS = ("jobset.x-k8s.io", "v1alpha2")
_ANCHORS = "jobset-core/anchor=native"


def _replaced(held: bool) -> list[dict[str, Any]]:
    """A JSON patch that sets the finalizers to the tests' or to none (a strategic merge
    would keep the others)."""
    return [{"op": "add", "path": "/metadata/finalizers", "value": [HOLD] if held else []}]


def hold(devcluster: Any, backend: str, namespace: str, name: str, held: bool) -> None:
    """Set the run object's finalizers to the tests' (``held``) or to none."""
    if backend == "controller":  # a merge patch (custom objects): the list is replaced
        devcluster.custom.patch_namespaced_custom_object(
            *_JOBSETS,
            namespace,
            "jobsets",
            name,
            {"metadata": {"finalizers": [HOLD] if held else []}},
        )
    else:
        devcluster.core.patch_namespaced_config_map(name, namespace, _replaced(held))


def hold_child(devcluster: Any, kind: str, namespace: str, name: str, held: bool) -> None:
    """Set a child Job's or Service's finalizers to the tests' (``held``) or to none."""
    if kind == "Job":
        devcluster.batch.patch_namespaced_job(name, namespace, _replaced(held))
    else:
        devcluster.core.patch_namespaced_service(name, namespace, _replaced(held))


def finalizers(devcluster: Any, backend: str, namespace: str, name: str) -> list[str]:
    """The run object's finalizers now."""
    if backend == "controller":
        found = devcluster.custom.get_namespaced_custom_object(
            *_JOBSETS, namespace, "jobsets", name
        )
        return list(found["metadata"].get("finalizers") or [])
    anchor = devcluster.core.read_namespaced_config_map(name, namespace)
    return list(anchor.metadata.finalizers or [])


def run_names(devcluster: Any, backend: str, namespace: str) -> list[str]:
    """The run objects (JobSets, or native anchors) in ``namespace``."""
    if backend == "controller":
        found = devcluster.custom.list_namespaced_custom_object(*_JOBSETS, namespace, "jobsets")[
            "items"
        ]
        return [j["metadata"]["name"] for j in found]
    anchors = devcluster.core.list_namespaced_config_map(namespace, label_selector=_ANCHORS)
    return [a.metadata.name for a in anchors.items]
