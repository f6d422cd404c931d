"""The Airflow Roles (``airflow_provider_jobset/rbac/``) are enough, and every verb in them is
needed.

The worker and the triggerer run as two service accounts, each bound to nothing but its Role
(tokens from the devcluster's token webhook, through a fault proxy that ends every open watch
with 410 Gone every few seconds, so every informer also lists again). Scenarios run the
provider's own classes in this process the way Airflow runs them: ``JobSetOperator.execute``
in worker mode and deferred (the trigger rebuilt with the triggerer's connection, as the
triggerer process reads its own), ``execute_complete``, ``on_kill`` of the task and of the
trigger, ``JobSetSensor.poke``, restarts, a quota that refuses the child Jobs, and, on the
native backend, a reconcile pass that meets a compare-and-swap conflict and a Job created by
an earlier pass (what a waiter with a view a moment old meets).

* **Enough**: with the full Roles every scenario behaves as it should and the API server's
  audit log shows no 403 for either identity (but the server checks' dry runs of what the
  optional server-checks Role grants: those are said once as unchecked, and the run goes on;
  tests/core/test_server_checks.py runs both ways).
* **Needed**: for each verb of each Role, the scenarios that used it (the audit log says which)
  run again with that one verb removed: a request of that verb is refused with 403 (audit log)
  and a scenario fails, or the refusal is reported in the log (a watch of an optional kind
  such as Events is reported and the wait goes on without it).

All variants run at once, one namespace per scenario and variant.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import datetime as dt
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from jobset_core import labels
from tests.airflow._run_op import _TI
from tests.cluster import holds
from tests.cluster.bodies import finish_at
from tests.cluster.faultproxy import FaultProxy
from tests.cluster.identities import Identity, bind_role, identity, role_rules
from tests.cluster.localcluster import auth as devcluster_auth

pytestmark = [pytest.mark.cluster, pytest.mark.airflow, pytest.mark.timeout(900)]

BACKENDS = ("controller", "native")
CUT_EVERY = 4.0  # seconds between 410 cuts of every open watch
#: Each task's timeout. A scenario takes ~10 s on a quiet cluster; CI's busy one (some 55 cases
#: at once beside two other test workers) once stretched a handful past 45 s before they used
#: the verb a case removes (no 403, a WaitTimeout): time enough for a starved run, no more.
SCENARIO_TIMEOUT = 120.0
#: The scenarios each identity's Role is proven with, per backend.
SCENARIOS = {
    ("worker", "controller"): (
        "complete",
        "adopt",
        "failed",
        "kill",
        "sensor",
        "deferred",
        "restart",
        "namesake",
        "quota",
    ),
    ("worker", "native"): (
        "complete",
        "adopt",
        "failed",
        "kill",
        "sensor",
        "deferred",
        "restart",
        "namesake",
        "stale",
    ),
    ("triggerer", "controller"): ("t_deferred", "t_kill", "t_restart", "t_quota"),
    ("triggerer", "native"): ("t_deferred", "t_kill", "t_restart", "t_stale"),
}
#: The scenario that surely uses a verb, where the first user may not: a followed log is
#: read only if the follower sees the short pod running, a failed pod's log tail always.
SURE_USER = {("", "pods/log", "get"): "failed"}
RESOURCE_OF = {  # audit objectRef -> the Role's (apiGroup, resource)
    ("jobset.x-k8s.io", "jobsets", ""): ("jobset.x-k8s.io", "jobsets"),
    ("batch", "jobs", ""): ("batch", "jobs"),
    ("", "pods", ""): ("", "pods"),
    ("", "pods", "log"): ("", "pods/log"),
    ("", "events", ""): ("", "events"),
    ("", "configmaps", ""): ("", "configmaps"),
    ("", "services", ""): ("", "services"),
}


def role_name(who: str, backend: str) -> str:
    return f"jobset-airflow-{who}-{backend}"


def without(rules: list[dict[str, Any]], group: str, resource: str, verb: str) -> list[dict]:
    out = copy.deepcopy(rules)
    for rule in out:
        if group in rule["apiGroups"] and resource in rule["resources"]:
            rule["verbs"] = [v for v in rule["verbs"] if v != verb]
    return [r for r in out if r["verbs"]]


def verbs_of(rules: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    ]


# ---------------------------------------------------------------------- JobSets and tasks


def pod(annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"annotations": annotations},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
    }


def jobset(
    case: Case,
    first: dict[str, str] | None = None,
    second: dict[str, str] | None = None,
    restarts: int = 0,
) -> dict[str, Any]:
    """Two replicated jobs, ``b`` after ``a`` completed (so a later pass creates Jobs too); the
    result and the followed log are ``b``'s (its log names the case's namespace)."""
    a = {"devcluster/run-seconds": "3", "devcluster/termination-message": "7", **(first or {})}
    b = {
        "devcluster/run-seconds": "3",
        "devcluster/log": f"hello from {case.namespace}",
        "devcluster/termination-message": "7",
        **(second or {}),
    }

    def rjob(name: str, annotations: dict[str, str], **extra: Any) -> dict[str, Any]:
        spec = {"backoffLimit": 0, "completions": 1, "parallelism": 1, "template": pod(annotations)}
        return {"name": name, "replicas": 1, "template": {"spec": spec}, **extra}

    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "rbac"},
        "spec": {
            "failurePolicy": {"maxRestarts": restarts},
            "replicatedJobs": [
                rjob("a", a),
                rjob("b", b, dependsOn=[{"name": "a", "status": "Complete"}]),
            ],
        },
    }


class TI(_TI):
    def __init__(self, run_id: str, try_number: int = 1) -> None:
        super().__init__(run_id)
        self.try_number = try_number

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = value


@dataclass
class Case:
    """One scenario in one namespace, for one variant of the Roles."""

    scenario: str
    backend: str
    namespace: str
    worker: Identity
    triggerer: Identity
    devcluster: Any
    removed: tuple[str, str, str] | None = None
    problems: list[str] = field(default_factory=list)
    #: Texts the logs must show once the scenario ran (checked after all of them).
    texts: list[str] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return f"manual__{self.namespace}"

    def conn(self, who: Identity) -> str:
        conn_id = f"k_{who.namespace}_{who.account}".replace("-", "_")
        os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = who.connection()
        return conn_id

    def operator(self, body: dict[str, Any], *, deferrable: bool, **kwargs: Any) -> Any:
        from airflow_provider_jobset.operators import JobSetOperator

        return JobSetOperator(
            task_id="train",
            jobset=body,
            namespace=self.namespace,
            backend=self.backend,
            deferrable=deferrable,
            kubernetes_conn_id=self.conn(self.worker),
            timeout=dt.timedelta(seconds=SCENARIO_TIMEOUT),
            log_replicated_job="b",
            retries=3,
            **kwargs,
        )

    def trigger(self, deferred: Any) -> Any:
        """The deferred task's trigger as the triggerer builds it, with its own connection."""
        from airflow_provider_jobset.triggers import JobSetTrigger

        _, kwargs = deferred.trigger.serialize()
        return JobSetTrigger(**{**kwargs, "kubernetes_conn_id": self.conn(self.triggerer)})

    def expect(self, ok: bool, what: str) -> None:
        if not ok:
            self.problems.append(what)

    def gone(self) -> bool:
        return not self.runs()

    def end_pods(
        self, selector: str, timeout: float = 60, unless: Callable[[], bool] | None = None
    ) -> None:
        """Once a ``never-finish`` pod of ``selector`` exists, end every one (exit 0 at once);
        or nothing, once ``unless()`` is true (what would create the pod ended)."""
        deadline = time.monotonic() + timeout
        while not (
            pods := [
                p
                for p in self.devcluster.core.list_namespaced_pod(
                    self.namespace, label_selector=selector
                ).items
                if (p.metadata.annotations or {}).get("devcluster/never-finish") == "true"
            ]
        ):
            if unless is not None and unless():
                return
            assert time.monotonic() < deadline, f"no pod of {selector} in {timeout:.0f}s"
            time.sleep(0.3)
        end = {"devcluster/never-finish": "false", "devcluster/finish-at": finish_at(0)}
        for pod in pods:
            self.devcluster.core.patch_namespaced_pod(
                pod.metadata.name, self.namespace, {"metadata": {"annotations": end}}
            )

    def runs(self) -> list[str]:
        return holds.run_names(self.devcluster, self.backend, self.namespace)

    def hold(self, name: str, held: bool) -> None:
        holds.hold(self.devcluster, self.backend, self.namespace, name, held)

    def wait_gone(self, timeout: float = 30) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.gone():
                return True
            time.sleep(0.5)
        return False


