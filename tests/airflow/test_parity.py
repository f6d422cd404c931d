"""Parity: one scenario table, every way in, both backends, the same verdict at the same time.

Ways in: the operator in worker mode, the operator deferrable with a real triggerer process
(scheduler, triggerer, API server and DAG processor of :mod:`tests.airflow._harness`), the
``JobSetSensor`` (poke mode), the KFP launcher (its command line, in the KFP environment) and
``jobsetctl run``. Each way runs its own JobSet of the scenario, on the controller and on the
native backend.

What must agree, per scenario and backend:

* the verdict (``completed``, ``failed``, ``creation_failed``, ``gone``, ``timeout``) and its
  reason (``AllJobsCompleted``, ``ReachedMaxRestarts``, ``JobCreationFailed``, ...);
* the time to verdict, within :data:`WITHIN` seconds (see :func:`tolerance`): measured from the
  moment that decides it (the resume of a suspended JobSet, its deletion, the way's own
  submission for a creation the cluster refuses, the way's deadline for a timeout).

Airflow surfaces a restart as a task retry: the two operator ways end their first try with a
``restarting`` verdict and finish on the next try, while the sensor, KFP and ``jobsetctl`` wait
through the restart. Their final verdicts must agree; their times are compared within each
group (a retry hop through the scheduler is Airflow's own latency, not ours).

To line everyone up, JobSets start suspended and are resumed (or deleted) once every way is
watching; ``suspended`` is also a scenario of its own, held suspended for a while first.

The queue scenarios run through the devcluster's Kueue (controller backend: the native one
refuses a queue), each in a namespace with a ClusterQueue of its own: queued behind a blocker
for longer than the ways' ``timeout`` then admitted and completed, an admission timeout, a
request above the ClusterQueue's maximum, a preemption by a high-priority JobSet then
readmission, and a Workload deactivated for exceeding its maximum execution time. Every way
gets the queue through its own argument (``queue=``, ``--queue``).

The refused-pods scenarios have the API server refuse the pods once every way watches (the
JobSets exist, their Jobs wait suspended): the namespace turns Pod Security ``restricted`` just
before the resume, or a quota fits one pod of each run's two (never ending, so it stays held).
Every way fails with ``PodsRefused`` within :data:`REFUSED_WITHIN` seconds of its run's first
``FailedCreate``, at the same time (``pytest -k refuses``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobset_core import labels
from tests.airflow._harness import AirflowProcesses, airflow_processes
from tests.cluster.faultproxy import FaultProxy
from tests.cluster.queues import HIGH, LOCAL_QUEUE, LOW, own_queue

# alone: it times the ways against each other (2 s), which other tests' load would blur.
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.airflow,
    pytest.mark.alone,
    pytest.mark.timeout(1500),
]

ROOT = Path(__file__).resolve().parents[2]
KFP_PYTHON = ROOT / ".venv" / "kfp" / "bin" / "python"
BACKENDS = ("controller", "native")
WAYS = ("worker", "deferrable", "sensor", "kfp", "cli")
AIRFLOW_WAYS = ("worker", "deferrable")
#: How far apart the ways' times to verdict may be (seconds) on a machine whose run queue does
#: not exceed its cores; see :func:`tolerance` for a busier one.
WITHIN = 2.0
WATCHING_TIMEOUT = 240.0
#: Seconds between the starts of a wave's scenarios (each started its DAG run with two
#: `airflow` CLI calls, ~8 s, before the REST API did it at once).
SCENARIO_GAP = 3.0
TIMEOUT = 12
#: Seconds from a run's first ``FailedCreate`` to its verdict, at most (issue 21).
REFUSED_WITHIN = 20.0
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}

# ---------------------------------------------------------------------------------- scenarios


def rjob(name: str, replicas: int = 1, **notes: str) -> dict[str, Any]:
    annotations = {
        "devcluster/run-seconds": "1",
        **{f"devcluster/{k}": v for k, v in notes.items()},
    }
    pod = {
        "metadata": {"annotations": annotations},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
    }
    job = {"backoffLimit": 0, "completions": 1, "parallelism": 1, "template": pod}
    return {"name": name, "replicas": replicas, "template": {"spec": job}}


@dataclass(frozen=True)
class Scenario:
    """One row of the table.

    Attributes:
        id: Its name (and its DAG's).
        rjobs: The replicated jobs.
        spec: More of the JobSet's spec.
        quota: A ResourceQuota of the namespace (``hard``), if any.
        action: What the driver does once every way watches: ``resume`` (the JobSet starts
            suspended), ``delete`` (a never-ending JobSet), or nothing.
        hold: Seconds to stay suspended before the resume.
        timeout: The ways' timeout, if the scenario is about it.
        kind: The final verdict of every way.
        reason: A word of the verdict's reason or message every way reports.
        first: The first try's verdict of the operator ways, when a restart ends it.
        retries: The operator ways' retries.
        start: The pod start rules every way is given (``start_grace`` seconds,
            ``crash_loop_restarts``), as the operator's arguments.
        backends: The backends it runs on.
        queue: Each way's JobSet goes through the namespace's LocalQueue, requesting this
            many CPUs per pod (Kueue counts requests), with these more operator arguments
            (``admission_timeout`` seconds, ``on_preemption``).
        blocker: CPUs a JobSet of the driver holds in the queue before the ways start (it
            never ends; ``unblock`` deletes it).
        labels: More labels of each way's JobSet (Kueue's ``max-exec-time-seconds``,
            ``priority-class``).
        enforce: Labels the driver puts on the namespace just before the resume (Pod
            Security's ``enforce``): the pods are refused although the JobSet was accepted.
    """

    id: str
    rjobs: tuple[dict[str, Any], ...]
    spec: dict[str, Any] = field(default_factory=dict)
    quota: dict[str, str] | None = None
    action: str | None = "resume"
    hold: float = 0.0
    timeout: int | None = None
    kind: str = "completed"
    reason: str = "AllJobsCompleted"
    first: str | None = None
    retries: int = 0
    start: dict[str, Any] = field(default_factory=dict)
    backends: tuple[str, ...] = BACKENDS
    queue: str | None = None
    queued: dict[str, Any] = field(default_factory=dict)
    blocker: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    enforce: dict[str, str] = field(default_factory=dict)

    @property
    def admission(self) -> float | None:
        """The ways' admission timeout, when the scenario is about it."""
        return self.queued.get("admission_timeout")

    @property
    def cannot_start(self) -> bool:
        """Whether the verdict is about pods that cannot start (no terminal JobSet)."""
        return self.reason == "PodsCannotStart"

    @property
    def pods_refused(self) -> bool:
        """Whether the verdict is about pods the API server refuses (no pod, no terminal
        JobSet): timed from the run's first ``FailedCreate``."""
        return self.reason == "PodsRefused"

    @property
    def way_timeout(self) -> float | None:
        """The ways' ``timeout``: the scenario's (about it), or a queue scenario's (not)."""
        return self.timeout or self.queued.get("timeout")

    def operator_args(self) -> dict[str, Any]:
        """The pod start rules and the queue's arguments, as the operator takes them."""
        args = dict(self.start)
        if self.queue is not None:
            args["queue"] = LOCAL_QUEUE
            args.update({k: v for k, v in self.queued.items() if k != "timeout"})
        return args

    def sensor_args(self) -> dict[str, Any]:
        """What of :meth:`operator_args` a sensor takes (it does not submit)."""
        return {k: v for k, v in self.operator_args().items() if k not in ("queue",)}

    def cli_flags(self) -> list[str]:
        """The pod start rules and the queue's arguments as ``jobsetctl run`` flags."""
        return self._flags(CLI_FLAGS)

    def kfp_flags(self) -> list[str]:
        """The pod start rules and the queue's arguments as the KFP launcher's flags."""
        return self._flags(KFP_FLAGS)

    def _flags(self, spelled: dict[str, str]) -> list[str]:
        given = {**self.start, **{k: v for k, v in self.queued.items() if k != "timeout"}}
        if self.queue is not None:
            given["queue"] = LOCAL_QUEUE
        return [
            part
            for key, flag in spelled.items()
            if key in given
            for part in (flag, str(given[key]))
        ]


#: The operator's arguments as ``jobsetctl run`` and the KFP launcher spell them.
CLI_FLAGS = {
    "start_grace": "--start-grace",
    "crash_loop_restarts": "--crash-loop-restarts",
    "queue": "--queue",
    "admission_timeout": "--admission-timeout",
    "on_preemption": "--on-preemption",
}
KFP_FLAGS = {
    **CLI_FLAGS,
    "start_grace": "--start-grace-seconds",
    "admission_timeout": "--admission-timeout-seconds",
}


def crash_looping(name: str) -> dict[str, Any]:
    """A replicated job whose container keeps crashing and is restarted in place."""
    rj = rjob(
        name,
        **{"crash-loop": "true", "exit-code": "3", "crash-backoff-seconds": "1"},
    )
    job = rj["template"]["spec"]
    job["backoffLimit"] = 20  # the Job would go on restarting it for a long time
    job["template"]["spec"]["restartPolicy"] = "OnFailure"
    return rj


def missing_secret(name: str) -> dict[str, Any]:
    """A replicated job whose container refers to a Secret that does not exist."""
    rj = rjob(name, **{"cannot-start": "CreateContainerConfigError"})
    (container,) = rj["template"]["spec"]["template"]["spec"]["containers"]
    container["env"] = [
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "token"}}}
    ]
    return rj


