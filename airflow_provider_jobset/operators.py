"""``JobSetOperator``: run a Kubernetes JobSet as an Airflow task.

The operator is a thin shell: the JobSet is loaded and validated by :mod:`jobset_core`, named
and labelled for its task instance (:mod:`._identity`), submitted through a backend (which
adopts the JobSet of an earlier try instead of creating a second one), and waited for in the
worker or, deferrable, in the triggerer (:class:`~.triggers.JobSetTrigger`). How a try ends is
decided by :func:`._decisions.judge`: the result on success, a retryable
:class:`~.exceptions.JobSetRestarting` when the JobSet restarted (the next try reattaches),
:class:`~.exceptions.JobSetFailed` (no retry) when it failed for good.

Importing this module imports no Kubernetes client.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import threading
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_jobset import _decisions
from airflow_provider_jobset._arguments import check_operator_arguments, check_rendered_operator
from airflow_provider_jobset._compat import (
    AIRFLOW_V_3_3_PLUS,
    BaseOperator,
    default_deferrable,
    task_state_store,
)
from airflow_provider_jobset._decisions import DELETE_POLICIES, DeletePolicy, Verdict
from airflow_provider_jobset._identity import TaskIdentity, name_prefix
from airflow_provider_jobset.events import JobSetEvent
from airflow_provider_jobset.exceptions import (
    JobSetFailed,
    JobSetGone,
    JobSetRestarting,
    JobSetTimeout,
)
from airflow_provider_jobset.hooks import BackendChoice, JobSetHook
from airflow_provider_jobset.links import XCOM_NAME, XCOM_NAMESPACE, XCOM_UID, JobSetLink
from jobset_core.errors import JobSetError, SpecError
from jobset_core.models import JobSet, dump_yaml, load_jobset
from jobset_core.outcome import Outcome

if TYPE_CHECKING:
    from jobset_core.backends._base import BackendProtocol, Handle

__all__ = ["JobSetOperator", "JobSetRetriesWarning", "default_retry_policy"]

#: Task state store key of the JobSet a task instance runs (Airflow 3.3+).
STATE_KEY = "jobset"
XCOM_OUTCOME = "jobset_outcome"
XCOM_BACKEND = "jobset_backend"
_DEFER_GRACE = _dt.timedelta(seconds=60)
_RECREATE_WAIT = 120.0


class JobSetRetriesWarning(UserWarning):
    """``retries`` cannot mirror the JobSet's ``failurePolicy.maxRestarts``."""


def default_retry_policy() -> Any:
    """Airflow 3.3's retry policy for JobSet tasks: retry a restart at once, never retry a
    terminal failure, the default for anything else (``None`` before 3.3)."""
    if not AIRFLOW_V_3_3_PLUS:
        return None
    from airflow.sdk import ExceptionRetryPolicy, RetryAction, RetryRule

    return ExceptionRetryPolicy(
        rules=[
            RetryRule(
                exception="airflow_provider_jobset.exceptions.JobSetRestarting",
                action=RetryAction.RETRY,
                retry_delay=_dt.timedelta(seconds=1),
                reason="the JobSet restarted: the next try continues with it",
            ),
            RetryRule(
                exception="airflow_provider_jobset.exceptions.JobSetFailed",
                action=RetryAction.FAIL,
                reason="the JobSet failed for good",
            ),
        ]
    )