# ---------------------------------------------------------------------- scenarios


def deferred_of(op: Any, ti: TI) -> Any:
    try:  # Airflow 3.2+
        from airflow.sdk.exceptions import TaskDeferred
    except ImportError:  # 3.0, 3.1
        from airflow.exceptions import TaskDeferred  # type: ignore[no-redef]

    try:
        op.execute({"ti": ti})
    except TaskDeferred as deferred:
        return deferred
    raise AssertionError("the deferrable task did not defer")


async def s_complete(case: Case) -> None:
    op = case.operator(jobset(case), deferrable=False, delete_policy="always")
    result = await asyncio.to_thread(op.execute, {"ti": TI(case.run_id)})
    case.expect(result == 7, f"result {result!r}")
    case.texts.append(f"hello from {case.namespace}")  # the followed log
    case.expect(await asyncio.to_thread(case.wait_gone), "the JobSet was not deleted")


async def s_adopt(case: Case) -> None:
    ti = TI(case.run_id)
    await asyncio.to_thread(deferred_of, case.operator(jobset(case), deferrable=True), ti)
    again = case.operator(jobset(case), deferrable=False, delete_policy="never")
    result = await asyncio.to_thread(again.execute, {"ti": TI(case.run_id, 2)})
    case.expect(result == 7, f"adopted run's result {result!r}")