NEVER = {"never-finish": "true"}


def queued_rjob(name: str, cpu: str, seconds: float = 1, **notes: str) -> dict[str, Any]:
    """A replicated job whose pod requests ``cpu`` CPUs (what Kueue counts)."""
    rj = rjob(name, **{"run-seconds": str(seconds), **notes})
    (container,) = rj["template"]["spec"]["template"]["spec"]["containers"]
    container["resources"] = {"requests": {"cpu": cpu, "memory": "64Mi"}}
    return rj


CONTROLLER = ("controller",)
#: The queue scenarios (controller backend; a namespace and a ClusterQueue each).
QUEUE_SCENARIOS = (
    Scenario(
        "queued",  # behind a blocker longer than the ways' timeout, then admitted: completed
        (queued_rjob("w", "0.5"),),
        action="unblock",
        # Queued for longer than the timeout. The timeout is what a burst of eight admissions
        # needs to start and finish on a busy 2-core machine (6 s was missed once in CI).
        hold=20.0,
        backends=CONTROLLER,
        queue="4",
        blocker="4",
        queued={"timeout": 16},
    ),
    Scenario(
        "admission",
        (queued_rjob("w", "0.5"),),
        action=None,
        kind="timeout",
        reason="was not admitted by LocalQueue",
        backends=CONTROLLER,
        queue="4",
        blocker="4",
        queued={"admission_timeout": 8},
    ),
    Scenario(
        "inadmissible",  # 6 CPUs: above the ClusterQueue's 4, for ever
        (queued_rjob("w", "6"),),
        action=None,
        kind="refused",
        reason="ExceedsMaximumQuota",
        backends=CONTROLLER,
        queue="4",
    ),
    Scenario(
        "preempted",  # admitted together; a high-priority JobSet takes the quota from them
        (queued_rjob("w", "0.5", 15),),
        action="preempt",
        backends=CONTROLLER,
        queue="4",
        blocker="4",
        labels={"kueue.x-k8s.io/priority-class": LOW},
    ),
    Scenario(
        "deactivated",  # Kueue deactivates the Workload once it ran 4 s
        (queued_rjob("w", "0.5", 120),),
        action=None,
        kind="refused",
        reason="MaximumExecutionTimeExceeded",
        backends=CONTROLLER,
        queue="4",
        labels={"kueue.x-k8s.io/max-exec-time-seconds": "4"},
    ),
)
#: Pods the API server refuses after the JobSet was accepted (``pytest -k refuses``).
REFUSED_SCENARIOS = (
    Scenario(
        "podsecurity", (rjob("w", 2),), kind="failed", reason="PodsRefused", enforce=RESTRICTED
    ),
    Scenario(
        "podquota",  # one pod of all the ways' runs fits; it never ends: the others wait 10 s
        (rjob("w", 2, **NEVER),),
        quota={"pods": "1"},
        kind="failed",
        reason="PodsRefused",
    ),
)
SCENARIOS = (
    Scenario("success", (rjob("w", 2),)),
    Scenario(
        "any",
        (rjob("driver"), rjob("workers", 2, **NEVER)),
        {"successPolicy": {"operator": "Any", "targetReplicatedJobs": ["driver"]}},
    ),
    Scenario(
        "restart",
        (rjob("w", 2, **{"fail-until-attempt": "1"}),),
        {"failurePolicy": {"maxRestarts": 1}},
        first="restarting",
        retries=1,
    ),
    Scenario(
        "failjobset",
        (rjob("w", **{"exit-code": "3"}),),
        {
            "failurePolicy": {
                "maxRestarts": 2,
                "rules": [
                    {"action": "FailJobSet", "onJobFailureReasons": ["BackoffLimitExceeded"]}
                ],
            }
        },
        kind="failed",
        reason="FailJobSetFailurePolicyAction",
        retries=2,  # as many as maxRestarts (else the operator warns); the rule fails at once
    ),
    Scenario(
        "maxrestarts",
        (rjob("w", **{"exit-code": "1"}),),
        {"failurePolicy": {"maxRestarts": 1}},
        kind="failed",
        reason="ReachedMaxRestarts",
        first="restarting",
        retries=1,
    ),
    Scenario(
        "jobquota",
        (rjob("w"),),
        quota={"count/jobs.batch": "0"},
        action=None,
        kind="creation_failed",
        reason="JobCreationFailed",
    ),
    Scenario(
        "servicequota",
        (rjob("w"),),
        quota={"services": "0"},
        action=None,
        kind="creation_failed",
        reason="HeadlessServiceCreationFailed",
    ),
    Scenario("deleted", (rjob("w", **NEVER),), action="delete", kind="gone", reason="was deleted"),
    Scenario("suspended", (rjob("w"),), hold=5.0),
    Scenario(
        "badimage",
        (rjob("w", 2, **{"cannot-start": "ErrImagePull"}),),
        kind="failed",
        reason="PodsCannotStart",
        start={"start_grace": 4},
    ),
    Scenario(
        "nosecret",
        (missing_secret("w"),),
        kind="failed",
        reason="PodsCannotStart",
        start={"start_grace": 0},
    ),
    Scenario(
        "crashloop",
        (crash_looping("w"),),
        kind="failed",
        reason="PodsCannotStart",
        start={"crash_loop_restarts": 2},
    ),
    Scenario(
        "timeout",
        (rjob("w", **NEVER),),
        action=None,
        timeout=TIMEOUT,
        kind="timeout",
        reason="did not finish within",
    ),
    *QUEUE_SCENARIOS,
    *REFUSED_SCENARIOS,
)


def document(scenario: Scenario, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicatedJobs": list(scenario.rjobs), **scenario.spec}
    if scenario.action == "resume":
        spec["suspend"] = True
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": {"parity": scenario.id, **scenario.labels}},
        "spec": spec,
    }


def held(name: str, cpu: str, seconds: float | None = None, priority: str | None = None) -> dict:
    """A JobSet of the driver's in the scenario's queue (not a way's: no ``parity`` label)."""
    rj = queued_rjob("h", cpu, seconds) if seconds is not None else queued_rjob("h", cpu, **NEVER)
    marks = {labels.KUEUE_QUEUE: LOCAL_QUEUE}
    if priority:
        marks[labels.KUEUE_PRIORITY_CLASS] = priority
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": marks},
        "spec": {"replicatedJobs": [rj]},
    }


def short(backend: str) -> str:
    return backend[0]  # c / n


# ---------------------------------------------------------------------------------- results


@dataclass
class WayResult:
    """What one way reported for its JobSet of a scenario."""

    way: str
    backend: str
    namespace: str | None = None
    name: str = ""
    kinds: list[str] = field(default_factory=list)  # one verdict per try
    messages: list[str] = field(default_factory=list)
    started_at: float = field(default_factory=time.time)
    submitted_at: float | None = None
    watching_at: float | None = None
    verdict_at: list[float] = field(default_factory=list)
    error: str = ""

    def note(self, kind: str, message: str) -> None:
        self.note_at(kind, message, time.time())

    def note_at(self, kind: str, message: str, stamp: float) -> None:
        self.kinds.append(kind)
        self.messages.append(message)
        self.verdict_at.append(stamp)

    @property
    def final(self) -> str:
        return self.kinds[-1] if self.kinds else "none"


_KIND_BY_ERROR = {
    "JobSetFailed": "failed",
    "JobSetRestarting": "restarting",
    "WaitTimeout": "timeout",
    "AdmissionTimeout": "timeout",
    "CreationFailed": "creation_failed",
    "JobSetGone": "gone",
    "QueueRefused": "refused",
    "PodsCannotStart": "failed",
    "PodsRefused": "failed",
    "JobSetPreempted": "preempted",
}
#: The progress lines a way prints (``kind: ...``), and those that show it watches its run.
PROGRESS = ("status:", "restarting:", "queued:", "admitted:", "preempted:", "refused:")
WATCHING = ("status:", "restarting:", "queued:")


