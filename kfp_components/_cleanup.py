"""Delete every JobSet a pipeline run launched, found by its run-id label.

For an exit handler (``dsl.ExitHandler``): when a run is terminated, the launcher's SIGTERM
handler may be cut short (the pod dies about a second later), and deleting a run starts no
handler at all. The exit task only knows the run, so it selects by the
``jobset-core/kfp-run-id`` identity label every launch step puts on its JobSet (controller
backend) and on its anchor ConfigMap (native backend; garbage collection then removes its Jobs
and Service).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobset_core.lifecycle import BackendChoice
from kfp_components._identity import run_selector

if TYPE_CHECKING:
    from jobset_core.lifecycle import Lifecycle

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
    lifecycle: Lifecycle, *, namespace: str, run_id: str, backend: BackendChoice = "auto"
) -> CleanupResult:
    """Delete (foreground, one request each) the run's JobSets and native anchors.

    ``auto`` deletes JobSets when the JobSet API is served and native anchors always;
    ``controller`` only JobSets; ``native`` only anchors. Objects already gone are skipped.
    """
    runs = lifecycle.runs
    found = await runs.find(
        namespace=namespace, label_selector=run_selector(run_id), backend=backend
    )
    deleted: dict[str, list[str]] = {"controller": [], "native": []}
    for submission in found:
        handle = submission.handle
        await runs.cancel(handle)  # gone already is fine
        deleted[handle.backend].append(handle.name)
    return CleanupResult(tuple(sorted(deleted["controller"])), tuple(sorted(deleted["native"])))
