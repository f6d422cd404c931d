"""The one outcome type that flows from the core to the adapters, and the typed progress events.

A run of a JobSet — on either backend — ends in a :class:`Outcome`. The Airflow operator and
the KFP component pass it on unchanged (as XCom / component outputs); they never re-derive
state from raw API objects. Progress while waiting is reported as :class:`Progress` events.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "MAX_RESULT_BYTES",
    "PODS_CANNOT_START",
    "Backend",
    "Outcome",
    "Phase",
    "Progress",
    "ReplicatedJobCounts",
    "TerminalState",
    "decode_result",
    "result_problem",
]

Backend = Literal["controller", "native"]
TerminalState = Literal["Completed", "Failed"]

#: The outcome reason of a run that failed because its pods cannot start (a wrong image, a
#: missing Secret or ConfigMap, a crash loop, no node that fits), as decided by the core's pod
#: start rules (:mod:`jobset_core.policy.pod_start`). The JobSet itself never fails for that:
#: this reason tells such a run apart from one whose JobSet reached ``Failed``.
PODS_CANNOT_START = "PodsCannotStart"

#: The most of a container's termination message the kubelet keeps (bytes): of a longer
#: message it keeps the last 4 KiB (it reads the file's tail,
#: ``kubecontainer.MaxContainerTerminationMessageLength``; a pod with many containers gets less
#: each, 12 KiB in all).
MAX_RESULT_BYTES = 4096


class Phase(str, Enum):
    """Where a JobSet is in its life, as one value (upstream has no ``Running`` condition)."""

    PENDING = "Pending"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUSPENDED = "Suspended"
    COMPLETED = "Completed"
    FAILED = "Failed"

    @property
    def terminal(self) -> bool:
        """Whether nothing more will happen."""
        return self in (Phase.COMPLETED, Phase.FAILED)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ReplicatedJobCounts(_Frozen):
    """Child-Job counts of one replicated job in the current restart attempt."""

    name: str
    replicas: int = 0
    ready: int = 0
    active: int = 0
    succeeded: int = 0
    failed: int = 0
    suspended: int = 0


class Progress(_Frozen):
    """One observed change of a running JobSet (one line of progress for a user)."""

    kind: Literal[
        "created",
        "adopted",
        "status",
        "restarting",
        "creation-failed",
        "cannot-start",
        "deleted",
        "queued",
        "admitted",
        "preempted",
        "refused",
        "unchecked",
        "waiting",
    ]
    phase: Phase
    restarts: int = 0
    replicated_jobs: tuple[ReplicatedJobCounts, ...] = ()
    reason: str = ""
    message: str = ""

    def line(self) -> str:
        """A one-line human summary."""
        counts = " ".join(
            f"{c.name}[ready={c.ready} active={c.active} ok={c.succeeded} failed={c.failed}]"
            for c in self.replicated_jobs
        )
        parts = [self.phase.value, f"restarts={self.restarts}", counts, self.reason, self.message]
        return f"{self.kind}: " + " ".join(p for p in parts if p)


class Outcome(_Frozen):
    """How a JobSet run ended (or stands, when ``terminal_state`` is ``None``).

    Attributes:
        result: The coordinator container's termination message, JSON-decoded when it parses
            (else the raw text); ``None`` when there is no message.
    """

    name: str
    namespace: str
    uid: str = ""
    backend: Backend
    phase: Phase
    terminal_state: TerminalState | None = None
    reason: str = ""
    message: str = ""
    restarts: int = 0
    restarts_count_towards_max: int = 0
    failed_job: str | None = None
    replicated_jobs: tuple[ReplicatedJobCounts, ...] = ()
    created_at: str | None = None
    finished_at: str | None = None
    duration_seconds: float | None = None
    result: Any = Field(default=None)

    @property
    def succeeded(self) -> bool:
        """True only when the JobSet completed."""
        return self.terminal_state == "Completed"


def decode_result(message: str | None) -> Any:
    """A termination message as the run's result: JSON when it parses, else the text."""
    if message is None or message == "":
        return None
    try:
        return json.loads(message)
    except ValueError:
        return message


def result_problem(message: str | None, container: str = "") -> str:
    """What is wrong with a termination message as a result, in words (``""``: nothing).

    A message of :data:`MAX_RESULT_BYTES` or more was most likely cut by the kubelet (it keeps
    the last 4 KiB of each container's message); a message that is not JSON is returned as its
    text, which a downstream step expecting a JSON value should hear about.
    """
    if not message:
        return ""
    who = f"container {container}'s termination message" if container else "termination message"
    size = len(message.encode("utf-8"))
    try:
        json.loads(message)
    except ValueError:
        if size >= MAX_RESULT_BYTES:
            return (
                f"the result ({who}) is {size} bytes, the kubelet's limit of "
                f"{MAX_RESULT_BYTES}: the kubelet kept only its last {MAX_RESULT_BYTES} bytes, "
                "which are not valid JSON; the result is that text. Keep results under 4 KiB: "
                "write large outputs to storage and return their location"
            )
        return f"the result ({who}) is not JSON: it is returned as text ({size} bytes)"
    if size >= MAX_RESULT_BYTES:
        return (
            f"the result ({who}) is {size} bytes, the kubelet's limit of {MAX_RESULT_BYTES}: "
            "a longer result would have been cut"
        )
    return ""
