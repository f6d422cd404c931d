"""What a JobSet task keeps in Airflow's task state store (3.3+) between its tries (pure).

One record per task instance, under :data:`STATE_KEY`: the run (name, namespace, UID, backend),
whether its final verdict came (``finished``, with the verdict) and whether the try that got it
concluded (``concluded``: it returned the result or failed with the verdict). What the next try
makes of it is :func:`earlier`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobset_core.lifecycle import Handle, Verdict
from jobset_core.outcome import Backend

__all__ = ["FINAL", "STATE_KEY", "Earlier", "earlier", "record"]

#: Task state store key of the JobSet a task instance runs (Airflow 3.3+).
STATE_KEY = "jobset"
#: Verdicts after which nothing more will happen to the run.
FINAL = ("completed", "failed", "refused")


@dataclass(frozen=True)
class Earlier:
    """What an earlier try of the task instance left.

    Attributes:
        adopt_uid: The run to reattach to (it had no final verdict yet).
        stale: A concluded try's run: deleted before this try starts afresh.
        verdict: The final verdict of a try killed before it concluded.
        handle: The run that verdict is about.
    """

    adopt_uid: str | None = None
    stale: Handle | None = None
    verdict: Verdict | None = None
    handle: Handle | None = None


def earlier(kept: Any, name: str) -> Earlier:
    """What the record ``kept`` (the store's value, if any) says to a new try of the run
    ``name``.

    A try that concluded leaves a finished run: a new try (a cleared task) deletes it and
    starts afresh. A try that got its final verdict but was killed before it concluded leaves
    that verdict: the next try concludes from it (the delete policy, the result) instead of
    running the whole job again. A try that got no final verdict leaves the UID of the run to
    reattach to.
    """
    if not isinstance(kept, Mapping) or kept.get("name") != name or not name:
        return Earlier()
    kind: Backend = "native" if kept.get("backend") == "native" else "controller"
    handle = Handle(kept["name"], kept["namespace"], kept.get("uid", ""), kind)
    if kept.get("finished") and kept.get("concluded"):
        return Earlier(stale=handle)
    if kept.get("finished") and isinstance(kept.get("verdict"), Mapping):
        return Earlier(verdict=Verdict.model_validate(kept["verdict"]), handle=handle)
    return Earlier(adopt_uid=kept.get("uid") or None)


def record(
    handle: Handle,
    *,
    finished: bool = False,
    concluded: bool = False,
    verdict: Verdict | None = None,
) -> dict[str, Any]:
    """The record of the run ``handle`` to keep."""
    kept: dict[str, Any] = {
        "name": handle.name,
        "namespace": handle.namespace,
        "uid": handle.uid,
        "backend": handle.backend,
    }
    if finished:
        kept["finished"] = True
    if concluded:
        kept["concluded"] = True
    if verdict is not None:
        kept["verdict"] = verdict.to_payload()
    return kept
