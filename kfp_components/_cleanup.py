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

from jobset_core.backends import ANCHOR_LABEL, ANCHOR_VALUE
from jobset_core.backends.auto import BackendChoice
from jobset_core.client.sync import JobSetClient
from jobset_core.errors import Conflict, NotFound
from kfp_components._identity import run_selector

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


def cleanup_run(
    client: JobSetClient, *, namespace: str, run_id: str, backend: BackendChoice = "auto"
) -> CleanupResult:
    """Delete (foreground, one request each) the run's JobSets and native anchors.

    ``auto`` deletes JobSets when the JobSet API is served and native anchors always;
    ``controller`` only JobSets; ``native`` only anchors. Objects already gone are skipped.
    """
    selector = run_selector(run_id)
    jobsets: list[str] = []
    anchors: list[str] = []
    if backend == "controller" or (backend == "auto" and client.jobset_api_served()):
        for jobset in client.list_jobsets(namespace=namespace, label_selector=selector).items:
            with contextlib.suppress(NotFound, Conflict):
                client.delete_jobset(jobset.name, namespace=namespace, uid=jobset.metadata.uid)
                jobsets.append(jobset.name)
    if backend in ("auto", "native"):
        marked = {**selector, ANCHOR_LABEL: ANCHOR_VALUE}
        for anchor in client.list_config_maps(namespace=namespace, label_selector=marked).items:
            meta = anchor.get("metadata") or {}
            with contextlib.suppress(NotFound, Conflict):
                client.delete_config_map(meta["name"], namespace=namespace, uid=meta.get("uid"))
                anchors.append(str(meta["name"]))
    return CleanupResult(tuple(sorted(jobsets)), tuple(sorted(anchors)))