async def s_failed(case: Case) -> None:
    from airflow_provider_jobset._compat import AirflowFailException

    broke = f"it broke in {case.namespace}"
    body = jobset(case, second={"devcluster/exit-code": "3", "devcluster/log": broke})
    op = case.operator(body, deferrable=False, delete_policy="never", failed_pod_log_lines=5)
    try:
        await asyncio.to_thread(op.execute, {"ti": TI(case.run_id)})
        case.expect(False, "a failing JobSet's task succeeded")
    except AirflowFailException as error:
        case.expect("failed child Job" in str(error), f"no failed child Job in {error}")
    case.texts.append(broke)  # the failed pod's log tail


async def s_kill(case: Case) -> None:
    op = case.operator(
        jobset(case, second={"devcluster/never-finish": "true"}),
        deferrable=False,
        stream_logs=False,
    )
    ti = TI(case.run_id)
    task = asyncio.ensure_future(asyncio.to_thread(_execute_quietly, op, ti))
    deadline = time.monotonic() + 30
    while "jobset_uid" not in ti.xcoms and time.monotonic() < deadline:
        await asyncio.sleep(0.3)
    await asyncio.sleep(2)
    await asyncio.to_thread(op.on_kill)
    case.expect(await asyncio.to_thread(case.wait_gone), "on_kill did not delete the JobSet")
    await asyncio.wait_for(task, 60)


def _execute_quietly(op: Any, ti: TI) -> None:
    with contextlib.suppress(Exception):
        op.execute({"ti": ti})