def kind_of(message: str) -> str:
    """The verdict a judge's message stands for (the judge writes them in one place)."""
    for kind, pattern in (
        (
            "refused",
            r" will not be run by | was preempted by \S+ \S+ \(preemption \d+\)(?!, requeued)",
        ),
        ("preempted", r" was preempted by .*, requeued"),
        ("timeout", r" was not admitted by .* within "),
        ("completed", r" completed \("),
        ("restarting", r" is restarting \(restart "),
        ("failed", r" failed: "),
        ("timeout", r" did not finish within "),
        ("gone", r" was (deleted|replaced)"),
        ("creation_failed", r": (JobCreationFailed|HeadlessServiceCreationFailed|PVCCreation)"),
    ):
        if re.search(pattern, message):
            return kind
    return "unknown"


# ---------------------------------------------------------------------------------- the ways


def run_worker(scenario: Scenario, backend: str, namespace: str, result: WayResult) -> None:
    """The operator in worker mode, in a thread of this process; a restart is retried at once
    (the next try reattaches), as Airflow's retry would."""
    from airflow_provider_jobset._compat import AirflowFailException
    from airflow_provider_jobset.operators import JobSetOperator

    name = f"w-{short(backend)}"
    result.name = name
    op = JobSetOperator(
        task_id="t",
        jobset=document(scenario, name),
        name=name,
        namespace=namespace,
        backend=backend,
        deferrable=False,
        timeout=dt.timedelta(seconds=scenario.way_timeout) if scenario.way_timeout else None,
        delete_policy="never",
        stream_logs=False,
        retries=scenario.retries,
        **scenario.operator_args(),
    )
    said: list[tuple[float, str]] = []  # the try's verdict is logged the moment it comes
    info = op.log.info

    def tap(msg: str, *args: Any) -> None:
        said.append((time.time(), msg % args))
        info(msg, *args)

    op.log.info = tap  # type: ignore[method-assign]
    ti = _TI(f"parity-{scenario.id}", result)
    for try_number in range(1, scenario.retries + 2):
        ti.try_number = try_number
        said.clear()
        error: BaseException | None = None
        try:
            op.execute({"ti": ti})
        except Exception as err:
            error = err.__cause__ if isinstance(err, AirflowFailException) else err
        judged = [(t, m) for t, m in said if kind_of(m) != "unknown"]
        if judged:
            result.note_at(kind_of(judged[-1][1]), judged[-1][1], judged[-1][0])
        else:  # it ended without a verdict (an error before or after the wait)
            result.note(_KIND_BY_ERROR.get(type(error).__name__, "error"), str(error))
        if type(error).__name__ != "JobSetRestarting":
            return


class _TI:
    """The task instance of a worker-mode try: enough for ``execute``."""

    dag_id = "parity"
    task_id = "t"
    map_index = -1
    start_date = None

    def __init__(self, run_id: str, result: WayResult) -> None:
        self.run_id, self.result = run_id, result
        self.try_number = 1
        self.xcoms: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = value
        if key == "jobset_uid" and self.result.submitted_at is None:
            self.result.submitted_at = self.result.watching_at = time.time()


def run_sensor(
    scenario: Scenario, backend: str, namespace: str, result: WayResult, submit: Callable[..., Any]
) -> None:
    """``JobSetSensor`` in poke mode: the driver submits the JobSet, the sensor waits for
    ``Completed`` (each poke waits up to ``poke_interval`` with the core's wait)."""
    from airflow_provider_jobset.sensors import JobSetSensor

    name = f"s-{short(backend)}"
    result.name = name
    said: list[tuple[float, str]] = []  # when the sensor said what
    sensor = JobSetSensor(
        task_id="s",
        name=name,
        namespace=namespace,
        backend=backend,
        poke_interval=15,
        **scenario.sensor_args(),
    )
    sensor.log.info = lambda msg, *args: said.append((time.time(), msg % args))  # type: ignore[method-assign]

    def last(kinds: tuple[str, ...]) -> tuple[float, str] | None:
        judged = [(t, m) for t, m in said if kind_of(m) in kinds]
        return judged[-1] if judged else None

    # Watching once a look of the sensor found the run (not once it is submitted): a run
    # deleted before the sensor's first look is a run that does not exist yet, for a sensor,
    # and it waits for it (a cold run's loaded wave met exactly that).
    look = sensor._seen

    async def seen(*args: Any) -> Any:
        found = await look(*args)
        if found and result.watching_at is None:
            result.watching_at = time.time()
        return found

    sensor._seen = seen  # type: ignore[method-assign]
    submit(document(scenario, name), backend, namespace, queue=scenario.queue is not None)
    result.submitted_at = time.time()
    ends = time.time() + (scenario.timeout or 900)
    try:
        while time.time() < ends:
            sensor.poke_interval = max(0.1, min(15.0, ends - time.time()))
            if sensor.poke({}):
                done = last(("completed",))
                if done is None:
                    result.note("completed", said[-1][1])
                else:
                    result.note_at("completed", done[1], done[0])
                return
            failed = last(("failed",))
            if failed:
                result.note_at("failed", failed[1], failed[0])
                return
        result.note(
            "timeout", f"JobSet {namespace}/{name} did not finish within {scenario.timeout}s"
        )
    except Exception as err:
        judged = last(("failed", "creation_failed", "gone", "refused", "timeout"))
        if judged is not None:  # the judge's words, said when it came
            result.note_at(kind_of(judged[1]), judged[1], judged[0])
        else:  # AirflowFailException without a verdict said: not what a user should get
            result.note(_KIND_BY_ERROR.get(type(err).__name__, "error"), str(err))


def run_cli(
    scenario: Scenario,
    backend: str,
    namespace: str,
    result: WayResult,
    tmp: Path,
    *,
    kubeconfig: Path,
) -> None:
    """``jobsetctl run`` in a thread of this process, told the cluster as a user would tell it."""
    from jobset_core import cli

    name = f"c-{short(backend)}"
    result.name = name
    path = tmp / f"{name}-{scenario.id}.yaml"
    path.write_text(yaml.safe_dump(document(scenario, name)))
    out = _Stamped(result)
    args = [
        "run",
        str(path),
        "-n",
        namespace,
        "--backend",
        backend,
        "--kubeconfig",
        str(kubeconfig),
    ]
    if scenario.way_timeout:
        args += ["--timeout", str(scenario.way_timeout)]
    args += scenario.cli_flags()
    cli.main(args, stdout=out, stderr=out, stdin=io.StringIO())  # the verdict goes to either
    if not result.kinds:
        result.error = out.getvalue()


class _Stamped(io.StringIO):
    """An output stream that notes when the run was created and first reported progress."""

    def __init__(self, result: WayResult) -> None:
        super().__init__()
        self.result = result

    def write(self, text: str) -> int:
        if text.startswith(("created:", "adopted:")) and self.result.submitted_at is None:
            self.result.submitted_at = time.time()
        elif self.result.watching_at is None and text.startswith(WATCHING):
            self.result.watching_at = time.time()
        elif text.startswith("jobsetctl run: ") and not self.result.kinds:
            self.result.note(kind_of(text), text.removeprefix("jobsetctl run: ").rstrip("\n"))
        return super().write(text)


def run_kfp(
    scenario: Scenario,
    backend: str,
    namespace: str,
    result: WayResult,
    *,
    tmp: Path,
    env: dict[str, str],
) -> None:
    """The KFP launcher's command line, in the KFP environment (a process of its own)."""
    run_id = f"{scenario.id}-{short(backend)}-{uuid.uuid4().hex[:6]}"
    path = tmp / f"kfp-{run_id}.yaml"
    path.write_text(yaml.safe_dump(document(scenario, f"k-{short(backend)}")))
    command = [
        str(KFP_PYTHON), "-m", "kfp_components.launcher", "launch", "--jobset", str(path),
        "--namespace", namespace, "--backend", backend, "--delete-policy", "never",
        "--run-id", run_id, "--task-name", "train", "--task-id", "1",
    ]  # fmt: skip
    if scenario.way_timeout:
        command += ["--timeout-seconds", str(int(scenario.way_timeout))]
    command += scenario.kfp_flags()
    proc = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    killer = threading.Timer(WATCHING_TIMEOUT + 300, proc.kill)  # never outlive the test
    killer.start()
    assert proc.stdout is not None
    lines: list[str] = []
    for line in proc.stdout:
        now = time.time()
        lines.append(line.rstrip("\n"))
        if " created; uid " in line or " adopted " in line:
            result.submitted_at = now
            result.name = line.split()[1].split("/", 1)[1]
        elif result.watching_at is None and line.startswith(WATCHING):
            result.watching_at = now
        elif (
            kind_of(line) != "unknown"
            and not line.startswith(PROGRESS)
            and not result.kinds  # the step says its verdict, then (failing) its error
        ):
            result.note_at(kind_of(line), line.rstrip("\n"), now)
    proc.wait(60)
    killer.cancel()
    if not result.kinds:
        result.error = "\n".join(lines[-30:])


