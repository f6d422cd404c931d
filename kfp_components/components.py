"""The Kubeflow Pipelines components: ``launch_jobset`` and ``cleanup_jobsets``.

Both run in the launcher image (:data:`LAUNCHER_IMAGE`, built from ``kfp_components/Dockerfile``:
this library and kfp on a Python base image). Their bodies only hand over to
:mod:`kfp_components.launcher`; nothing is pip-installed when the pod starts.

Called in a pipeline, both components fill in the task identity with KFP placeholders (the
backend resolves placeholders only in values passed to a task, never in defaults) and turn
caching off (a cached launch would skip the training). The compiled
``launch_jobset.yaml`` cannot do either: pass the placeholders and call
``set_caching_options(False)`` yourself (see ``docs/kfp.md``).
"""

from collections.abc import Callable
from typing import Any, NamedTuple, Optional

from kfp import dsl
from kfp.dsl import Metrics, Output, PipelineTask, TaskConfig
from kfp.dsl.python_component import PythonComponent

from jobset_core._version import __version__

__all__ = ["LAUNCHER_IMAGE", "cleanup_jobsets", "launch_jobset"]

#: The launcher image the components run in (override per task with ``set_container_image``).
LAUNCHER_IMAGE = f"ghcr.io/airflow-provider-jobset/kfp-launcher:{__version__}-python3.11"

#: The task identity, as KFP placeholders (resolved when passed to a task).
IDENTITY_ARGUMENTS = {
    "run_id": dsl.PIPELINE_JOB_ID_PLACEHOLDER,
    "task_name": dsl.PIPELINE_TASK_NAME_PLACEHOLDER,
    "task_id": dsl.PIPELINE_TASK_ID_PLACEHOLDER,
}

#: What the pipeline author sets on a ``launch_jobset`` task that goes to the JobSet's pods
#: instead of the launcher's: resources, node selectors, tolerations, affinity and volumes go
#: only to the JobSet; environment variables go to both (proxy settings reach the launcher).
TASK_CONFIG_PASSTHROUGHS = [
    dsl.TaskConfigField.RESOURCES,
    dsl.TaskConfigPassthrough(field=dsl.TaskConfigField.ENV, apply_to_task=True),
    dsl.TaskConfigField.KUBERNETES_NODE_SELECTOR,
    dsl.TaskConfigField.KUBERNETES_TOLERATIONS,
    dsl.TaskConfigField.KUBERNETES_AFFINITY,
    dsl.TaskConfigField.KUBERNETES_VOLUMES,
]


class _LauncherComponent(PythonComponent):
    """A Python component that fills in the identity placeholders and turns caching off
    (unless the caller passes them or re-enables caching on the task).

    A cached launch would report the last run's training without training; a cached cleanup
    (a retried run has the same run id) would delete nothing.
    """

    def __init__(self, component: PythonComponent, *, caching: bool) -> None:
        super().__init__(component.component_spec, component.python_func)
        self._caching = caching

    def __call__(self, *args: Any, **kwargs: Any) -> PipelineTask:
        for name, placeholder in IDENTITY_ARGUMENTS.items():
            if name in self._component_inputs:
                kwargs.setdefault(name, placeholder)
        task = super().__call__(*args, **kwargs)
        if not self._caching and task.state.name == "FUTURE":  # in a pipeline, not run yet
            task.set_caching_options(False)
        return task


def _launcher(*, caching: bool) -> Callable[[PythonComponent], _LauncherComponent]:
    def wrap(component: PythonComponent) -> _LauncherComponent:
        return _LauncherComponent(component, caching=caching)

    return wrap