async def s_sensor(case: Case) -> None:
    from airflow_provider_jobset.sensors import JobSetSensor

    op = case.operator(jobset(case), deferrable=False, delete_policy="never", stream_logs=False)
    await asyncio.to_thread(op.execute, {"ti": TI(case.run_id)})
    sensor = JobSetSensor(
        task_id="watch",
        label_selector={"airflow-jobset/task-id": "train"},
        namespace=case.namespace,
        backend=case.backend,
        kubernetes_conn_id=case.conn(case.worker),
        poke_interval=1,
    )
    case.expect(await asyncio.to_thread(sensor.poke, {}), "the sensor did not see Completed")


async def s_deferred(case: Case) -> None:
    ti = TI(case.run_id)
    op = case.operator(jobset(case), deferrable=True, delete_policy="always")
    deferred = await asyncio.to_thread(deferred_of, op, ti)
    trigger = case.trigger(deferred)
    # The trigger follows the log while deferred; its lines go to the trigger's own logger
    # (the triggerer's log in Airflow), told to this process's log here.
    info = trigger.log.info

    def tell(message: str, *args: Any, **kwargs: Any) -> None:
        logging.getLogger("airflow.task").info(message, *args)
        info(message, *args, **kwargs)

    trigger.log.info = tell
    event = await anext(trigger.run())
    result = await asyncio.to_thread(op.execute_complete, {"ti": ti}, event.payload)
    case.expect(result == 7, f"deferred result {result!r}")
    case.texts.append(f"hello from {case.namespace}")  # the log followed while deferred


async def s_restart(case: Case) -> None:
    from jobset_core.errors import JobSetRestarting

    body = jobset(case, first={"devcluster/fail-until-attempt": "1"}, restarts=1)
    op = case.operator(body, deferrable=False, delete_policy="never", stream_logs=False)
    try:
        await asyncio.to_thread(op.execute, {"ti": TI(case.run_id)})
        case.expect(False, "the first try did not end with the restart")
    except JobSetRestarting as error:  # with why the child Job failed (read from the Jobs)
        case.expect("BackoffLimitExceeded" in str(error), f"no Job failure in: {error}")
    again = case.operator(body, deferrable=False, delete_policy="never", stream_logs=False)
    result = await asyncio.to_thread(again.execute, {"ti": TI(case.run_id, 2)})
    case.expect(result == 7, f"after the restart: {result!r}")


async def s_namesake(case: Case) -> None:
    """A cleared task's new try meets its run still there, being deleted (a finalizer of the
    test's holds it): its start waits until nothing of the run is left, then creates its own.

    ``b`` runs until told, so each run ends only when the test is ready for it: the first once
    it is held (on a loaded machine, a first try that ended before the hold left nothing to
    meet, and the start never waited), the second once it is the only one."""
    body = jobset(case, second={"devcluster/never-finish": "true"})
    b = f"{labels.REPLICATED_JOB_NAME}=b"
    first = case.operator(body, deferrable=False, delete_policy="always")
    running = asyncio.ensure_future(asyncio.to_thread(first.execute, {"ti": TI(case.run_id)}))
    deadline = time.monotonic() + 60
    while not (names := await asyncio.to_thread(case.runs)):
        assert time.monotonic() < deadline, "the first try created no run"
        await asyncio.sleep(0.3)
    await asyncio.to_thread(case.hold, names[0], True)
    await asyncio.to_thread(case.end_pods, b, unless=running.done)
    case.expect(await running == 7, "the first try's result")
    again = case.operator(body, deferrable=False, delete_policy="always")
    run = f"{case.namespace}/{names[0]}"
    # The second try's start deletes the first run (its try finished) and waits for it to go,
    # or meets it being deleted and waits: either way it says so first.
    met = _heard(again, f"JobSet {run}: deleting it to run afresh", f"{run} (uid ")
    second = asyncio.ensure_future(asyncio.to_thread(again.execute, {"ti": TI(case.run_id, 2)}))
    # Released once the second try said it waits for the first run (not after a fixed time:
    # a loaded machine's start can take longer, and then met nothing).
    said = await asyncio.to_thread(met.wait, 60)
    case.expect(said, "the second try did not say it waits for the first run to go")
    case.expect(not second.done(), "the second try did not wait for the first run to go")
    await asyncio.to_thread(case.hold, names[0], False)
    await asyncio.to_thread(case.end_pods, b, unless=second.done)
    case.expect(await second == 7, "the second try's result")


