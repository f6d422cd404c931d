"""Which task instance a JobSet belongs to (pure).

A JobSet created by the operator carries identity labels naming its task instance (DAG, task,
hashed run id, map index), and its name is derived from the same values by the core
(``<prefix>-<hash of the identity>``), so every try of one task instance computes the same name
and the same labels: a new try after a worker crash finds the JobSet of the previous try
instead of creating a second one, and never takes the JobSet of another run (labels differ).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

__all__ = [
    "ANNOTATION_RUN_ID",
    "KEY_DAG_ID",
    "KEY_MAP_INDEX",
    "KEY_RUN_ID_HASH",
    "KEY_TASK_ID",
    "TaskIdentity",
    "name_prefix",
]

_PREFIX = "airflow-jobset/"
KEY_DAG_ID = _PREFIX + "dag-id"
KEY_TASK_ID = _PREFIX + "task-id"
KEY_RUN_ID_HASH = _PREFIX + "run-id-hash"
KEY_MAP_INDEX = _PREFIX + "map-index"
ANNOTATION_RUN_ID = _PREFIX + "run-id"
_MAX_PREFIX = 28


def name_prefix(text: str) -> str:
    """A DNS-1035 prefix made of ``text``: lowercase, ``-`` separated, starting with a letter,
    at most 28 characters (the core appends ``-<10 hex digits>``)."""
    out = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    if not out or not out[0].isalpha():
        out = f"js-{out}"
    return out[:_MAX_PREFIX].rstrip("-")


@dataclass(frozen=True)
class TaskIdentity:
    """The task instance a JobSet belongs to.

    Attributes:
        dag_id: The DAG.
        task_id: The task.
        run_id: The DAG run.
        map_index: The index of a mapped task instance (``-1`` when not mapped).
    """

    dag_id: str
    task_id: str
    run_id: str
    map_index: int = -1

    @property
    def run_id_hash(self) -> str:
        """16 hex digits of the run id's SHA-256 (run ids are rarely valid label values)."""
        return hashlib.sha256(self.run_id.encode()).hexdigest()[:16]

    def identity(self) -> dict[str, str]:
        """The identity handed to the backend (it becomes label-safe labels)."""
        return {
            KEY_DAG_ID: self.dag_id,
            KEY_TASK_ID: self.task_id,
            KEY_RUN_ID_HASH: self.run_id_hash,
            KEY_MAP_INDEX: str(self.map_index),
        }

    def annotations(self) -> dict[str, str]:
        """The run id in full, for people reading the object."""
        return {ANNOTATION_RUN_ID: self.run_id}
