"""Which JobSet a KFP task owns: identity labels and a deterministic name (pure).

A task's JobSet is identified by three KFP values that the backend resolves before the task's
first attempt and keeps for every retry of it (the driver runs once per task; a retry re-runs
the executor pod with the same resolved inputs):

* ``run_id`` (``dsl.PIPELINE_JOB_ID_PLACEHOLDER``): the pipeline run;
* ``task_name`` (``dsl.PIPELINE_TASK_NAME_PLACEHOLDER``): the task's name in its DAG;
* ``task_id`` (``dsl.PIPELINE_TASK_ID_PLACEHOLDER``): on the KFP backend the ID of the DAG the
  task runs in, which tells apart the iterations of a ``ParallelFor`` and the calls of a
  sub-pipeline.

They become identity labels (``jobset-core/kfp-run-id`` ...), and the JobSet's name is derived
from their hash (see :func:`jobset_core.identity.resolve_name`), so a retried step finds
and adopts its JobSet instead of creating a second one.
"""

from __future__ import annotations

from collections.abc import Mapping

from jobset_core import identity as ident
from jobset_core.errors import Problem, SpecError
from jobset_core.models import JobSet

__all__ = [
    "RUN_ID_KEY",
    "TASK_ID_KEY",
    "TASK_NAME_KEY",
    "checked_run_id",
    "derived_name",
    "kfp_identity",
    "name_as_prefix",
    "run_selector",
    "unresolved",
]

RUN_ID_KEY = "kfp-run-id"
TASK_NAME_KEY = "kfp-task-name"
TASK_ID_KEY = "kfp-task-id"
_PLACEHOLDER_MARK = "{{$"


def unresolved(value: str) -> bool:
    """Whether a value is empty or still a KFP placeholder (``{{$.pipeline_job_uuid}}``...).

    The KFP backend resolves placeholders only in values passed to a task; a component's default
    value reaches the function as the literal placeholder text.
    """
    return not value.strip() or _PLACEHOLDER_MARK in value


_ARGUMENTS = {RUN_ID_KEY: "run_id", TASK_NAME_KEY: "task_name", TASK_ID_KEY: "task_id"}
_PLACEHOLDERS = {
    RUN_ID_KEY: "dsl.PIPELINE_JOB_ID_PLACEHOLDER",
    TASK_NAME_KEY: "dsl.PIPELINE_TASK_NAME_PLACEHOLDER",
    TASK_ID_KEY: "dsl.PIPELINE_TASK_ID_PLACEHOLDER",
}


def _checked(values: Mapping[str, str]) -> dict[str, str]:
    problems = [
        Problem(
            _ARGUMENTS[key],
            f"got {value!r}: pass {_ARGUMENTS[key]}={_PLACEHOLDERS[key]} to the task "
            "(the KFP backend does not resolve placeholders in default values)",
            "kfp-identity",
        )
        for key, value in values.items()
        if unresolved(value)
    ]
    if problems:
        raise SpecError(problems, "launch_jobset identity")
    return dict(values)


def kfp_identity(run_id: str, task_name: str, task_id: str) -> dict[str, str]:
    """The identity of a task's JobSet.

    Raises:
        SpecError: a value is empty or an unresolved placeholder (every such value listed). A
            constant identity would let the next run adopt this run's JobSet.
    """
    return _checked({RUN_ID_KEY: run_id, TASK_NAME_KEY: task_name, TASK_ID_KEY: task_id})


def checked_run_id(run_id: str) -> str:
    """``run_id`` when it is resolved (see :func:`kfp_identity`).

    Raises:
        SpecError: it is empty or an unresolved placeholder.
    """
    return _checked({RUN_ID_KEY: run_id})[RUN_ID_KEY]


def run_selector(run_id: str) -> dict[str, str]:
    """The label selector of every object the launcher made for ``run_id``."""
    return ident.identity_labels({RUN_ID_KEY: run_id})


def name_as_prefix(jobset: JobSet) -> JobSet:
    """A copy whose ``metadata.name`` became the prefix of the derived name.

    A fixed name would be shared by every run of a scheduled pipeline; the backends derive
    ``<prefix>-<hash of the identity>`` from ``generateName`` instead (the prefix is cut so
    that child Job and pod names stay within the DNS limits).
    """
    name = jobset.metadata.name
    if not name:
        return jobset
    metadata = jobset.metadata.model_copy(update={"name": None, "generate_name": f"{name}-"})
    return jobset.model_copy(update={"metadata": metadata})


def derived_name(jobset: JobSet, identity: Mapping[str, str]) -> str:
    """The name the backends will give the task's JobSet (after :func:`name_as_prefix`)."""
    return ident.resolve_name(name_as_prefix(jobset), identity)