def _heard(op: Any, *texts: str) -> threading.Event:
    """Listen to what ``op`` logs: the event is set once an ``info`` line of it holds one of
    ``texts``. (Airflow's task loggers are not the standard library's, so a handler there
    hears nothing of them; the operator keeps its logger, whose ``info`` is wrapped here, as
    the deferred scenario wraps its trigger's.)"""
    met = threading.Event()
    log = op.log
    info = log.info

    def heard(message: str, *args: Any, **kwargs: Any) -> Any:
        line = message % args if args else message
        if any(text in line for text in texts):
            met.set()
        return info(message, *args, **kwargs)

    log.info = heard
    assert op.log is log, "the operator does not keep its logger"
    return met


async def s_quota(case: Case, deferred: bool = False) -> None:
    from kubernetes import client as k8s

    from jobset_core.errors import CreationFailed

    quota = k8s.V1ResourceQuota(
        metadata=k8s.V1ObjectMeta(name="no-jobs"),
        spec=k8s.V1ResourceQuotaSpec(hard={"count/jobs.batch": "0"}),
    )
    case.devcluster.core.create_namespaced_resource_quota(case.namespace, quota)
    ti = TI(case.run_id)
    op = case.operator(jobset(case), deferrable=deferred, delete_policy="never", stream_logs=False)
    try:
        if deferred:
            found = await asyncio.to_thread(deferred_of, op, ti)
            event = await anext(case.trigger(found).run())
            await asyncio.to_thread(op.execute_complete, {"ti": ti}, event.payload)
        else:
            await asyncio.to_thread(op.execute, {"ti": ti})
        case.expect(False, "a refused Job did not end the wait")
    except CreationFailed as error:
        case.expect(error.verdict.reason == "JobCreationFailed", f"reason {error.verdict}")
    except Exception as error:
        case.expect(False, f"not CreationFailed: {type(error).__name__}: {error}")


async def s_stale(case: Case, who: Identity) -> None:
    """A pass from a view a moment old: the anchor changed meanwhile (the status write meets
    a compare-and-swap conflict and reads the anchor again), and a Job the view lacks exists
    already (the create meets 409 and reads it)."""
    from jobset_core.client import Client, ClientSettings
    from jobset_core.lifecycle import Handle, Lifecycle
    from jobset_core.observe import Observer

    ti = TI(case.run_id)
    body = jobset(case, first={"devcluster/never-finish": "true"})
    deferred = await asyncio.to_thread(deferred_of, case.operator(body, deferrable=True), ti)
    _, kwargs = deferred.trigger.serialize()
    handle = Handle(**kwargs["handle"])
    async with Client(ClientSettings(kubeconfig_path=who.kubeconfig)) as client:
        observer = Observer(client, scope="run")
        backend = Lifecycle(observer).runs.backend("native")
        target = backend.target(handle)
        view = await observer.snapshot(target)
        case.devcluster.core.patch_namespaced_config_map(
            handle.name, handle.namespace, {"metadata": {"annotations": {"touched": "yes"}}}
        )
        await backend.drive(handle, _stale_status(view), create=True, remember=_ignore)
        await backend.drive(
            handle, dataclasses.replace(view, jobs=()), create=True, remember=_ignore
        )
        await observer.aclose()