# ---------------------------------------------------------------------------------- deferrable


DEFERRABLE_DAG = """
from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_jobset.operators import JobSetOperator

with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         default_args={{"retry_delay": timedelta(seconds=1)}}):
{tasks}
"""
TASK = """    JobSetOperator(task_id={task!r}, jobset={jobset!r}, name={name!r},
                   namespace={namespace!r}, backend={backend!r}, deferrable=True,
                   delete_policy="never", stream_logs=False, retries={retries},
                   timeout={timeout}{options})
"""


def deferrable_dag(scenario: Scenario, namespace: str) -> str:
    tasks = "".join(
        TASK.format(
            task=f"d_{backend}",
            jobset=document(scenario, f"d-{short(backend)}"),
            name=f"d-{short(backend)}",
            namespace=namespace,
            backend=backend,
            retries=scenario.retries,
            timeout=f"timedelta(seconds={scenario.way_timeout})" if scenario.way_timeout else None,
            options="".join(
                f", {key}={value!r}" for key, value in scenario.operator_args().items()
            ),
        )
        for backend in scenario.backends
    )
    return DEFERRABLE_DAG.format(dag_id=f"parity_{scenario.id}", tasks=tasks)


def _log_lines(path: Path) -> Iterator[tuple[float, str]]:
    """``(time, text)`` of each structured log line; a failed try's line carries the error."""
    for raw in path.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        stamp = dt.datetime.fromisoformat(entry["timestamp"].replace("Z", "+00:00")).timestamp()
        text = str(entry.get("event", ""))
        for detail in entry.get("error_detail") or []:
            text += f" {detail.get('exc_type')}: {detail.get('exc_value')}"
        yield stamp, text


def _triggerer_lines(ctx: AirflowProcesses, needle: str) -> list[tuple[float, str]]:
    """``(time, text)`` of the triggerer process's own log lines that hold ``needle``."""
    found = []
    path = ctx.home / "triggerer.log"
    for raw in path.read_text(errors="replace").splitlines() if path.exists() else ():
        stamp, _, rest = raw.partition(" ")
        if needle not in rest:
            continue
        with contextlib.suppress(ValueError):
            when = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
            found.append((when, rest.split("] ", 1)[-1]))
    return found


def read_deferrable(
    ctx: AirflowProcesses,
    scenario: Scenario,
    backend: str,
    result: WayResult,
    namespace: str | None = None,
) -> None:
    """What the task's worker tries and the real triggerer logged for the task: when it
    started, submitted, when its trigger first reported (watching) and each try's verdict
    (the trigger's, or the try's own when it ended without deferring). A trigger's verdict
    missing from its own log file (Airflow's triggerer once dropped a finished trigger's last
    lines there, under load) is read from the triggerer's log, where the same line stands."""
    folder = ctx.task_logs(f"parity_{scenario.id}", "parity", f"d_{backend}")
    result.name = f"d-{short(backend)}"
    result.kinds, result.messages, result.verdict_at = [], [], []
    if not folder.exists():
        return
    what = f"/{result.name}: JobSet "
    tries = [p for p in folder.glob("attempt=*.log") if ".trigger." not in p.name]
    for attempt in sorted(tries, key=lambda p: p.name):
        lines = list(_log_lines(attempt))
        if attempt.name == "attempt=1.log" and lines:
            result.started_at = min(stamp for stamp, _ in lines if stamp)
        triggers = sorted(folder.glob(f"{attempt.name}.trigger.*.log"))
        verdicts: list[tuple[float, str]] = []
        for stamp, text in lines:
            if result.submitted_at is None and text.startswith(("created JobSet", "reattached")):
                result.submitted_at = stamp
            elif not triggers and kind_of(text) != "unknown" and "status: " not in text:
                verdicts.append((stamp, text))  # ended in the worker: its last word
        for trigger_log in triggers:
            for stamp, text in _log_lines(trigger_log):
                if any(f" {word}" in text for word in WATCHING):
                    result.watching_at = result.watching_at or stamp
                elif what in text:
                    verdicts.append((stamp, text))  # "JobSet ns/name: <the verdict>"
        if triggers and not verdicts and namespace and attempt == max(tries):
            verdicts = _triggerer_lines(ctx, f" JobSet {namespace}/{result.name}: JobSet ")
        if verdicts:
            stamp, text = verdicts[0] if triggers else verdicts[-1]
            result.note_at(kind_of(text), text, stamp)


# ---------------------------------------------------------------------------------- the clock


