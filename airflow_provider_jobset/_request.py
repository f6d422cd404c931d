"""How the operator's arguments become the core's request, and the task's Airflow defaults.

:func:`operator_request` checks every ``JobSetOperator`` argument (the ones every way in shares
with the core's own checks, so the KFP launcher and ``jobsetctl`` refuse the same value with
the same words) and builds the :class:`~jobset_core.lifecycle.RunRequest` every try starts
from; :func:`operator_deadline` is a try's :class:`~jobset_core.lifecycle.Deadline`;
:func:`task_defaults` the ``retries`` and ``retry_policy`` a JobSet task gets. Pure: no I/O.
"""

from __future__ import annotations

import datetime as _dt
import functools
import warnings
from collections.abc import Mapping
from typing import Any

from airflow_provider_jobset import _decisions
from airflow_provider_jobset._arguments import check_operator_arguments, checked
from airflow_provider_jobset._compat import AIRFLOW_V_3_3_PLUS
from jobset_core import lifecycle as core
from jobset_core.lifecycle import Deadline, RunRequest

if AIRFLOW_V_3_3_PLUS:
    # With this module, not at the first task a DAG file builds: a DAG processor parses each
    # file in a process of its own, and Airflow's retry-policy module (its frozen dataclasses,
    # ~8 ms) would otherwise be most of that task's construction.
    from airflow.sdk import ExceptionRetryPolicy, RetryAction, RetryRule

__all__ = [
    "JobSetRetriesWarning",
    "default_retry_policy",
    "operator_deadline",
    "operator_request",
    "task_defaults",
]

_OWN = (
    "jobset",
    "namespace",
    "name",
    "deferrable",
    "timeout",
    "stream_logs",
    "link_template",
    "delete_on_kill",
    "retries",
    "kubernetes_conn_id",
    "config_file",
    "cluster_context",
    "in_cluster",
)
_POD_START = ("start_grace", "pending_timeout", "crash_loop_restarts")
_QUEUE = ("queue", "priority_class", "on_preemption")
_LOGS = (
    "log_pods",
    "log_container",
    "log_max_pods",
    "log_max_bytes_per_second",
    "log_max_bytes",
    "log_replicated_job",
    "log_job_index",
    "log_pod_index",
)


def operator_request(arguments: Mapping[str, Any]) -> RunRequest:
    """Check a ``JobSetOperator``'s arguments (by their names) and build the request every
    try starts from.

    Raises:
        TypeError, ValueError: naming the argument (``JobSetOperator(start_grace=...): ...``).
    """
    owner = "JobSetOperator"
    checked(owner, check_operator_arguments, **{k: arguments[k] for k in _OWN})
    return checked(owner, _request, arguments)


def _request(arguments: Mapping[str, Any]) -> RunRequest:
    followed = core.log_options(**{k: arguments[k] for k in _LOGS})  # checked even if unused
    core.seconds(arguments["admission_timeout"], "admission_timeout", positive=True)
    return RunRequest(
        backend=arguments["backend"],
        on_restart="return",  # each restart ends a try; the next one continues the run
        pod_start=core.pod_start_rules(**{k: arguments[k] for k in _POD_START}),
        delete_policy=arguments["delete_policy"],
        cancel_on_kill=arguments["delete_on_kill"],
        logs=followed if arguments["stream_logs"] else None,
        failed_pod_log_lines=arguments["failed_pod_log_lines"],
        inject_env=arguments["inject_env"],
        # A try ends once its delete is accepted, not when the garbage collector is done
        # (a minute after an API-server restart): a next try that meets the run still being
        # deleted waits for it at its start (Lifecycle.start), as every other way in does.
        wait_gone=False,
        **{k: arguments[k] for k in _QUEUE},
    )


def operator_deadline(
    timeout: _dt.timedelta | None,
    execution_timeout: _dt.timedelta | None,
    started: _dt.datetime | None,
    admission_timeout: _dt.timedelta | float | None = None,
) -> Deadline:
    """A try's limits: ``timeout`` of running (from the run's start, or from its admission
    when a queue holds it), ``admission_timeout`` of waiting for that admission, and
    ``execution_timeout`` from the task's start (``started``, else now), whichever ends
    first."""
    not_after = None
    if execution_timeout is not None:
        begun = started or _dt.datetime.now(_dt.UTC)
        not_after = (begun + execution_timeout).timestamp()
    return Deadline(
        timeout=timeout.total_seconds() if timeout is not None else None,
        not_after=not_after,
        admission_timeout=core.seconds(admission_timeout, "admission_timeout", positive=True),
    )


class JobSetRetriesWarning(UserWarning):
    """``retries`` cannot mirror the JobSet's ``failurePolicy.maxRestarts``."""


def default_retry_policy() -> Any:
    """Airflow 3.3's retry policy for JobSet tasks: retry a restart or a preemption at once,
    never retry a terminal failure (or a queue that will not run the JobSet), the default for
    anything else (``None`` before 3.3). A policy of its own per task, over rules built once
    per process (each rule imports its exception when built: a DAG file builds many tasks)."""
    if not AIRFLOW_V_3_3_PLUS:
        return None
    return ExceptionRetryPolicy(rules=list(_retry_rules()))


@functools.cache
def _retry_rules() -> tuple[Any, ...]:
    return (
        RetryRule(
            exception="jobset_core.errors.JobSetRestarting",
            action=RetryAction.RETRY,
            retry_delay=_dt.timedelta(seconds=1),
            reason="the JobSet restarted: the next try continues with it",
        ),
        RetryRule(
            exception="jobset_core.errors.JobSetPreempted",
            action=RetryAction.RETRY,
            retry_delay=_dt.timedelta(seconds=1),
            reason="the queue preempted the JobSet: the next try waits for its readmission",
        ),
        RetryRule(
            exception="jobset_core.errors.QueueRefused",
            action=RetryAction.FAIL,
            reason="the JobSet's queue will not run it: a new try would meet the same queue",
        ),
        RetryRule(
            exception="jobset_core.errors.PodsRefused",
            action=RetryAction.FAIL,
            reason="the cluster refuses the JobSet's pods: a new try meets the same policy",
        ),
        RetryRule(
            exception="jobset_core.errors.PodsCannotStart",
            action=RetryAction.FAIL,
            reason="the JobSet's pods cannot start: a new try would meet the same problem",
        ),
        RetryRule(
            exception="jobset_core.errors.JobSetFailed",
            action=RetryAction.FAIL,
            reason="the JobSet failed for good",
        ),
    )


def task_defaults(
    restarts: int | None, retries: int | None, given: Mapping[str, Any]
) -> dict[str, Any]:
    """The ``BaseOperator`` arguments a JobSet task gets unless given: ``retries`` from the
    JobSet's ``failurePolicy.maxRestarts`` as read at parse time (``restarts``; ``None``:
    unbounded or unknown; each restart ends a try; warned about when the user's ``retries``
    cannot mirror it) and, on Airflow 3.3+, :func:`default_retry_policy`."""
    plan = _decisions.plan_retries(restarts, retries)
    if plan.problem:
        warnings.warn(plan.problem, JobSetRetriesWarning, stacklevel=3)
    out: dict[str, Any] = {}
    if plan.retries is not None:
        out["retries"] = plan.retries
    if AIRFLOW_V_3_3_PLUS and given.get("retry_policy") is None:
        out["retry_policy"] = default_retry_policy()
    return out