def _stale_status(view: Any) -> Any:
    """The view with a status the anchor does not have yet (so the pass writes one)."""
    import json as _json

    anchor = copy.deepcopy(view.anchor)
    status = _json.loads(anchor["data"].get("status.json") or "{}")
    status["conditions"] = []
    status["replicatedJobsStatus"] = []  # the pass always counts the Jobs it sees: a write
    anchor["data"]["status.json"] = _json.dumps(status)
    return dataclasses.replace(view, anchor=anchor)


def _ignore(*_: Any) -> None:
    return None


async def t_kill(case: Case) -> None:
    ti = TI(case.run_id)
    body = jobset(case, second={"devcluster/never-finish": "true"})
    deferred = await asyncio.to_thread(deferred_of, case.operator(body, deferrable=True), ti)
    trigger = case.trigger(deferred)
    waiting = asyncio.ensure_future(anext(trigger.run()))
    await asyncio.sleep(3)
    await trigger.on_kill()
    case.expect(await asyncio.to_thread(case.wait_gone), "the trigger's on_kill did not delete")
    with contextlib.suppress(Exception):
        await asyncio.wait_for(waiting, 30)


async def t_restart(case: Case) -> None:
    from jobset_core.errors import JobSetRestarting

    # ``b`` of the second attempt waits until try 2 deferred: else, on a loaded machine, the
    # second attempt may end before try 2's first look, which then rightly returns at once.
    body = jobset(
        case,
        first={"devcluster/fail-until-attempt": "1"},
        second={"devcluster/never-finish": "true"},
        restarts=1,
    )
    for try_number in (1, 2):
        ti = TI(case.run_id, try_number)
        op = case.operator(body, deferrable=True, delete_policy="never", stream_logs=False)
        deferred = await asyncio.to_thread(deferred_of, op, ti)
        waiting = asyncio.ensure_future(anext(case.trigger(deferred).run()))
        if try_number == 2:  # (on the native backend, the trigger's passes create ``b``)
            await asyncio.to_thread(case.end_pods, f"{labels.REPLICATED_JOB_NAME}=b")
        event = await waiting
        try:
            result = await asyncio.to_thread(op.execute_complete, {"ti": ti}, event.payload)
        except JobSetRestarting:
            case.expect(try_number == 1, "restarted twice")
            continue
        case.expect(try_number == 2 and result == 7, f"try {try_number}: {result!r}")


def scenario(name: str, case: Case) -> Awaitable[None]:
    table: dict[str, Callable[[], Awaitable[None]]] = {
        "complete": lambda: s_complete(case),
        "adopt": lambda: s_adopt(case),
        "failed": lambda: s_failed(case),
        "kill": lambda: s_kill(case),
        "sensor": lambda: s_sensor(case),
        "deferred": lambda: s_deferred(case),
        "restart": lambda: s_restart(case),
        "namesake": lambda: s_namesake(case),
        "quota": lambda: s_quota(case),
        "stale": lambda: s_stale(case, case.worker),
        "t_deferred": lambda: s_deferred(case),
        "t_kill": lambda: t_kill(case),
        "t_restart": lambda: t_restart(case),
        "t_quota": lambda: s_quota(case, deferred=True),
        "t_stale": lambda: s_stale(case, case.triggerer),
    }
    return table[name]()


# ---------------------------------------------------------------------- running variants


class LogTap(logging.Handler):
    """Every standard-library log record of this process (the core logs there; Airflow's
    task loggers write to the captured output, read with :meth:`take`)."""

    def __init__(self, capfd: pytest.CaptureFixture[str]) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._capfd = capfd

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            text = record.getMessage()
            with self._lock:
                self.lines.append(text)

    def take(self) -> None:
        """Add what was written to the standard output and error so far."""
        out, err = self._capfd.readouterr()
        with self._lock:
            self.lines.extend((out + err).splitlines())

    def said(self, text: str) -> bool:
        with self._lock:
            return any(text in line for line in self.lines)

    def refusals(self, namespace: str) -> list[str]:
        with self._lock:
            return [ln for ln in self.lines if namespace in ln and "403" in ln]


