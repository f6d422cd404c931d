"""Delete every JobSet a pipeline run launched, found by its run-id label.

For an exit handler (``dsl.ExitHandler``): when a run is terminated, the launcher's SIGTERM
handler may be cut short (the pod dies about a second later), and deleting a run starts no
handler at all. The exit task only knows the run, so it selects by the
``jobset-core/kfp-run-id`` identity label every launch step puts on its JobSet (controller
backend) and on its anchor ConfigMap (native backend; garbage collection then removes its Jobs
and Service).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobset_core.backends import ANCHOR_LABEL, ANCHOR_VALUE, BackendChoice
from jobset_core.errors import Conflict, NotFound
from jobset_core.resources import CONFIG_MAP, JOBSET, ApiResource
from kfp_components._identity import run_selector

if TYPE_CHECKING:
    from jobset_core.client import Client

__all__ = ["CleanupResult", "cleanup_run"]


@dataclass(frozen=True)
class CleanupResult:
    """What a cleanup deleted (names), by kind."""

    jobsets: tuple[str, ...] = ()
    anchors: tuple[str, ...] = ()

    @property
    def count(self) -> int:
        """How many objects were deleted."""
        return len(self.jobsets) + len(self.anchors)


async def cleanup_run(
    client: Client, *, namespace: str, run_id: str, backend: BackendChoice = "auto"
) -> CleanupResult:
    """Delete (foreground, one request each) the run's JobSets and native anchors.

    ``auto`` deletes JobSets when the JobSet API is served and native anchors always;
    ``controller`` only JobSets; ``native`` only anchors. Objects already gone are skipped.
    """
    selector = run_selector(run_id)
    deleted: dict[str, list[str]] = {"jobsets": [], "anchors": []}
    kinds: list[tuple[str, ApiResource, dict[str, str]]] = []
    if backend == "controller" or (backend == "auto" and await client.jobset_api_served()):
        kinds.append(("jobsets", JOBSET, selector))
    if backend in ("auto", "native"):
        kinds.append(("anchors", CONFIG_MAP, {**selector, ANCHOR_LABEL: ANCHOR_VALUE}))
    for key, resource, labels in kinds:
        found = await client.list(resource, namespace=namespace, label_selector=labels)
        for obj in found.items:
            meta = obj.get("metadata") or {}
            with contextlib.suppress(NotFound, Conflict):
                await client.delete(
                    resource, meta["name"], namespace=namespace, uid=meta.get("uid")
                )
                deleted[key].append(str(meta["name"]))
    return CleanupResult(tuple(sorted(deleted["jobsets"])), tuple(sorted(deleted["anchors"])))
