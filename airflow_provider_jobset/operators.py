"""``JobSetOperator``: run a Kubernetes JobSet as an Airflow task.

The operator is a thin shell over the core's one lifecycle
(:class:`jobset_core.lifecycle.Lifecycle`, entered through its one door): the JobSet is loaded
and validated by :mod:`jobset_core`, named and labelled for its task instance
(:mod:`._identity`), then

* worker mode: submitted (or adopted: an earlier try's JobSet is never duplicated), waited for
  and finished in one call, through the core's blocking façade;
* deferrable: submitted here, waited for by :class:`~.triggers.JobSetTrigger` in the triggerer
  with the same wait, and finished in :meth:`JobSetOperator.execute_complete`.

Both end with the same :class:`~jobset_core.lifecycle.Verdict`, mapped here to Airflow: the
result on success, the core's error otherwise (see :mod:`.exceptions` for which are retried).

Importing this module imports no Kubernetes client.
"""

from __future__ import annotations

import datetime as _dt
import functools
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from airflow_provider_jobset._arguments import CONNECTION_FIELDS, check_rendered
from airflow_provider_jobset._compat import (
    AirflowFailException,
    BaseOperator,
    Deferrable,
    task_state_store,
)
from airflow_provider_jobset._identity import TaskIdentity, name_prefix
from airflow_provider_jobset._parse_time import restarts_at_parse
from airflow_provider_jobset._request import (
    JobSetRetriesWarning,
    default_retry_policy,
    operator_deadline,
    operator_request,
    task_defaults,
)
from airflow_provider_jobset._state import FINAL, STATE_KEY, record
from airflow_provider_jobset._state import earlier as previous
from airflow_provider_jobset.exceptions import NEVER_RETRIED
from airflow_provider_jobset.hooks import JobSetHook
from airflow_provider_jobset.links import (
    XCOM_CONNECTION,
    XCOM_NAME,
    XCOM_NAMESPACE,
    XCOM_UID,
    JobSetLink,
)
from jobset_core import lifecycle as core
from jobset_core.errors import ConfigError, JobSetGone, SpecError, Unreachable
from jobset_core.labels import KUEUE_QUEUE as QUEUE_LABEL
from jobset_core.lifecycle import (
    DEFAULT_GRACE,
    BackendChoice,
    DeletePolicy,
    Finished,
    Handle,
    LogLine,
    OnPreemption,
    Reporter,
    RunRequest,
    Started,
    Submission,
    Verdict,
    error_for,
)
from jobset_core.models import JobSet, dump_yaml, load_jobset, source_label

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

    from jobset_core.lifecycle import Lifecycle

__all__ = ["JobSetOperator", "JobSetRetriesWarning", "default_retry_policy"]

T = TypeVar("T")

XCOM_OUTCOME = "jobset_outcome"
XCOM_BACKEND = "jobset_backend"
_DEFER_GRACE = _dt.timedelta(seconds=60)