@contextlib.contextmanager
def tapped(capfd: pytest.CaptureFixture[str]) -> Iterator[LogTap]:
    tap = LogTap(capfd)
    loggers = [logging.getLogger(), logging.getLogger("airflow.task")]
    for logger in loggers:
        logger.addHandler(tap)
    previous = logging.getLogger().level
    logging.getLogger().setLevel(logging.INFO)
    try:
        yield tap
    finally:
        logging.getLogger().setLevel(previous)
        for logger in loggers:
            logger.removeHandler(tap)


@dataclass
class Outcome:
    case: Case
    error: str | None
    refusals: list[str]


async def run_cases(cases: list[Case], logs: LogTap) -> list[Outcome]:
    from concurrent.futures import ThreadPoolExecutor

    # Each blocking operator call holds a thread for its whole wait: one each.
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(4 * len(cases) + 8))

    async def one(case: Case) -> Outcome:
        error = None
        try:
            await asyncio.wait_for(scenario(case.scenario, case), SCENARIO_TIMEOUT + 60)
        except Exception as exc:  # every failure is an outcome here
            error = f"{type(exc).__name__}: {exc}"
        return Outcome(case, error or ("; ".join(case.problems) or None), [])

    outcomes = list(await asyncio.gather(*(one(c) for c in cases)))
    logs.take()
    for outcome in outcomes:
        missing = [t for t in outcome.case.texts if not logs.said(t)]
        if missing:
            said = f"not in the logs: {missing}"
            outcome.error = f"{outcome.error}; {said}" if outcome.error else said
    return outcomes


def prepare(
    devcluster: Any,
    folder: Path,
    proxy: FaultProxy,
    wanted: tuple[str, str, str, tuple[str, str, str] | None],
) -> Case:
    who, backend, scenario_name, removed = wanted
    namespace = devcluster.create_namespace("rbac")
    state = devcluster.state_dir
    worker = identity(state, folder, namespace, "airflow-worker", server=proxy.url)
    triggerer = identity(state, folder, namespace, "airflow-triggerer", server=proxy.url)
    for side, account in (("worker", worker), ("triggerer", triggerer)):
        role = role_name(side, backend)
        rules = role_rules(role)
        if side == who and removed is not None:
            rules = without(rules, *removed)
        bind_role(devcluster, namespace, role, account, rules=rules)
    return Case(scenario_name, backend, namespace, worker, triggerer, devcluster, removed)


