"""The typed payload a :class:`~airflow_provider_jobset.triggers.JobSetTrigger` fires.

Trigger events travel through the metadata database as JSON; this model is what goes in and
what comes out (``JobSetEvent.model_validate(event)``), so neither side deals in stringly-typed
dicts. The payload stays small: the identity and the :class:`~jobset_core.outcome.Outcome`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from jobset_core.outcome import Outcome

__all__ = ["JobSetEvent"]


class JobSetEvent(BaseModel):
    """Why a JobSet trigger fired.

    Attributes:
        kind: ``outcome`` (terminal, or restarting with ``on_restart="return"``; see
            ``outcome``), ``timeout`` (the deadline passed first), ``gone`` (the JobSet was
            deleted, or replaced by a namesake with another UID).
        name: The JobSet.
        namespace: Its namespace.
        uid: The UID the trigger watched.
        outcome: The outcome when ``kind == "outcome"``.
        message: A human explanation.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["outcome", "timeout", "gone"]
    name: str
    namespace: str
    uid: str = ""
    outcome: Outcome | None = None
    message: str = ""

    def to_payload(self) -> dict[str, Any]:
        """The JSON-able payload for ``TriggerEvent``."""
        return self.model_dump(mode="json")