class JobSetOperator(BaseOperator):
    """Run a JobSet and wait for it; the return value is its result.

    Args:
        jobset: The JobSet: a :class:`~jobset_core.models.JobSet`, a mapping, a YAML/JSON
            string, or a path ending in ``.yaml``/``.yml``/``.json`` (rendered with Jinja
            like any template file). Validated when the task starts, before anything is
            created; every problem is reported with its field path.
        namespace: Where to run it (default: ``metadata.namespace``, else the connection's,
            else the kubeconfig context's, else ``default``).
        name: The JobSet's exact name. Default: a deterministic name
            ``<metadata.name or task_id>-<hash of dag, task, run, map index>``, the same for
            every try of a task instance.
        backend: ``auto`` (controller when the cluster serves the JobSet API), ``controller``
            or ``native`` (no controller needed: the operator creates the child Jobs).
        kubernetes_conn_id: An Airflow ``kubernetes`` connection.
        config_file: A kubeconfig file (overrides the connection).
        cluster_context: A kubeconfig context (overrides the connection).
        in_cluster: Use the pod's service account (overrides the connection).
        deferrable: Wait in the triggerer (default: ``[operators] default_deferrable``).
        timeout: Longest the JobSet may run per try; also enforced while deferred. When a
            queue holds it, only the time it is admitted counts (queue time never does).
            ``execution_timeout`` (the whole try, queue time included) is enforced too.
        queue: A Kueue LocalQueue to run through (the label ``kueue.x-k8s.io/queue-name``;
            the JobSet is created suspended and runs once Kueue admits it; the task log says
            where it waits and why). Controller backend only.
        priority_class: The Kueue WorkloadPriorityClass of the run.
        admission_timeout: Longest wait for the queue's admission, from the submission and
            again from each eviction (a ``timedelta`` or seconds; ``None``: no limit): the try
            fails with ``AdmissionTimeout`` (retried, as a timeout is; ``delete_policy``
            applies as to a timeout).
        on_preemption: When Kueue preempts the run: ``wait`` (default: wait for its
            readmission), ``retry`` (end the try with ``JobSetPreempted``; the next try
            reattaches to the same JobSet) or ``fail`` (``QueueRefused``, never retried). A
            deactivated Workload, or a request no quota can ever hold, fails the try at once
            whatever this says.
        delete_policy: Delete the JobSet when the task ends: ``on_success`` (default: a
            completed run, and one the try gave up on; failed ones are kept for inspection),
            ``on_timeout`` (only what the try gave up on), ``always`` or ``never``. A restart
            never deletes: the next try continues with the same JobSet.
        stream_logs: Follow pod logs into the task log while waiting, in the worker and while
            deferred (the triggerer's lines show in the task log; after a triggerer restart
            they continue without repeating a line). Each line is prefixed with its pod (and
            container, when several are followed).
        log_pods: Whose logs: ``coordinator`` (default: the coordinator pod, or the pod
            ``log_replicated_job``/``log_job_index``/``log_pod_index`` names), ``leaders``
            (pod 0 of job 0 of each replicated job), ``all``, or a label selector.
        log_container: Only this container's log (default: every container of a pod).
        log_max_pods: Pods followed at most.
        log_max_bytes_per_second: Lines above this rate are left out, and a line says how
            many (``None``: no limit).
        log_max_bytes: Bytes shown in all; then a line says the logs were truncated
            (``None``: no limit).
        log_replicated_job: With ``log_pods="coordinator"``, the replicated job of the pod
            whose log is shown (default: the coordinator, else the first replicated job).
        log_job_index: The Job index of that pod.
        log_pod_index: The pod index of that pod.
        failed_pod_log_lines: Lines of each failed pod's log shown when a try fails.
        start_grace: How long a container may wait with ``ErrImagePull``,
            ``ImagePullBackOff``, ``InvalidImageName``, ``CreateContainerConfigError`` or
            ``CreateContainerError`` before the try fails with ``PodsCannotStart`` (a
            ``timedelta`` or seconds; 0: at once; ``None``: never). ``ContainerCreating`` (a
            big image being pulled) never counts.
        pending_timeout: How long a pod may stay unschedulable before the try fails
            (``None``, the default: never; a cluster may be scaling up).
        crash_loop_restarts: Fail the try once a container in ``CrashLoopBackOff`` restarted
            this many times (``None``, the default: never).
        inject_env: Give every container ``JOBSET_NAME``, ``JOBSET_REPLICATED_JOB``,
            ``JOBSET_JOB_INDEX``, ``JOBSET_POD_INDEX`` and ``JOBSET_RESTART_ATTEMPT`` from the
            Downward API (a variable of the container's own of the same name wins).
        link_template: URL template of the extra link (``{namespace}``, ``{name}``,
            ``{uid}``); default ``[jobset] link_template``.
        delete_on_kill: Delete the JobSet when the task is killed (``on_kill``, trigger kill).
        retries: Task retries. Unset: ``failurePolicy.maxRestarts`` (each restart ends a try).
        **kwargs: Other ``BaseOperator`` arguments.
    """

    template_fields: Sequence[str] = ("jobset", "namespace", "name", *CONNECTION_FIELDS)
    template_ext: Sequence[str] = (".yaml", ".yml", ".json")
    template_fields_renderers = {"jobset": "yaml"}
    operator_extra_links = (JobSetLink(),)
    ui_color = "#d5e8f7"
    deferrable = Deferrable()

    def __init__(
        self,
        *,
        jobset: JobSet | Mapping[str, Any] | str,
        namespace: str | None = None,
        name: str | None = None,
        backend: BackendChoice = "auto",
        kubernetes_conn_id: str | None = JobSetHook.default_conn_name,
        config_file: str | None = None,
        cluster_context: str | None = None,
        in_cluster: bool | None = None,
        deferrable: bool | None = None,
        timeout: _dt.timedelta | None = None,
        queue: str | None = None,
        priority_class: str | None = None,
        admission_timeout: _dt.timedelta | float | None = None,
        on_preemption: OnPreemption = "wait",
        delete_policy: DeletePolicy = "on_success",
        stream_logs: bool = True,
        log_pods: str = "coordinator",
        log_container: str | None = None,
        log_max_pods: int = 8,
        log_max_bytes_per_second: int | None = 64 * 1024,
        log_max_bytes: int | None = 16 * 1024 * 1024,
        log_replicated_job: str | None = None,
        log_job_index: int = 0,
        log_pod_index: int = 0,
        failed_pod_log_lines: int = 50,
        start_grace: _dt.timedelta | float | None = _dt.timedelta(seconds=DEFAULT_GRACE),
        pending_timeout: _dt.timedelta | float | None = None,
        crash_loop_restarts: int | None = None,
        inject_env: bool = True,
        link_template: str | None = None,
        delete_on_kill: bool = True,
        retries: int | None = None,
        **kwargs: Any,
    ) -> None:
        arguments = {k: v for k, v in locals().items() if k not in ("self", "kwargs")}
        arguments.pop("__class__", None)
        #: What every try asks of the core, but for the JobSet, where and when (every
        #: argument checked here: the shared ones by the core's checks).
        self.request: RunRequest = operator_request(arguments)
        kwargs.update(task_defaults(restarts_at_parse(jobset), retries, kwargs))
        super().__init__(**kwargs)
        self.jobset = jobset
        self.namespace = namespace
        self.name = name
        self.backend = backend
        self.kubernetes_conn_id = kubernetes_conn_id
        self.config_file = config_file
        self.cluster_context = cluster_context
        self.in_cluster = in_cluster
        self.deferrable = deferrable
        self.timeout = timeout
        self.admission_timeout = admission_timeout
        self.delete_policy: DeletePolicy = delete_policy
        self.stream_logs = stream_logs
        self.link_template = link_template
        self.delete_on_kill = delete_on_kill
        self._handle: Handle | None = None
        #: How the try's run ended, kept for the OpenLineage facets.
        self._verdict: Verdict | None = None

    def render_template_fields(self, context: Any, jinja_env: Any = None) -> None:
        """Render the templated fields, then check what they became: a wrong value fails the
        task (no retry) before anything is created."""
        super().render_template_fields(context, jinja_env)
        try:
            check_rendered("JobSetOperator", **{f: getattr(self, f) for f in self.template_fields})
        except (TypeError, ValueError) as err:
            raise AirflowFailException(f"{err} (nothing was created)") from err

    # ------------------------------------------------------------------ the request

    @functools.cached_property
    def hook(self) -> JobSetHook:
        """The hook over the task's connection (built once per task)."""
        return JobSetHook.of(self)

    def build_request(self, identity: TaskIdentity, namespace: str, **changes: Any) -> RunRequest:
        """The try's request: the JobSet named for its task instance (``name``, else a
        deterministic name of the task instance), in ``namespace``, with its identity.

        Raises:
            AirflowFailException: the JobSet cannot be read (every problem with its path).
        """
        source = source_label(self.jobset) or f"JobSetOperator(task_id={self.task_id!r}).jobset"
        try:
            jobset = load_jobset(self.jobset)
        except SpecError as err:
            refused = err.for_a_run(source)
            raise AirflowFailException(f"invalid JobSet (nothing was created):\n{refused}") from err
        meta = jobset.metadata
        if self.name:
            meta = meta.model_copy(update={"name": self.name, "generate_name": None})
        else:
            prefix = name_prefix(meta.name or meta.generate_name or self.task_id)
            meta = meta.model_copy(update={"name": None, "generate_name": prefix})
        meta = meta.model_copy(
            update={"annotations": {**(meta.annotations or {}), **identity.annotations()}}
        )
        return self.request.but(
            jobset=jobset.model_copy(update={"metadata": meta}),
            source=source,
            namespace=namespace,
            identity=identity.identity(),
            **changes,
        )

    def _lifecycle(self, work: Callable[[Lifecycle], Awaitable[T]]) -> T:
        """Run ``work`` on the core's lifecycle, in this process (the blocking door)."""
        try:
            return core.blocking(self.hook.get_config().client_settings(), work)
        except SpecError as err:
            raise AirflowFailException(f"invalid JobSet (nothing was created):\n{err}") from err
        except NEVER_RETRIED as error:  # a run taken by another, a spec the backend refused
            raise AirflowFailException(str(error)) from error

    def prepare_jobset(self, identity: TaskIdentity, namespace: str) -> JobSet:
        """The JobSet as a try of ``identity`` creates it in ``namespace``: named, labelled,
        given the workload's variables and validated, by the core's one preparation.

        Raises:
            AirflowFailException: the spec is invalid (every problem with its field path).
        """
        try:
            prepared, _ = core.prepare(self.build_request(identity, namespace))
        except SpecError as err:
            raise AirflowFailException(f"invalid JobSet (nothing was created):\n{err}") from err
        return prepared

    def dry_run(self) -> None:
        """Print the JobSet that would be created (for a placeholder run id), then ask the
        cluster of the task's connection what it makes of it: a server-side dry run of the
        JobSet, its child Jobs and pods as they would be created, in the task's namespace, as
        the task's identity (its admission: Pod Security, quotas, limits, webhooks). Nothing
        is created.

        Without a cluster (no connection or kubeconfig, or none answers) it says so and the
        offline checks stand.

        Raises:
            AirflowFailException: the JobSet is invalid, or the cluster refuses it (every
                refusal with the JobSet's field path and the plugin that refused).
        """
        identity = TaskIdentity(self.dag_id, self.task_id, "dry-run")
        namespace = self._namespace()
        print(dump_yaml(self.prepare_jobset(identity, namespace)))
        request = self.build_request(identity, namespace)
        try:
            checked = self._lifecycle(lambda lifecycle: lifecycle.check(request))
        except (ConfigError, Unreachable) as err:  # no cluster here: the offline checks stand
            self.log.warning("the cluster was not asked (%s): the offline checks passed", err)
            return
        for line in checked.unchecked:
            self.log.warning("%s", line)
        if checked.problems:
            refused = SpecError(checked.problems, source=request.source)
            raise AirflowFailException(f"the cluster refuses the JobSet:\n{refused}")
        self.log.info("the cluster accepts the JobSet, its Jobs and pods (nothing was created)")

    def _reporter(self, context: Any, store: Any) -> Reporter:
        def progress(event: Any) -> None:
            self.log.info("JobSet %s %s", self._handle.name if self._handle else "", event.line())

        return Reporter(
            submitted=lambda submission: self._submitted(context, store, submission),
            progress=progress,
            log=self._log_line if self.stream_logs else None,
            verdict=lambda verdict: self._judged(context, verdict),  # before the completion
        )

    def _judged(self, context: Any, verdict: Verdict, *, say: bool = True) -> None:
        """The verdict, said and recorded on the task instance the moment it is given, before
        the delete policy acts: a try that lost its task instance (Airflow resumed or retried
        it elsewhere) fails here and deletes nothing, so the next try reattaches to the run
        instead of creating it again."""
        if say:
            self.log.info("%s", verdict.message)
        outcome = verdict.outcome
        if outcome is not None:
            context["ti"].xcom_push(
                key=XCOM_OUTCOME, value=outcome.model_dump(mode="json", exclude={"result"})
            )
        if verdict.kind in FINAL:  # nothing more will happen: kept for a killed try's next
            store = task_state_store(context)
            self._store(store, run_handle(verdict), finished=True, verdict=verdict)

    def _log_line(self, line: LogLine) -> None:
        self.log.info("%s", line.shown())

    # ------------------------------------------------------------------ execute

    def execute(self, context: Any) -> Any:
        """Create (or adopt) the JobSet, then wait in the worker or defer."""
        ti = context["ti"]
        identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id, getattr(ti, "map_index", -1))
        namespace = self._namespace()
        store = task_state_store(context)
        request = self.build_request(identity, namespace)
        earlier = previous(store.get(STATE_KEY) if store is not None else None, request.run_name)
        if earlier.verdict is not None and earlier.handle is not None:
            return self._conclude_earlier(context, request, earlier.handle, earlier.verdict)
        stale = earlier.stale
        request = request.but(
            deadline=operator_deadline(
                self.timeout,
                self.execution_timeout,
                getattr(ti, "start_date", None),
                self.admission_timeout,
            ),
            adopt_uid=earlier.adopt_uid,
            replace=stale,
        )
        if stale is not None:
            self.log.info(
                "an earlier try finished JobSet %s/%s: deleting it to run afresh",
                stale.namespace,
                stale.name,
            )
        report = self._reporter(context, store)

        async def here(lifecycle: Lifecycle) -> tuple[Started | None, Finished | None]:
            if not self.deferrable:
                return None, await lifecycle.execute(request, report)
            started = await lifecycle.start(request, report)
            if not started.settled:
                return started, None
            verdict = await lifecycle.wait(
                started.request, started.handle, report=report, submission=started.submission
            )
            finished = await lifecycle.complete(
                started.request, started.handle, verdict, created=started.submission.created
            )
            return started, finished

        started, finished = self._lifecycle(here)
        if finished is None:
            assert started is not None
            self._defer(started)
        assert finished is not None
        return self._conclude(context, finished)

    def _conclude_earlier(
        self, context: Any, request: RunRequest, handle: Handle, verdict: Verdict
    ) -> Any:
        """An earlier try got the run's final verdict but was killed before it concluded:
        conclude from that verdict (the delete policy, the failed pods' logs, the result)."""
        self._handle = handle
        self.log.info(
            "an earlier try got the verdict of JobSet %s/%s and ended before it concluded: "
            "concluding from it (%s)",
            handle.namespace,
            handle.name,
            verdict.kind,
        )

        async def complete(lifecycle: Lifecycle) -> Finished:
            return await lifecycle.complete(
                request.but(namespace=handle.namespace), handle, verdict
            )

        return self._conclude(context, self._lifecycle(complete))

    def _connection_record(self) -> dict[str, Any]:
        """How this try reaches its cluster, for the UI view (names only, no secret)."""
        return {
            "kubernetes_conn_id": self.kubernetes_conn_id,
            "cluster_context": self.cluster_context,
            "in_cluster": self.in_cluster,
            "config_file": self.config_file,
        }

    def _namespace(self) -> str:
        """Where the try runs: ``namespace``, else the JobSet's, else the connection's."""
        return self.namespace or self._spec_namespace() or self.hook.default_namespace()

    def _spec_namespace(self) -> str | None:
        try:
            return load_jobset(self.jobset).metadata.namespace
        except (SpecError, OSError, ValueError):
            return None

    def _submitted(self, context: Any, store: Any, submission: Submission) -> None:
        handle = submission.handle
        self._handle = handle
        ti = context["ti"]
        verb = "created" if submission.created else "reattached to"
        self.log.info(
            "%s JobSet %s/%s (uid %s, %s backend): %s, restarts=%d, try %s",
            verb,
            handle.namespace,
            handle.name,
            handle.uid,
            handle.backend,
            submission.outcome.phase.value,
            submission.outcome.restarts,
            getattr(ti, "try_number", "?"),
        )
        ti.xcom_push(key=XCOM_NAME, value=handle.name)
        ti.xcom_push(key=XCOM_NAMESPACE, value=handle.namespace)
        ti.xcom_push(key=XCOM_UID, value=handle.uid)
        ti.xcom_push(key=XCOM_BACKEND, value=handle.backend)
        ti.xcom_push(key=XCOM_CONNECTION, value=self._connection_record())
        self._store(store, handle, finished=False)

    def _store(self, store: Any, handle: Handle, **marks: Any) -> None:
        if store is not None:
            store.set(STATE_KEY, record(handle, **marks))

    def _defer(self, started: Started) -> None:
        from airflow_provider_jobset.triggers import JobSetTrigger, resume_guard

        handle = started.handle
        deadline = started.request.deadline
        created = started.submission.obj
        labels = (created.get("metadata") or {}).get("labels") or {}
        held = (created.get("spec") or {}).get("suspend") is True  # a queue's, or anyone's
        # A queue may admit the run at any time: only execution_timeout bounds its wait then.
        queued = bool(labels.get(QUEUE_LABEL)) or held
        ends = deadline.latest_end() if queued else deadline.ends_at()
        timeout = None
        if ends is not None:
            timeout = _dt.timedelta(seconds=max(ends - time.time(), 0.0)) + _DEFER_GRACE
        self.defer(
            trigger=JobSetTrigger(
                handle=handle,
                request=started.request,
                restarts=started.submission.outcome.restarts,
                kubernetes_conn_id=self.kubernetes_conn_id,
                config_file=self.config_file,
                cluster_context=self.cluster_context,
                in_cluster=self.in_cluster,
                resume_guard=resume_guard(),
            ),
            method_name="execute_complete",
            timeout=timeout,
        )

    # ------------------------------------------------------------------ resume

    def execute_complete(self, context: Any, event: Mapping[str, Any] | None = None) -> Any:
        """Resume after the trigger fired: complete the try from its verdict."""
        if event is None:
            raise AirflowFailException("the trigger fired no event")
        verdict = Verdict.model_validate(event)
        handle = run_handle(verdict)
        self._handle = handle
        request = self.request.but(namespace=handle.namespace)

        async def complete(lifecycle: Lifecycle) -> Finished:
            # The trigger followed the logs (its lines are in the task log): not again here.
            return await lifecycle.complete(request, handle, verdict)

        self._judged(context, verdict, say=False)  # the trigger said it; recorded first
        return self._conclude(context, self._lifecycle(complete))

    # ------------------------------------------------------------------ conclude

    def _conclude(self, context: Any, finished: Finished) -> Any:
        verdict = finished.verdict
        self._verdict = verdict
        if verdict.kind in FINAL:  # this try ends with it
            store = task_state_store(context)
            self._store(store, run_handle(verdict), finished=True, concluded=True)
        outcome = verdict.outcome
        if outcome is not None:
            for count in outcome.replicated_jobs:
                self.log.info(
                    "  %s: replicas=%d ready=%d active=%d succeeded=%d failed=%d",
                    count.name,
                    count.replicas,
                    count.ready,
                    count.active,
                    count.succeeded,
                    count.failed,
                )
        for pod, text in sorted(finished.pod_logs.items()):
            self.log.error("last lines of failed pod %s:\n%s", pod, text)
        for problem in finished.problems:  # a refused delete, logs that could not be read
            self.log.warning("%s", problem)
        if finished.deleted:
            self.log.info(
                "deleted JobSet %s/%s (delete_policy=%s)",
                verdict.namespace,
                verdict.name,
                self.delete_policy,
            )
        if verdict.ok:  # its message was said when it came (here, or by the trigger)
            self.log.info("result: %r", verdict.result)
            return verdict.result
        error = error_for(verdict) or JobSetGone(verdict)
        if isinstance(error, NEVER_RETRIED):
            raise AirflowFailException(str(error)) from error
        raise error

    # ------------------------------------------------------------------ kill

    def on_kill(self) -> None:
        """The task is being killed: one quick DELETE of the JobSet."""
        handle = self._handle
        if handle is None or not self.delete_on_kill:
            return
        from jobset_core.errors import JobSetError

        async def cancel(lifecycle: Lifecycle) -> None:
            await lifecycle.cancel(handle)

        try:
            self._lifecycle(cancel)
            self.log.info("deleted JobSet %s/%s (task killed)", handle.namespace, handle.name)
        except JobSetError as err:
            self.log.warning(
                "could not delete JobSet %s/%s: %s", handle.namespace, handle.name, err
            )

    # ------------------------------------------------------------------ OpenLineage

    def get_openlineage_facets_on_start(self) -> OperatorLineage[Any, Any]:
        """The run as asked, for the ``openlineage`` provider's START event: the replicated
        jobs and their images are known before anything is created."""
        return self._lineage(run=None, verdict=None)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage[Any, Any]:
        """The run as it ended, for the COMPLETE event: its namespace, name, UID, backend,
        replicated jobs and verdict, from what the try holds (no call to the cluster)."""
        return self._lineage(run=self._handle, verdict=self._verdict)

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> OperatorLineage[Any, Any]:
        """The same for the FAIL event: the outcome says how the run ended (failed, restarting
        into a retry, timed out...), and is absent when the try failed before its verdict."""
        return self._lineage(run=self._handle, verdict=self._verdict)

    def _lineage(self, *, run: Handle | None, verdict: Verdict | None) -> OperatorLineage[Any, Any]:
        from airflow_provider_jobset.openlineage import lineage

        try:
            jobset: JobSet | None = load_jobset(self.jobset)
        except (SpecError, OSError, TypeError, ValueError):  # the try failed on it, and says so
            jobset = None
        asked = self.namespace or (jobset.metadata.namespace if jobset is not None else None)
        return lineage(jobset, run=run, verdict=verdict, backend=self.backend, namespace=asked)


def run_handle(verdict: Verdict) -> Handle:
    """The run a verdict is about."""
    return Handle(verdict.name, verdict.namespace, verdict.uid, verdict.backend)