class Moments:
    """The driver's own watch of the scenarios' namespaces: when each run (a JobSet, or a
    native run's anchor ConfigMap) first showed the state that decides its verdict.

    It is the test's clock, independent of the code under test: plain watches with the
    official client, one thread per namespace and kind. Each way's time to verdict is taken
    from its own run's moment, so the cluster's pace (a JobSet finishing a second later than
    its neighbour) is not mistaken for a way being slow.
    """

    def __init__(self, kubeconfig: Path, namespaces: list[str]) -> None:
        self.kubeconfig = kubeconfig
        self.seen: dict[tuple[str, str], dict[str, float]] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.finished: dict[tuple[str, str], list[float]] = {}  # when each child Job ended
        self.jobs_seen: set[str] = set()
        self.restarts: list[str] = []  # the watches' breaks, for a failure's message
        kinds = ("jobsets", "anchors", "events", "jobs", "workloads")
        self.ready = threading.Barrier(len(namespaces) * len(kinds) + 1)
        self.threads = [
            threading.Thread(target=self._watch, args=(namespace, kind), daemon=True)
            for namespace in namespaces
            for kind in kinds
        ]
        for thread in self.threads:
            thread.start()
        self.ready.wait(60)

    def first(self, namespace: str, name: str, what: str) -> float | None:
        """When ``what`` (``terminal``, ``restarted``, ``creation_failed``, ``deleting``) was
        first seen for the run ``name``."""
        with self.lock:
            return self.seen.get((namespace, name), {}).get(what)

    def last_job_end(self, namespace: str, name: str, before: float) -> float | None:
        """When the last of the run's child Jobs that ended before ``before`` ended (a native
        run's state is decided by its waiter, which is its controller: its anchor's moment
        would hide a waiter slow to reconcile; the Job's end is what it reacts to)."""
        with self.lock:
            ends = [t for t in self.finished.get((namespace, name), []) if t <= before]
        return max(ends) if ends else None

    def _mark(self, namespace: str, name: str, what: str) -> None:
        with self.lock:
            self.seen.setdefault((namespace, name), {}).setdefault(what, time.time())

    def _status(self, namespace: str, name: str, status: dict[str, Any], meta: Any) -> None:
        for condition in status.get("conditions") or []:
            decided = condition.get("type") in ("Completed", "Failed")
            if decided and condition.get("status") == "True":
                self._mark(namespace, name, "terminal")
        if int(status.get("restarts") or 0) > 0:
            self._mark(namespace, name, "restarted")
        if meta.get("deletionTimestamp"):
            self._mark(namespace, name, "deleting")

    def _watch(self, namespace: str, kind: str) -> None:
        from kubernetes import client, config, watch

        api = config.new_client_from_config(config_file=str(self.kubeconfig))
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        listing: Callable[..., Any] = {
            "jobsets": lambda **kw: custom.list_namespaced_custom_object(
                "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets", **kw
            ),
            "anchors": lambda **kw: core.list_namespaced_config_map(
                namespace, label_selector="jobset-core/anchor=native", **kw
            ),
            "events": lambda **kw: core.list_namespaced_event(namespace, **kw),
            "jobs": lambda **kw: client.BatchV1Api(api).list_namespaced_job(namespace, **kw),
            "workloads": lambda **kw: custom.list_namespaced_custom_object(
                "kueue.x-k8s.io", "v1beta2", namespace, "workloads", **kw
            ),
        }[kind]
        # A list first, then a watch from its resourceVersion, resumed from the last event's
        # after a break: a run whose state lasts a moment (terminal, then deleted by its
        # delete policy) is seen even when a watch breaks meanwhile. Only a 410 starts over.
        version = self._list(namespace, kind, listing, api)
        self.ready.wait(60)
        while not self.stop.is_set():
            if version is None:
                version = self._list(namespace, kind, listing, api)
                if version is None:
                    time.sleep(0.2)
                    continue
            began, got = time.monotonic(), 0
            try:
                stream = watch.Watch().stream(listing, timeout_seconds=30, resource_version=version)
                for event in stream:
                    got += 1
                    if event["type"] == "ERROR":  # a version too old (the client may say so)
                        self.restarts.append(f"{namespace}/{kind}: {event['raw_object']}")
                        version = None
                        break
                    obj = event["object"]
                    obj = obj if isinstance(obj, dict) else api.sanitize_for_serialization(obj)
                    try:
                        self._saw(namespace, kind, event["type"], obj)
                    except Exception as error:  # a bug of the driver's: said, not hidden
                        self.restarts.append(f"{namespace}/{kind}: {error!r}")
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    if self.stop.is_set():
                        break
                if not got and time.monotonic() - began < 1.0:  # ended at once: start over
                    self.restarts.append(f"{namespace}/{kind}: a watch ended at once")
                    version = None
            except client.ApiException as error:
                if error.status == 404:  # Kueue's Workloads are not served: nothing to watch
                    return
                if error.status == 410:  # too old: list again (what happened between is lost)
                    self.restarts.append(f"{namespace}/{kind}: 410")
                    version = None
                time.sleep(0.2)
            except Exception as error:  # the watch broke: resume it where it stopped
                self.restarts.append(f"{namespace}/{kind}: {type(error).__name__}")
                time.sleep(0.2)

    def _list(self, namespace: str, kind: str, listing: Callable[..., Any], api: Any) -> Any:
        """List ``kind`` as it is now (each object seen as ADDED); its resourceVersion, or
        ``None`` when the list failed (``""`` when the kind is not served)."""
        from kubernetes import client

        try:
            page = listing()
        except client.ApiException as error:
            return "" if error.status == 404 else None
        except Exception:
            return None
        page = page if isinstance(page, dict) else api.sanitize_for_serialization(page)
        for obj in page.get("items") or []:
            self._saw(namespace, kind, "ADDED", obj)
        return (page.get("metadata") or {}).get("resourceVersion")

    def _saw(self, namespace: str, kind: str, type_: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        if kind == "events":
            involved = obj.get("involvedObject") or {}
            if "CreationFailed" in str(obj.get("reason") or ""):
                self._mark(namespace, str(involved.get("name")), "creation_failed")
            if involved.get("kind") == "Job" and obj.get("reason") == "FailedCreate":
                # The Job controller's first word that the API server refuses a pod of the run:
                # Jobs are <run>-<replicated job>-<index> (rjobs: no dashes).
                run = "-".join(str(involved.get("name")).split("-")[:-2])
                self._mark(namespace, run, "pods_refused")
            if involved.get("kind") == "Pod" and obj.get("type") == "Warning":
                # The kubelet's first word that a pod of the run cannot start (or crashed):
                # pods are <run>-<replicated job>-<job>-<index>-<suffix> (rjobs: no dashes).
                run = "-".join(str(involved.get("name")).split("-")[:-4])
                self._mark(namespace, run, "cannot_start")
            return
        if kind == "jobs":
            self._job(namespace, meta, obj.get("status") or {})
            return
        if kind == "workloads":
            self._workload(namespace, obj)
            return
        name = str(meta.get("name"))
        if type_ == "DELETED":
            self._mark(namespace, name, "deleting")
        if kind == "jobsets":
            self._status(namespace, name, obj.get("status") or {}, meta)
        else:
            status = json.loads((obj.get("data") or {}).get("status.json") or "{}")
            self._status(namespace, name, status, meta)

    def _workload(self, namespace: str, obj: dict[str, Any]) -> None:
        """Kueue's first word that it will not run the JobSet: a request above the
        ClusterQueue's maximum, or a Workload to deactivate."""
        owners = (obj.get("metadata") or {}).get("ownerReferences") or []
        run = next((o.get("name") for o in owners if o.get("kind") == "JobSet"), None)
        conditions = {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}
        reserved = conditions.get("QuotaReserved") or {}
        never = reserved.get("status") == "False" and "maximum capacity" in str(
            reserved.get("message")
        )
        target = (conditions.get("DeactivationTarget") or {}).get("status") == "True"
        inactive = (obj.get("spec") or {}).get("active") is False
        if run and (never or target or inactive):
            self._mark(namespace, str(run), "refused")
        stats = (obj.get("status") or {}).get("schedulingStats") or {}
        evicted = conditions.get("Evicted") or {}
        preempted = any(e.get("reason") == "Preempted" for e in stats.get("evictions") or [])
        if run and (preempted or evicted.get("reason") == "Preempted"):
            self._mark(namespace, str(run), "preempted")

    def _job(self, namespace: str, meta: dict[str, Any], status: dict[str, Any]) -> None:
        run = (meta.get("labels") or {}).get(labels.JOBSET_NAME)
        uid = meta.get("uid")
        ended = any(
            c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        if not (run and uid and ended):
            return
        with self.lock:
            if uid not in self.jobs_seen:  # its first word that it ended
                self.jobs_seen.add(uid)
                self.finished.setdefault((namespace, run), []).append(time.time())

    def close(self) -> None:
        self.stop.set()


# ---------------------------------------------------------------------------------- the check


@dataclass(frozen=True)
class Disagreement:
    """One way that does not agree with the table (or with the other ways)."""

    scenario: str
    backend: str
    way: str
    why: str


def decisive_moment(
    scenario: Scenario, result: WayResult, acted: dict[str, float], moments: Moments | None
) -> float | None:
    """When the state that decides the verdict came about for this way's run, or when the way
    started to watch if that was later (a deferred task's trigger starts after the triggerer
    picks it up: that hop is Airflow's).

    The cluster's moments come from the driver's own watch; a timeout counts from the way's
    submission (each way sets its deadline just before it submits), a deletion from the
    driver's DELETE, a native run's refused creation from its submission (its first pass
    meets the refusal), a native run's end or restart from the end of the child Job it
    reacted to (the waiter is the run's controller: the anchor's moment is its own write)."""
    if scenario.admission:
        moment = None if result.submitted_at is None else result.submitted_at + scenario.admission
    elif scenario.timeout:
        moment = None if result.submitted_at is None else result.submitted_at + scenario.timeout
    elif scenario.action == "delete":
        moment = acted.get(result.name)
    elif scenario.kind == "creation_failed" and result.backend == "native":
        moment = result.submitted_at
    elif moments is None or result.namespace is None:
        return None
    else:
        retried = result.way in AIRFLOW_WAYS and scenario.first is not None
        what = {"creation_failed": "creation_failed", "refused": "refused"}.get(
            scenario.kind, "restarted" if retried else "terminal"
        )
        if scenario.cannot_start:  # the JobSet never ends: from the kubelet's first Warning
            what = "cannot_start"
        if scenario.pods_refused:  # no pod at all: from the Job controller's first refusal
            what = "pods_refused"
        moment = moments.first(result.namespace, result.name, what)
        if (
            moment is not None
            and result.backend == "native"
            and what
            not in (
                "cannot_start",
                "pods_refused",
            )
        ):
            moment = moments.last_job_end(result.namespace, result.name, moment) or moment
    if moment is None:
        return None
    return max(moment, result.watching_at or moment)


def tolerance(load: float, cores: int) -> float:
    """:data:`WITHIN`, stretched by the factor the run queue exceeds the cores (pure).

    The suite is there to catch a way that lags by design (a poll interval, an event missed
    until a resync or a deadline: 10 s and more), not the time slicing of an overloaded
    machine, which delays every process of a way by about that factor: on 2 cores at load 10
    the ways of one scenario were measured up to 3.5 s apart, on a quiet machine within 1.2 s."""
    return WITHIN * max(1.0, load / max(cores, 1))


def check(
    scenario: Scenario,
    results: list[WayResult],
    acted: dict[str, float],
    moments: Moments | None,
    within: float = WITHIN,
) -> list[Disagreement]:
    """The ways of one scenario on one backend, against the table and each other (pure)."""
    found: list[Disagreement] = []
    latencies: dict[str, dict[str, float]] = {}
    for result in results:
        where = (scenario.id, result.backend, result.way)
        if result.final != scenario.kind:
            said = result.messages[-1:] or [result.error]
            why = f"verdicts {result.kinds} ({said[0][:300]!r}), expected {scenario.kind}"
            found.append(Disagreement(*where, why))
            continue
        if scenario.reason not in result.messages[-1]:
            why = f"message {result.messages[-1]!r} does not say {scenario.reason!r}"
            found.append(Disagreement(*where, why))
        if (
            scenario.action == "preempt"
            and moments is not None
            and result.namespace is not None
            and moments.first(result.namespace, result.name, "preempted") is None
        ):  # the scenario is about a preemption: a run that ended first proves nothing
            found.append(Disagreement(*where, "its JobSet was never preempted"))
        retried = result.way in AIRFLOW_WAYS and scenario.first is not None
        if retried and result.kinds[0] != scenario.first:
            why = f"first try ended {result.kinds[0]}, expected {scenario.first}"
            found.append(Disagreement(*where, why))
        start = decisive_moment(scenario, result, acted, moments)
        if start is None:
            found.append(Disagreement(*where, "no decisive moment recorded"))
            continue
        took = result.verdict_at[-1] - start
        if scenario.pods_refused and took > REFUSED_WITHIN:
            why = f"{took:.1f}s from the first refusal to the verdict (at most {REFUSED_WITHIN:g}s)"
            found.append(Disagreement(*where, why))
        # The operator ways are timed on their first try's verdict when a restart ends it
        # (the retry hop is the scheduler's), the others on their final one.
        group = "retried" if retried else "waited"
        latencies.setdefault(group, {})[result.way] = (
            result.verdict_at[0 if retried else -1] - start
        )
    for by_way in latencies.values():
        if len(by_way) > 1 and max(by_way.values()) - min(by_way.values()) > within:
            middle = sorted(by_way.values())[len(by_way) // 2]
            slow = max(by_way, key=lambda way: abs(by_way[way] - middle))  # the odd one out
            shown = {w: round(v, 2) for w, v in sorted(by_way.items())}
            why = f"times to verdict {shown} are more than {within:.1f}s apart"
            found.append(Disagreement(scenario.id, results[0].backend, slow, why))
    return found


def table(
    scenario: Scenario, results: list[WayResult], acted: dict[str, float], moments: Moments | None
) -> str:
    """One line per way, for the test's output."""
    lines = []
    for r in results:
        start = decisive_moment(scenario, r, acted, moments)
        took = [round(t - start, 2) for t in r.verdict_at] if start is not None else []
        lines.append(f"  {scenario.id:13} {r.backend:10} {r.way:10} {r.kinds} after {took}s")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- the driver


def _submit_for_sensor(kubeconfig: Path) -> Callable[..., Any]:
    """Submit a JobSet (controller) or a native run (anchor + first pass) for the sensor."""

    def submit(doc: dict[str, Any], backend: str, namespace: str, *, queue: bool = False) -> None:
        from jobset_core.blocking import run
        from jobset_core.models import load_jobset

        async def work(r: Any) -> None:
            from jobset_core.lifecycle import RunRequest

            await r.start(
                RunRequest(
                    jobset=load_jobset(doc),
                    namespace=namespace,
                    backend=backend,
                    queue=LOCAL_QUEUE if queue else None,
                )
            )

        run(lambda: _with_run(kubeconfig, work))

    return submit


async def _with_run(kubeconfig: Path, work: Callable[[Any], Any]) -> Any:
    from jobset_core.lifecycle import ClientSettings, session

    async with session(ClientSettings(kubeconfig_path=str(kubeconfig))) as lifecycle:
        return await work(lifecycle)


def _act(kubeconfig: Path, scenario: Scenario, namespace: str, backend: str) -> dict[str, float]:
    """Resume (or delete) every JobSet of the scenario on ``backend``; when each was done."""
    from jobset_core.blocking import run

    async def work(r: Any) -> dict[str, float]:
        done: dict[str, float] = {}
        for found in await r.runs.find(
            namespace=namespace, label_selector={"parity": scenario.id}, backend=backend
        ):
            if scenario.action == "resume":
                await r.runs.set_suspend(found.handle, False)
            else:
                await r.cancel(found.handle)
            done[found.handle.name] = time.time()
        return done

    if scenario.action in ("unblock", "preempt"):
        return _act_on_queue(kubeconfig, scenario, namespace)
    if scenario.enforce:  # the policy changes after the submit: the pods meet it at the resume
        from kubernetes import client, config

        core = client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
        core.patch_namespace(namespace, {"metadata": {"labels": scenario.enforce}})
    return run(lambda: _with_run(kubeconfig, work))


def _act_on_queue(kubeconfig: Path, scenario: Scenario, namespace: str) -> dict[str, float]:
    """``unblock``: delete the blocker (every way's JobSet is admitted then); ``preempt``: the
    same, then, once every way's JobSet runs, a high-priority JobSet that needs the whole
    quota (every way's is preempted, requeued, and admitted again once it is done)."""
    from kubernetes import client, config

    api = client.CustomObjectsApi(config.new_client_from_config(config_file=str(kubeconfig)))
    group = ("jobset.x-k8s.io", "v1alpha2", namespace, "jobsets")
    api.delete_namespaced_custom_object(*group, "blocker")
    if scenario.action == "unblock":
        return {}
    ends = time.monotonic() + WATCHING_TIMEOUT
    while time.monotonic() < ends:  # every way's JobSet admitted (Kueue unsuspended it)
        found = api.list_namespaced_custom_object(*group, label_selector=f"parity={scenario.id}")
        ways = found["items"]
        if len(ways) >= len(WAYS) and not any(j["spec"].get("suspend") for j in ways):
            break
        time.sleep(0.2)
    api.create_namespaced_custom_object(
        *group[:3], group[3], held("preemptor", scenario.queue or "4", 3, HIGH)
    )
    return {}


@dataclass
class Wave:
    """The ways of some scenarios, started together."""

    scenarios: list[Scenario]
    namespaces: dict[str, str]
    results: dict[tuple[str, str, str], WayResult] = field(default_factory=dict)
    threads: list[threading.Thread] = field(default_factory=list)
    acted: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    moments: Moments | None = None


def start_wave(
    wave: Wave, ctx: AirflowProcesses | None, kubeconfig: Path, tmp: Path, ways: tuple[str, ...]
) -> None:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    submit = _submit_for_sensor(kubeconfig)
    for n, scenario in enumerate(wave.scenarios):
        if n:  # the ways are compared within a scenario: start the scenarios a little apart,
            # not all ~40 ways in one burst that the load average (it lags) does not show yet
            time.sleep(SCENARIO_GAP)
        namespace = wave.namespaces[scenario.id]
        if ctx is not None and "deferrable" in ways:
            ctx.unpause(f"parity_{scenario.id}")
            ctx.trigger(f"parity_{scenario.id}", "parity")
        for backend in scenario.backends:
            for way in ways:
                result = WayResult(way, backend, namespace)
                wave.results[(scenario.id, backend, way)] = result
                args = (scenario, backend, namespace, result)
                target: Callable[[], None] | None = {
                    "worker": lambda a=args: run_worker(*a),
                    "sensor": lambda a=args: run_sensor(*a, submit),
                    "cli": lambda a=args: run_cli(*a, tmp, kubeconfig=kubeconfig),
                    "kfp": lambda a=args: run_kfp(*a, tmp=tmp, env=env),
                }.get(way)
                if target is not None:
                    thread = threading.Thread(target=_guarded(target, result), daemon=True)
                    thread.start()
                    wave.threads.append(thread)


def _guarded(target: Callable[[], None], result: WayResult) -> Callable[[], None]:
    def run() -> None:
        try:
            target()
        except BaseException as error:  # reported by the check
            result.error = f"{type(error).__name__}: {error}"

    return run


def watching(wave: Wave, ctx: AirflowProcesses | None, scenario: Scenario, backend: str) -> bool:
    for way in WAYS:
        result = wave.results.get((scenario.id, backend, way))
        if result is None:
            continue
        if way == "deferrable" and ctx is not None:
            read_deferrable(ctx, scenario, backend, result, wave.namespaces.get(scenario.id))
        if result.watching_at is None and not result.kinds and not result.error:
            return False
    return True


def drive_wave(wave: Wave, ctx: AirflowProcesses | None, kubeconfig: Path) -> None:
    """Act on each scenario once all its ways watch; wait until every way has its verdict."""
    pending = [(s, b) for s in wave.scenarios if s.action for b in s.backends]
    deadline = time.monotonic() + WATCHING_TIMEOUT
    while pending:
        late = time.monotonic() > deadline  # act anyway: the check reports who never watched
        for scenario, backend in list(pending):
            if late or watching(wave, ctx, scenario, backend):
                time.sleep(scenario.hold)
                namespace = wave.namespaces[scenario.id]
                wave.acted[(scenario.id, backend)] = _act(kubeconfig, scenario, namespace, backend)
                pending.remove((scenario, backend))
        time.sleep(0.5)
    for thread in wave.threads:
        thread.join(max(1.0, deadline + 300 - time.monotonic()))
    if ctx is not None:
        ends = time.monotonic() + 300
        for scenario in wave.scenarios:
            ctx.wait_run(f"parity_{scenario.id}", "parity", max(ends - time.monotonic(), 0))
            for backend in scenario.backends:
                result = wave.results.get((scenario.id, backend, "deferrable"))
                if result is not None:
                    namespace = wave.namespaces.get(scenario.id)
                    read_deferrable(ctx, scenario, backend, result, namespace)


def disagreements(wave: Wave) -> tuple[list[Disagreement], str]:
    found: list[Disagreement] = []
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    within = tolerance(load, cores)
    shown = [f"times to verdict may differ by {within:.1f}s (load {load:.1f} on {cores} cores)"]
    for scenario in wave.scenarios:
        for backend in scenario.backends:
            results = [
                r for (s, b, _), r in wave.results.items() if s == scenario.id and b == backend
            ]
            acted = wave.acted.get((scenario.id, backend), {})
            found += check(scenario, results, acted, wave.moments, within)
            shown.append(table(scenario, results, acted, wave.moments))
    if wave.moments is not None and wave.moments.restarts:
        shown.append(f"the driver's watches broke: {wave.moments.restarts}")
    return found, "\n".join(shown)


@pytest.fixture(scope="module", autouse=True)
def runtime_refusals() -> Iterator[None]:
    """The ways are compared on what the cluster does after the submit (quotas that refuse
    the Jobs or the Service once the run exists): the server checks, which refuse such runs
    before anything exists, are off in every way here (the processes started below inherit
    it). tests/core/test_server_checks.py and tests/airflow/test_server_checks_ways.py prove
    the checks in every way."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JOBSET_SERVER_CHECKS", "0")
        yield


@pytest.fixture(scope="module")
def parity_airflow(
    devcluster: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """Namespaces (with their quotas) and a real Airflow whose DAGs hold the deferrable way of
    every scenario, for both backends."""
    from kubernetes import client

    namespaces = {s.id: devcluster.create_namespace(f"par-{s.id[:6]}") for s in SCENARIOS}
    for scenario in SCENARIOS:
        if scenario.quota:
            quota = client.V1ResourceQuota(
                metadata=client.V1ObjectMeta(name="parity"),
                spec=client.V1ResourceQuotaSpec(hard=scenario.quota),
            )
            devcluster.core.create_namespaced_resource_quota(namespaces[scenario.id], quota)
    namespaces[ERROR_MID_WAIT.id] = devcluster.create_namespace("par-errwait")
    kubeconfig = str(devcluster.kubeconfig)
    conn = json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": kubeconfig}})
    tmp = tmp_path_factory.mktemp("parity")
    with FaultProxy(devcluster.state_dir) as proxy:
        proxied = proxied_kubeconfig(devcluster, proxy, tmp)
        through = {"conn_type": "kubernetes", "extra": {"kube_config_path": str(proxied)}}
        dags = {f"parity_{s.id}": deferrable_dag(s, namespaces[s.id]) for s in SCENARIOS}
        dags[f"parity_{ERROR_MID_WAIT.id}"] = error_dag(namespaces[ERROR_MID_WAIT.id])
        extra = {
            "AIRFLOW_CONN_KUBERNETES_DEFAULT": conn,
            "AIRFLOW_CONN_KUBERNETES_PROXIED": json.dumps(through),
            "KUBECONFIG": kubeconfig,
        }
        try:
            with airflow_processes(dags, parallelism=8, extra_env=extra) as ctx:
                ctx.wait_parsed(*dags)
                yield {
                    "ctx": ctx,
                    "namespaces": namespaces,
                    "tmp": tmp,
                    "proxy": proxy,
                    "proxied": proxied,
                }
        finally:
            for namespace in namespaces.values():
                devcluster.delete_namespace(namespace)


PLAIN = tuple(s for s in SCENARIOS if s.queue is None and s not in REFUSED_SCENARIOS)
#: Four scenarios at a time (two cost a fixed hop through Airflow's scheduler per wave twice as
#: often: 7 waves took 327 s of a cold CI run); the tolerance stretches with the load.
WAVES = tuple(PLAIN[i : i + 4] for i in range(0, len(PLAIN), 4))
QUEUE_WAVES = (QUEUE_SCENARIOS,)  # one wave: each has its own namespace and ClusterQueue
REFUSED_WAVES = (REFUSED_SCENARIOS,)


@pytest.fixture(scope="module")
def parity_queues(parity_airflow: dict[str, Any], devcluster: Any) -> Iterator[None]:
    """A ClusterQueue of its own (4 CPUs, preemption by priority) and a LocalQueue in each
    queue scenario's namespace, and the blockers that hold the quota before the ways start."""
    with contextlib.ExitStack() as stack:
        for scenario in QUEUE_SCENARIOS:
            namespace = parity_airflow["namespaces"][scenario.id]
            stack.enter_context(own_queue(devcluster.custom, namespace, scenario.queue or "4"))
            if scenario.blocker:  # high priority: no way's JobSet may preempt it
                devcluster.create_jobset(namespace, held("blocker", scenario.blocker, None, HIGH))
                devcluster.wait_for(
                    lambda n=namespace: (
                        not devcluster.get_jobset(n, "blocker")["spec"].get("suspend")
                    ),
                    60,
                    desc=f"the blocker admitted in {namespace}",
                )
        yield


def _agree(
    waves: tuple[tuple[Scenario, ...], ...], parity_airflow: dict[str, Any], devcluster: Any
) -> list[Disagreement]:
    found: list[Disagreement] = []
    namespaces = parity_airflow["namespaces"]
    moments = Moments(devcluster.kubeconfig, list(namespaces.values()))
    try:
        for scenarios in waves:
            wave = Wave(list(scenarios), namespaces, moments=moments)
            ctx = parity_airflow["ctx"]
            start_wave(wave, ctx, devcluster.kubeconfig, parity_airflow["tmp"], WAYS)
            drive_wave(wave, ctx, devcluster.kubeconfig)
            wrong, shown = disagreements(wave)
            print(shown, file=sys.__stdout__, flush=True)  # Airflow's logging takes sys.stdout
            found += wrong
    finally:
        moments.close()
    return found


def test_every_way_in_reaches_the_same_verdict_at_the_same_time(
    parity_airflow: dict[str, Any], devcluster: Any, kube_conn: str
) -> None:
    found = _agree(WAVES, parity_airflow, devcluster)
    assert not found, "\n".join(f"{d.scenario}/{d.backend}/{d.way}: {d.why}" for d in found)


@pytest.mark.kueue
def test_every_way_in_agrees_on_queued_runs(
    parity_airflow: dict[str, Any], parity_queues: None, devcluster: Any, kube_conn: str
) -> None:
    """Through Kueue: queued longer than ``timeout`` then completed, an admission timeout, a
    request that never fits, a preemption then readmission, a deactivated Workload."""
    found = _agree(QUEUE_WAVES, parity_airflow, devcluster)
    assert not found, "\n".join(f"{d.scenario}/{d.backend}/{d.way}: {d.why}" for d in found)


def test_every_way_in_fails_fast_when_the_cluster_refuses_the_pods(
    parity_airflow: dict[str, Any], devcluster: Any, kube_conn: str
) -> None:
    """Pod Security turned on after the submit, a quota that fits one pod: every way fails
    with ``PodsRefused``, the refusal's words and the Job, within 20 s of the first refusal."""
    found = _agree(REFUSED_WAVES, parity_airflow, devcluster)
    assert not found, "\n".join(f"{d.scenario}/{d.backend}/{d.way}: {d.why}" for d in found)


def test_a_broken_path_fails_the_parity(
    devcluster: Any, kube_conn: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The suite must notice one way gone wrong: here the sensor claims a JobSet done while it
    is still suspended."""
    from airflow_provider_jobset import sensors

    real = sensors.sensor_state
    monkeypatch.setattr(
        sensors,
        "sensor_state",
        lambda outcomes, targets: real(outcomes, [*targets, "Suspended", "Pending", "Running"]),
    )
    (success,) = [s for s in SCENARIOS if s.id == "success"]
    namespace = devcluster.create_namespace("par-broken")
    moments = Moments(devcluster.kubeconfig, [namespace])
    try:
        wave = Wave([success], {success.id: namespace}, moments=moments)
        ways = ("worker", "sensor", "cli", "kfp")
        start_wave(wave, None, devcluster.kubeconfig, tmp_path, ways)
        drive_wave(wave, None, devcluster.kubeconfig)
        found, shown = disagreements(wave)
    finally:
        moments.close()
        devcluster.delete_namespace(namespace)
    print(shown)
    assert {d.way for d in found} == {"sensor"}, found


# ---------------------------------------------------------------------------------- an error

#: A run that never ends; once every way waits for it, the API server (through the fault proxy)
#: stops serving lists and watches of JobSets and ConfigMaps: every wait fails with NotFound,
#: an error, not a verdict. With ``delete_policy="always"`` each way must delete its run
#: (everything it made goes with it) before the error ends it. The sensor owns no run and has
#: no delete policy: it takes no part.
ERROR_MID_WAIT = Scenario(
    "errorwait", (rjob("w", **NEVER),), action=None, kind="error", reason="NotFound"
)
ERROR_WAYS = ("worker", "deferrable", "kfp", "cli")
ERROR_TASK = """    JobSetOperator(task_id={task!r}, jobset={jobset!r}, name={name!r},
                   namespace={namespace!r}, backend={backend!r}, deferrable=True,
                   delete_policy="always", stream_logs=False, retries=0,
                   kubernetes_conn_id="kubernetes_proxied")
"""


def error_dag(namespace: str) -> str:
    tasks = "".join(
        ERROR_TASK.format(
            task=f"d_{backend}",
            jobset=document(ERROR_MID_WAIT, f"d-{short(backend)}"),
            name=f"d-{short(backend)}",
            namespace=namespace,
            backend=backend,
        )
        for backend in BACKENDS
    )
    return DEFERRABLE_DAG.format(dag_id=f"parity_{ERROR_MID_WAIT.id}", tasks=tasks)


def proxied_kubeconfig(devcluster: Any, proxy: FaultProxy, tmp: Path) -> Path:
    """A kubeconfig through the fault proxy (it ends TLS: a token, minted at every call)."""
    return proxy.admin_kubeconfig(tmp / "proxied.kubeconfig", user="parity-errors", ttl=3600)


def _error_way(way: str, backend: str, namespace: str, tmp: Path, proxied: Path) -> str:
    """Run one way of the error scenario with ``delete_policy="always"``; what it said."""
    name = f"{way[0]}-{short(backend)}"
    if way == "worker":
        from airflow_provider_jobset.operators import JobSetOperator

        op = JobSetOperator(
            task_id="t",
            jobset=document(ERROR_MID_WAIT, name),
            name=name,
            namespace=namespace,
            backend=backend,
            deferrable=False,
            delete_policy="always",
            stream_logs=False,
            kubernetes_conn_id=None,
            config_file=str(proxied),
            retries=0,
        )
        try:
            op.execute({"ti": _TI("parity-errorwait", WayResult(way, backend))})
        except Exception as error:
            return f"{type(error).__name__}: {error}"
        return "no error"
    path = tmp / f"{name}-{ERROR_MID_WAIT.id}.yaml"
    path.write_text(yaml.safe_dump(document(ERROR_MID_WAIT, name)))
    if way == "cli":
        from jobset_core import cli

        out = io.StringIO()
        args = ["run", str(path), "-n", namespace, "--backend", backend]
        args += ["--kubeconfig", str(proxied), "--delete-policy", "always"]
        code = cli.main(args, stdout=out, stderr=out, stdin=io.StringIO())
        return f"exit {code}: {out.getvalue()}"
    command = [
        str(KFP_PYTHON), "-m", "kfp_components.launcher", "launch", "--jobset", str(path),
        "--namespace", namespace, "--backend", backend, "--delete-policy", "always",
        "--run-id", f"errorwait-{short(backend)}", "--task-name", "train", "--task-id", "1",
    ]  # fmt: skip
    env = {**os.environ, "KUBECONFIG": str(proxied)}
    done = subprocess.run(  # noqa: PLW1510 - the exit code is part of what it said
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=WATCHING_TIMEOUT
    )
    return f"exit {done.returncode}: {done.stdout}{done.stderr}"


def _left(devcluster: Any, namespace: str) -> list[str]:
    """What of any run still exists in ``namespace``."""
    from jobset_core.labels import ANCHOR_LABEL, ANCHOR_VALUE

    core, batch = devcluster.core, devcluster.batch
    jobsets = devcluster.custom.list_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", namespace, "jobsets"
    )["items"]
    anchors = core.list_namespaced_config_map(
        namespace, label_selector=f"{ANCHOR_LABEL}={ANCHOR_VALUE}"
    ).items
    return (
        [f"jobset/{j['metadata']['name']}" for j in jobsets]
        + [f"anchor/{a.metadata.name}" for a in anchors]
        + [f"job/{j.metadata.name}" for j in batch.list_namespaced_job(namespace).items]
        + [f"pod/{p.metadata.name}" for p in core.list_namespaced_pod(namespace).items]
        + [f"service/{v.metadata.name}" for v in core.list_namespaced_service(namespace).items]
    )


def test_an_error_mid_wait_with_delete_policy_always_leaves_nothing_behind_in_every_way(
    parity_airflow: dict[str, Any], devcluster: Any, kube_conn: str
) -> None:
    ctx, proxy, proxied = parity_airflow["ctx"], parity_airflow["proxy"], parity_airflow["proxied"]
    namespace = parity_airflow["namespaces"][ERROR_MID_WAIT.id]
    tmp = parity_airflow["tmp"]
    said: dict[tuple[str, str], str] = {}

    def run(way: str, backend: str) -> None:
        try:
            said[(way, backend)] = _error_way(way, backend, namespace, tmp, proxied)
        except BaseException as error:  # reported below
            said[(way, backend)] = f"harness: {type(error).__name__}: {error}"

    dag = f"parity_{ERROR_MID_WAIT.id}"
    ctx.unpause(dag)
    ctx.trigger(dag, "parity")
    threads = [
        threading.Thread(target=run, args=(way, backend), daemon=True)
        for way in ERROR_WAYS
        if way != "deferrable"
        for backend in BACKENDS
    ]
    for thread in threads:
        thread.start()
    runs = len(ERROR_WAYS) * len(BACKENDS)  # one run object per way and backend
    devcluster.wait_for(
        lambda: (
            len([x for x in _left(devcluster, namespace) if x.startswith(("jobset/", "anchor/"))])
            >= runs
        ),
        WATCHING_TIMEOUT,
        desc=f"every way's run created in {namespace}",
    )
    time.sleep(5)  # every way is waiting now (a JobSet that never ends)
    try:
        proxy.refuse_reads("jobsets", "configmaps")
        proxy.cut_watches("gone")  # the watches list again, and are refused
        for thread in threads:
            thread.join(WATCHING_TIMEOUT)
        state = ctx.wait_run(dag, "parity", WATCHING_TIMEOUT)
    finally:
        proxy.refuse_reads()
    assert state == "failed", f"the deferrable tasks' DAG run: {state!r}"
    for backend in BACKENDS:
        folder = ctx.task_logs(dag, "parity", f"d_{backend}")
        text = "".join(p.read_text(errors="replace") for p in folder.glob("attempt=*.log"))
        said[("deferrable", backend)] = text
    wrong = {
        key: words[-600:]
        for key, words in said.items()
        if "could not find the requested resource" not in words
    }
    assert not wrong, f"a way did not end with the error: {wrong}"
    devcluster.wait_for(
        lambda: not _left(devcluster, namespace), 90, desc=f"nothing left in {namespace}"
    )
    assert proxy.stats.refused > 0


@pytest.mark.parametrize(
    ("load", "cores", "within"),
    [(0.3, 2, 2.0), (2.0, 2, 2.0), (3.0, 2, 3.0), (10.0, 2, 10.0), (1.0, 0, 2.0)],
)
def test_the_tolerance_is_the_issues_two_seconds_until_the_machine_is_overloaded(
    load: float, cores: int, within: float
) -> None:
    assert tolerance(load, cores) == pytest.approx(within)