def _parse_time_source(source: Any) -> JobSet | None:
    """The JobSet when it can be read at DAG-parse time (no template, no file)."""
    if isinstance(source, JobSet):
        return source
    if isinstance(source, str) and ("{{" in source or "{%" in source or "\n" not in source):
        return None
    try:
        return load_jobset(source)
    except (SpecError, OSError, ValueError):
        return None


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
        timeout: Longest wait for the JobSet per try; also enforced while deferred. The
            JobSet is deleted when it passes. ``execution_timeout`` is enforced the same way.
        delete_policy: Delete the JobSet when the task ends: ``always``, ``on_success``
            (default: keep failed ones for inspection) or ``never``. A restart never deletes.
        stream_logs: Follow one pod's log into the task log while waiting (not deferrable).
        log_replicated_job: The replicated job of the pod whose log is shown (default: the
            coordinator, else the first pod of the first replicated job).
        log_job_index: The Job index of that pod.
        log_pod_index: The pod index of that pod.
        failed_pod_log_lines: Lines of each failed pod's log shown when a try fails.
        link_template: URL template of the extra link (``{namespace}``, ``{name}``,
            ``{uid}``); default ``[jobset] link_template``.
        delete_on_kill: Delete the JobSet when the task is killed (``on_kill``, trigger kill).
        poll_interval: Native backend: longest quiet time between two reconcile passes.
        retries: Task retries. Unset: ``failurePolicy.maxRestarts`` (each restart ends a try).
        **kwargs: Other ``BaseOperator`` arguments.
    """

    template_fields: Sequence[str] = ("jobset", "namespace", "name")
    template_ext: Sequence[str] = (".yaml", ".yml", ".json")
    template_fields_renderers = {"jobset": "yaml"}
    operator_extra_links = (JobSetLink(),)
    ui_color = "#d5e8f7"

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
        delete_policy: DeletePolicy = "on_success",
        stream_logs: bool = True,
        log_replicated_job: str | None = None,
        log_job_index: int = 0,
        log_pod_index: int = 0,
        failed_pod_log_lines: int = 50,
        link_template: str | None = None,
        delete_on_kill: bool = True,
        poll_interval: float = 5.0,
        retries: int | None = None,
        **kwargs: Any,
    ) -> None:
        check_operator_arguments(
            jobset=jobset,
            namespace=namespace,
            name=name,
            backend=backend,
            kubernetes_conn_id=kubernetes_conn_id,
            config_file=config_file,
            cluster_context=cluster_context,
            in_cluster=in_cluster,
            deferrable=deferrable,
            timeout=timeout,
            delete_policy=delete_policy,
            delete_policies=DELETE_POLICIES,
            stream_logs=stream_logs,
            log_replicated_job=log_replicated_job,
            log_job_index=log_job_index,
            log_pod_index=log_pod_index,
            failed_pod_log_lines=failed_pod_log_lines,
            link_template=link_template,
            delete_on_kill=delete_on_kill,
            poll_interval=poll_interval,
            retries=retries,
        )
        parsed = _parse_time_source(jobset)
        plan = _decisions.plan_retries(
            _decisions.max_restarts(parsed) if parsed is not None else None, retries
        )
        if plan.problem:
            warnings.warn(plan.problem, JobSetRetriesWarning, stacklevel=2)
        if plan.retries is not None:
            kwargs["retries"] = plan.retries
        if AIRFLOW_V_3_3_PLUS and kwargs.get("retry_policy") is None:
            kwargs["retry_policy"] = default_retry_policy()
        super().__init__(**kwargs)
        self.jobset = jobset
        self.namespace = namespace
        self.name = name
        self.backend = backend
        self.kubernetes_conn_id = kubernetes_conn_id
        self.config_file = config_file
        self.cluster_context = cluster_context
        self.in_cluster = in_cluster
        self.deferrable = default_deferrable() if deferrable is None else deferrable
        self.timeout = timeout
        self.delete_policy: DeletePolicy = delete_policy
        self.stream_logs = stream_logs
        self.log_replicated_job = log_replicated_job
        self.log_job_index = log_job_index
        self.log_pod_index = log_pod_index
        self.failed_pod_log_lines = failed_pod_log_lines
        self.link_template = link_template
        self.delete_on_kill = delete_on_kill
        self.poll_interval = poll_interval
        self._handle: Handle | None = None

    def render_template_fields(self, context: Any, jinja_env: Any = None) -> None:
        """Render ``jobset``, ``namespace`` and ``name``, then check what they became: a
        wrong value fails the task (no retry) before anything is created."""
        super().render_template_fields(context, jinja_env)
        try:
            check_rendered_operator(jobset=self.jobset, namespace=self.namespace, name=self.name)
        except (TypeError, ValueError) as err:
            raise JobSetFailed(f"{err} (nothing was created)") from err

    # ------------------------------------------------------------------ spec

    @property
    def hook(self) -> JobSetHook:
        """The hook over the task's connection."""
        return JobSetHook(
            self.kubernetes_conn_id,
            config_file=self.config_file,
            cluster_context=self.cluster_context,
            in_cluster=self.in_cluster,
            namespace=self.namespace,
        )

    def prepare_jobset(self, identity: TaskIdentity, namespace: str) -> JobSet:
        """The JobSet as it will be created: loaded, named, labelled and validated.

        Raises:
            JobSetFailed: the spec is invalid (every problem with its field path).
        """
        from jobset_core.backends import stamp_identity
        from jobset_core.validation import ensure_valid

        try:
            jobset = load_jobset(self.jobset)
            meta = jobset.metadata
            if self.name:
                meta = meta.model_copy(update={"name": self.name, "generate_name": None})
            else:
                prefix = name_prefix(meta.name or meta.generate_name or self.task_id)
                meta = meta.model_copy(update={"name": None, "generate_name": prefix})
            meta = meta.model_copy(
                update={"annotations": {**(meta.annotations or {}), **identity.annotations()}}
            )
            named, _ = stamp_identity(
                jobset.model_copy(update={"metadata": meta}), namespace, identity.identity()
            )
            return ensure_valid(named)
        except SpecError as err:
            raise JobSetFailed(f"invalid JobSet (nothing was created):\n{err}") from err

    def dry_run(self) -> None:
        """Print the JobSet that would be created (for a placeholder run id)."""
        identity = TaskIdentity(self.dag_id, self.task_id, "dry-run")
        namespace = self.namespace or "default"
        jobset = self.prepare_jobset(identity, namespace)
        print(dump_yaml(jobset))

    # ------------------------------------------------------------------ execute

    def execute(self, context: Any) -> Any:
        """Create (or adopt) the JobSet, then wait in the worker or defer."""
        ti = context["ti"]
        identity = TaskIdentity(ti.dag_id, ti.task_id, ti.run_id, getattr(ti, "map_index", -1))
        hook = self.hook
        namespace = self.namespace or self._spec_namespace() or hook.default_namespace()
        jobset = self.prepare_jobset(identity, namespace)
        store = task_state_store(context)
        with hook.backend(self.backend, poll_interval=self.poll_interval) as backend:
            handle = self._submit(backend, jobset, namespace, identity, store)
            self._handle = handle
            ti.xcom_push(key=XCOM_NAME, value=handle.name)
            ti.xcom_push(key=XCOM_NAMESPACE, value=handle.namespace)
            ti.xcom_push(key=XCOM_UID, value=handle.uid)
            ti.xcom_push(key=XCOM_BACKEND, value=handle.backend)
            snapshot = backend.status(handle)
            self.log.info(
                "JobSet %s/%s (uid %s, %s backend) is %s, restarts=%d, try %s",
                handle.namespace,
                handle.name,
                handle.uid,
                handle.backend,
                snapshot.phase.value,
                snapshot.restarts,
                getattr(ti, "try_number", "?"),
            )
            if snapshot.phase.terminal:
                return self._finish(context, backend, handle, snapshot)
            ends = _decisions.deadline(
                _dt.datetime.now(_dt.timezone.utc),
                self.timeout,
                self.execution_timeout,
                getattr(ti, "start_date", None),
            )
            if self.deferrable:
                self._defer(handle, snapshot, ends)
            outcome = self._wait(backend, handle, ends)
            return self._finish(context, backend, handle, outcome)

    def _spec_namespace(self) -> str | None:
        parsed = _parse_time_source(self.jobset)
        if parsed is None:
            try:
                parsed = load_jobset(self.jobset)
            except (SpecError, OSError, ValueError):
                return None
        return parsed.metadata.namespace

    def _submit(
        self,
        backend: BackendProtocol,
        jobset: JobSet,
        namespace: str,
        identity: TaskIdentity,
        store: Any,
    ) -> Handle:
        """Create the JobSet, or adopt the one an earlier try created (same name, labels and
        UID); after a try that already reported a terminal outcome, start afresh."""
        record = store.get(STATE_KEY) if store is not None else None
        expected_uid = None
        if isinstance(record, dict) and record.get("name") == jobset.name:
            if record.get("finished"):
                self._remove_finished(backend, record)
            else:
                expected_uid = record.get("uid") or None
        try:
            submission = backend.submit(
                jobset,
                namespace=namespace,
                identity=identity.identity(),
                expected_uid=expected_uid,
            )
        except SpecError as err:
            raise JobSetFailed(f"invalid JobSet (nothing was created):\n{err}") from err
        handle = submission.handle
        verb = "created" if submission.created else "reattached to"
        self.log.info("%s JobSet %s/%s (uid %s)", verb, handle.namespace, handle.name, handle.uid)
        if store is not None:
            store.set(
                STATE_KEY,
                {
                    "name": handle.name,
                    "namespace": handle.namespace,
                    "uid": handle.uid,
                    "backend": handle.backend,
                },
            )
        return handle

    def _remove_finished(self, backend: BackendProtocol, record: Mapping[str, Any]) -> None:
        from jobset_core.backends._base import Handle
        from jobset_core.errors import NotFound

        old = Handle(record["name"], record["namespace"], record.get("uid", ""), backend.kind)
        self.log.info(
            "an earlier try finished JobSet %s/%s: deleting it to run afresh",
            old.namespace,
            old.name,
        )
        with contextlib.suppress(NotFound):
            backend.delete(old, wait=True, timeout=_RECREATE_WAIT)

    def _defer(self, handle: Handle, snapshot: Outcome, ends: _dt.datetime | None) -> None:
        from airflow_provider_jobset.triggers import JobSetTrigger

        timeout = None
        if ends is not None:
            timeout = max(ends - _dt.datetime.now(_dt.timezone.utc), _dt.timedelta(0))
            timeout += _DEFER_GRACE
        self.defer(
            trigger=JobSetTrigger(
                name=handle.name,
                namespace=handle.namespace,
                uid=handle.uid,
                backend=handle.backend,
                kubernetes_conn_id=self.kubernetes_conn_id,
                config_file=self.config_file,
                cluster_context=self.cluster_context,
                in_cluster=self.in_cluster,
                deadline=ends.timestamp() if ends is not None else None,
                on_restart="return",
                restarts=snapshot.restarts,
                delete_on_kill=self.delete_on_kill,
                poll_interval=self.poll_interval,
            ),
            method_name="execute_complete",
            timeout=timeout,
        )

    def _wait(self, backend: BackendProtocol, handle: Handle, ends: _dt.datetime | None) -> Outcome:
        from jobset_core.errors import WaitTimeout

        stop = threading.Event()
        follower = self._follow_logs(handle, stop) if self.stream_logs else None
        try:
            remaining = None
            if ends is not None:
                remaining = max((ends - _dt.datetime.now(_dt.timezone.utc)).total_seconds(), 0.0)
            return backend.wait(
                handle,
                timeout=remaining,
                on_progress=lambda p: self.log.info("JobSet %s %s", handle.name, p.line()),
                on_restart="return",
            )
        except WaitTimeout as err:
            self._delete_after_timeout(backend, handle)
            raise JobSetTimeout(f"{err}; the JobSet was deleted") from err
        finally:
            stop.set()
            if follower is not None:
                follower.join(timeout=5)

    def _follow_logs(self, handle: Handle, stop: threading.Event) -> threading.Thread:
        """Follow the chosen pod's log into the task log from a helper thread."""

        def follow() -> None:
            attempts = 0
            while not stop.is_set() and attempts < 30:
                attempts += 1
                try:
                    with self.hook.backend(handle.backend) as reader:
                        for line in reader.stream_logs(
                            handle,
                            replicated_job=self.log_replicated_job,
                            job_index=self.log_job_index,
                            pod_index=self.log_pod_index,
                            follow=True,
                        ):
                            self.log.info("[pod] %s", line)
                            if stop.is_set():
                                return
                    return
                except JobSetError:
                    stop.wait(2.0)  # the pod does not exist or has not started yet

        thread = threading.Thread(target=follow, name=f"jobset-logs-{handle.name}", daemon=True)
        thread.start()
        return thread

    def _delete_after_timeout(self, backend: BackendProtocol, handle: Handle) -> None:
        from jobset_core.errors import NotFound

        with contextlib.suppress(NotFound):
            backend.delete(handle, wait=True, timeout=_RECREATE_WAIT)

    # ------------------------------------------------------------------ resume

    def execute_complete(self, context: Any, event: Mapping[str, Any] | None = None) -> Any:
        """Resume after the trigger fired: finish the try from its event."""
        if event is None:
            raise JobSetGone("the trigger fired no event")
        fired = JobSetEvent.model_validate(event)
        from jobset_core.backends._base import Handle

        kind = fired.outcome.backend if fired.outcome is not None else self.backend
        handle = Handle(
            fired.name, fired.namespace, fired.uid, kind if kind != "auto" else "controller"
        )
        self._handle = handle
        with self.hook.backend(handle.backend, poll_interval=self.poll_interval) as backend:
            if fired.kind == "timeout":
                self._delete_after_timeout(backend, handle)
                raise JobSetTimeout(f"{fired.message}; the JobSet was deleted")
            if fired.kind == "gone" or fired.outcome is None:
                raise JobSetGone(fired.message or f"JobSet {fired.namespace}/{fired.name} is gone")
            if self.stream_logs:
                self._log_tail(backend, handle)
            return self._finish(context, backend, handle, fired.outcome)

    def _log_tail(self, backend: BackendProtocol, handle: Handle) -> None:
        try:
            for line in backend.stream_logs(
                handle,
                replicated_job=self.log_replicated_job,
                job_index=self.log_job_index,
                pod_index=self.log_pod_index,
                follow=False,
            ):
                self.log.info("[pod] %s", line)
        except JobSetError as err:
            self.log.info("no log to show: %s", err)

    # ------------------------------------------------------------------ finish

    def _finish(
        self, context: Any, backend: BackendProtocol, handle: Handle, outcome: Outcome
    ) -> Any:
        ti = context["ti"]
        verdict = _decisions.judge(outcome)
        ti.xcom_push(key=XCOM_OUTCOME, value=outcome.model_dump(mode="json", exclude={"result"}))
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
        if verdict.kind in ("fail", "retry"):
            self._log_failed_pods(backend, handle)
        if verdict.kind in ("success", "fail"):
            self._mark_finished(context, handle)
        if _decisions.should_delete(self.delete_policy, verdict):
            self._delete(backend, handle)
        return self._conclude(verdict, outcome)

    def _conclude(self, verdict: Verdict, outcome: Outcome) -> Any:
        if verdict.kind == "success":
            self.log.info("%s; result: %r", verdict.message, outcome.result)
            return outcome.result
        if verdict.kind == "retry":
            raise JobSetRestarting(verdict.message)
        if verdict.kind == "fail":
            raise JobSetFailed(verdict.message)
        raise JobSetGone(f"unexpected: the wait ended while {verdict.message}")

    def _log_failed_pods(self, backend: BackendProtocol, handle: Handle) -> None:
        try:
            tails = backend.failed_pod_logs(handle, tail_lines=self.failed_pod_log_lines)
        except JobSetError as err:
            self.log.warning("cannot read the failed pods' logs: %s", err)
            return
        for pod, text in sorted(tails.items()):
            self.log.error("last lines of failed pod %s:\n%s", pod, text)

    def _mark_finished(self, context: Any, handle: Handle) -> None:
        store = task_state_store(context)
        if store is not None:
            store.set(
                STATE_KEY,
                {
                    "name": handle.name,
                    "namespace": handle.namespace,
                    "uid": handle.uid,
                    "backend": handle.backend,
                    "finished": True,
                },
            )

    def _delete(self, backend: BackendProtocol, handle: Handle) -> None:
        from jobset_core.errors import NotFound

        try:
            backend.delete(handle)
            self.log.info(
                "deleted JobSet %s/%s (delete_policy=%s)",
                handle.namespace,
                handle.name,
                self.delete_policy,
            )
        except NotFound:
            pass

    # ------------------------------------------------------------------ kill

    def on_kill(self) -> None:
        """The task is being killed: one quick DELETE of the JobSet."""
        handle = self._handle
        if handle is None or not self.delete_on_kill:
            return
        from jobset_core.errors import JobSetError as _Error

        try:
            with self.hook.backend(handle.backend) as backend:
                backend.cancel(handle)
            self.log.info("deleted JobSet %s/%s (task killed)", handle.namespace, handle.name)
        except _Error as err:
            self.log.warning(
                "could not delete JobSet %s/%s: %s", handle.namespace, handle.name, err
            )