@_launcher(caching=False)
@dsl.component(
    base_image=LAUNCHER_IMAGE,
    install_kfp_package=False,
    task_config_passthroughs=TASK_CONFIG_PASSTHROUGHS,
)
def launch_jobset(
    *,
    metrics: Output[Metrics],
    task_config: TaskConfig,
    jobset: str = "",
    jobset_dict: Optional[dict] = None,  # noqa: UP045 - kfp reads typing.Optional
    namespace: str = "",
    backend: str = "auto",
    timeout_seconds: int = 0,
    delete_policy: str = "on_timeout",
    follow_logs: bool = False,
    log_replicated_job: str = "",
    log_job_index: int = 0,
    log_pod_index: int = 0,
    log_pods: str = "coordinator",
    log_container: str = "",
    log_max_pods: int = 8,
    log_max_bytes_per_second: int = 65536,
    log_max_bytes: int = 16777216,
    start_grace_seconds: float = 120.0,
    pending_timeout_seconds: float = -1.0,
    crash_loop_restarts: int = 0,
    inject_env: bool = True,
    queue: str = "",
    priority_class: str = "",
    admission_timeout_seconds: int = 0,
    on_preemption: str = "wait",
    task_config_replicated_jobs: Optional[list] = None,  # noqa: UP045
    run_id: str = dsl.PIPELINE_JOB_ID_PLACEHOLDER,
    task_name: str = dsl.PIPELINE_TASK_NAME_PLACEHOLDER,
    task_id: str = dsl.PIPELINE_TASK_ID_PLACEHOLDER,
) -> NamedTuple(
    "Outputs",
    [
        ("jobset_name", str),
        ("jobset_uid", str),
        ("terminal_state", str),
        ("restarts", int),
        ("result", dict),
        ("backend", str),
    ],
):
    """Run a JobSet as a pipeline step and wait until it completes; a failed JobSet fails
    the step.

    The JobSet's name is derived from the pipeline run and task (its ``metadata.name``, if
    any, is the prefix), so a retried step reattaches to the JobSet its first attempt made.
    Resources, environment, node selectors, tolerations, affinity and volumes set on the task
    are copied onto the JobSet's pod templates.

    Args:
        metrics: Per replicated job: replicas, succeeded, failed, ready, active and
            duration_seconds; the run's restarts and duration_seconds.
        task_config: Filled by KFP from the task's settings (do not pass).
        jobset: The JobSet as YAML or JSON text (or give ``jobset_dict``).
        jobset_dict: The JobSet as a dict (or give ``jobset``).
        namespace: Where to run it (default: the launcher pod's namespace).
        backend: ``auto`` (the JobSet controller when installed, else native), ``controller``
            or ``native`` (the launcher creates the Jobs and Service itself).
        timeout_seconds: Fail the step after the JobSet ran this long (0: no limit); when a
            Kueue queue holds it, only the time it is admitted counts.
        delete_policy: ``on_timeout`` (delete a JobSet the step gave up on), ``never``,
            ``on_success`` (also after completion; failed ones are kept to debug) or
            ``always``. A terminated run always deletes.
        follow_logs: Print pod logs while waiting (``log_pods``), each line prefixed with its
            pod.
        log_replicated_job: With ``log_pods="coordinator"``: whose log (default: the
            coordinator, else the first replicated job).
        log_job_index: Job index of that pod.
        log_pod_index: Pod (completion) index of that pod.
        log_pods: ``coordinator``, ``leaders`` (pod 0 of job 0 of each replicated job),
            ``all`` or a label selector.
        log_container: Only this container's log (default: every container).
        log_max_pods: Pods followed at most.
        log_max_bytes_per_second: Lines above this rate are left out and counted (0: no
            limit).
        log_max_bytes: Bytes printed in all, then a "truncated" line (0: no limit).
        start_grace_seconds: Fail the step when a container waits with ``ErrImagePull``,
            ``CreateContainerConfigError``... longer than this (0: at once; -1: never).
        pending_timeout_seconds: Fail the step when a pod stays unschedulable this long
            (-1: never).
        crash_loop_restarts: Fail the step when a crash-looping container restarted this
            often (0: never).
        inject_env: Give every container ``JOBSET_NAME``, ``JOBSET_REPLICATED_JOB``,
            ``JOBSET_JOB_INDEX``, ``JOBSET_POD_INDEX`` and ``JOBSET_RESTART_ATTEMPT``.
        queue: A Kueue LocalQueue to run through (the JobSet is created suspended with the
            label ``kueue.x-k8s.io/queue-name`` and runs once admitted; the log says where it
            waits and why). Controller backend only.
        priority_class: The Kueue WorkloadPriorityClass of the run.
        admission_timeout_seconds: Fail the step when the queue has not admitted the JobSet
            within this long of its submission, or of an eviction (0: no limit).
        on_preemption: When Kueue preempts the JobSet: ``wait`` (for its readmission),
            ``retry`` (exit 7: a retry of the step reattaches) or ``fail``. A deactivated
            Workload, or a request no quota can hold, fails the step at once.
        task_config_replicated_jobs: Copy the task's settings onto these replicated jobs only
            (default: all).
        run_id: The pipeline run (filled in with ``dsl.PIPELINE_JOB_ID_PLACEHOLDER``).
        task_name: The task (filled in with ``dsl.PIPELINE_TASK_NAME_PLACEHOLDER``).
        task_id: The task's DAG (filled in with ``dsl.PIPELINE_TASK_ID_PLACEHOLDER``).

    Returns:
        jobset_name, jobset_uid, terminal_state (``Completed``), restarts, result (the
        coordinator's termination message as JSON; a non-object wrapped as
        ``{"value": ...}``) and backend.
    """
    from kfp_components.launcher import WaitInputs, launch_step

    return launch_step(
        jobset=jobset,
        jobset_dict=jobset_dict,
        namespace=namespace,
        backend=backend,
        timeout_seconds=timeout_seconds,
        delete_policy=delete_policy,
        follow_logs=follow_logs,
        log_replicated_job=log_replicated_job,
        log_job_index=log_job_index,
        log_pod_index=log_pod_index,
        task_config=task_config,
        task_config_replicated_jobs=task_config_replicated_jobs,
        run_id=run_id,
        task_name=task_name,
        task_id=task_id,
        metrics=metrics,
        wait=WaitInputs(
            log_pods=log_pods,
            log_container=log_container,
            log_max_pods=log_max_pods,
            log_max_bytes_per_second=log_max_bytes_per_second,
            log_max_bytes=log_max_bytes,
            start_grace_seconds=start_grace_seconds,
            pending_timeout_seconds=pending_timeout_seconds,
            crash_loop_restarts=crash_loop_restarts,
            inject_env=inject_env,
            queue=queue,
            priority_class=priority_class,
            admission_timeout_seconds=admission_timeout_seconds,
            on_preemption=on_preemption,
        ),
    )


@_launcher(caching=False)
@dsl.component(base_image=LAUNCHER_IMAGE, install_kfp_package=False)
def cleanup_jobsets(
    *,
    namespace: str = "",
    backend: str = "auto",
    run_id: str = dsl.PIPELINE_JOB_ID_PLACEHOLDER,
) -> int:
    """Delete every JobSet (and native anchor) the pipeline run launched; for exit handlers.

    Args:
        namespace: Where the run's JobSets are (default: the launcher pod's namespace).
        backend: ``auto`` (JobSets where the API is served, and native anchors), ``controller``
            or ``native``.
        run_id: The pipeline run (filled in with ``dsl.PIPELINE_JOB_ID_PLACEHOLDER``).

    Returns:
        How many objects were deleted.
    """
    from kfp_components.launcher import cleanup_step

    return cleanup_step(namespace=namespace, run_id=run_id, backend=backend)