def prepare_all(
    devcluster: Any,
    folder: Path,
    proxy: FaultProxy,
    wanted: list[tuple[str, str, str, tuple[str, str, str] | None]],
) -> list[Case]:
    """Namespaces, identities and Roles of many cases, a few at a time."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(prepare, devcluster, folder, proxy, w) for w in wanted]
        return [f.result() for f in futures]


def used_verbs(events: list[dict], username: str, namespace: str) -> set[tuple[str, str, str]]:
    used = set()
    for event in events:
        ref = event.get("objectRef") or {}
        if event["user"]["username"] != username or ref.get("namespace") != namespace:
            continue
        key = (ref.get("apiGroup", ""), ref.get("resource", ""), ref.get("subresource", ""))
        if key in RESOURCE_OF:
            group, resource = RESOURCE_OF[key]
            used.add((group, resource, event["verb"]))
    return used


def refused(events: list[dict], case: Case, user: str) -> set[tuple[str, str, str]]:
    out = set()
    for event in events:
        ref = event.get("objectRef") or {}
        if event["user"]["username"] != user or ref.get("namespace") != case.namespace:
            continue
        if (event.get("responseStatus") or {}).get("code") != 403:
            continue
        if "dryRun=All" in (event.get("requestURI") or ""):
            # The server checks' dry runs of pods (and the controller backend's Jobs): refused
            # without the optional server-checks Role, by design, and said once as unchecked.
            continue
        key = (ref.get("apiGroup", ""), ref.get("resource", ""), ref.get("subresource", ""))
        if key in RESOURCE_OF:
            out.add((*RESOURCE_OF[key], event["verb"]))
    return out


@pytest.fixture
def proxy(devcluster: Any) -> Iterator[FaultProxy]:
    """The proxy every identity talks through; it cuts all open watches every few seconds."""
    with FaultProxy(devcluster.state_dir) as running, running.cutting(CUT_EVERY):
        yield running


def test_the_roles_are_enough_and_every_verb_is_needed(
    devcluster: Any, proxy: FaultProxy, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    state = devcluster.state_dir
    cases: list[Case] = []
    try:
        with tapped(capfd) as logs:
            # 1. Enough: every scenario with the full Roles.
            wanted = [
                (who, backend, name, None)
                for (who, backend), names in SCENARIOS.items()
                for name in names
            ]
            cases += prepare_all(devcluster, tmp_path, proxy, wanted)
            full = asyncio.run(run_cases(cases, logs))
            events = devcluster_auth.audit_events(state)
            failures = [f"{o.case.scenario}/{o.case.backend}: {o.error}" for o in full if o.error]
            assert not failures, "\n".join(failures)
            denied = [
                f"{c.scenario}/{c.backend}: {v}"
                for c in cases
                for user in (c.worker.username, c.triggerer.username)
                for v in refused(events, c, user)
            ]
            assert not denied, f"403 with the full Roles: {denied}"

            # 2. Needed: each verb removed, with the scenarios that used it.
            wanted = []
            unused: list[str] = []
            for (who, backend), names in SCENARIOS.items():
                role = role_name(who, backend)
                mine = [c for c in cases if c.backend == backend and c.scenario in names]
                for verb in verbs_of(role_rules(role)):
                    users = [
                        c
                        for c in mine
                        if verb
                        in used_verbs(
                            events,
                            (c.worker if who == "worker" else c.triggerer).username,
                            c.namespace,
                        )
                    ]
                    if not users:
                        unused.append(f"{role}: {verb}")
                        continue
                    # A scenario whose use of the verb does not depend on timing, if any.
                    sure = [c for c in users if c.scenario == SURE_USER.get(verb)]
                    wanted.append((who, backend, (sure or users)[0].scenario, verb))
            assert not unused, f"verbs no scenario used (not needed?): {unused}"
            # A scenario that did not reach the removed verb this time (its run ended before a
            # watch opened, on a loaded machine) proves nothing either way: it runs once more.
            # One that reached it (403) and went on as if nothing happened fails at once.
            not_needed: list[str] = []
            for attempt in (1, 2):
                removals = prepare_all(devcluster, tmp_path, proxy, wanted)
                cases += removals
                taken = asyncio.run(run_cases(removals, logs))
                events = devcluster_auth.audit_events(state)
                not_needed, wanted = [], []
                for outcome in taken:
                    case = outcome.case
                    triggerer = case.scenario.startswith("t_")
                    user = case.triggerer.username if triggerer else case.worker.username
                    assert case.removed is not None
                    denied_here = case.removed in refused(events, case, user)
                    noticed = outcome.error is not None or bool(logs.refusals(case.namespace))
                    if not denied_here and attempt == 1:
                        who = "triggerer" if triggerer else "worker"
                        wanted.append((who, case.backend, case.scenario, case.removed))
                    elif not (denied_here and noticed):
                        not_needed.append(
                            f"{case.removed} ({case.scenario}/{case.backend} in "
                            f"{case.namespace}, try {attempt}): 403 seen {denied_here}, "
                            f"failure or report {noticed} ({outcome.error})"
                        )
                if not wanted:
                    break
            assert not not_needed, "verbs whose removal nothing noticed:\n" + "\n".join(not_needed)
    finally:
        for case in cases:
            devcluster.delete_namespace(case.namespace)
