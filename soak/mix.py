"""What a soak runs, as pure data: the mix of tasks, their JobSets, and when each fault strikes.

Nothing here performs I/O: :func:`plan` turns a seed and a size into the tasks and the fault
schedule, so a seed names one run exactly (:mod:`soak.run` carries it out).

Adding a kind of task is one row of :data:`BEHAVIOURS` (the mode and backend rows of
:data:`MIX` are built from it as for the others).

Queued tasks (:attr:`Behaviour.queued`) run through Kueue: their JobSets carry the soak's
LocalQueue (the operator's ``queue``) and a low priority, and their pods request CPUs; the
soak's ClusterQueue holds half of them at once (:attr:`Plan.queue_slots`), so the others wait
for quota. The fault ``preempt`` is a high-priority JobSet (:func:`preempter_jobset`, no task
of the DAG) that needs the quota of one running queued JobSet: Kueue evicts that one, whose
task waits for its readmission. The ClusterQueue is held until the fault clock starts, so the
queue's timeline is the faults': the preemption takes the first fault moment, and every
queued JobSet runs at least :data:`PREEMPT_MARGIN` seconds past it (all the quota is still
held by queued tasks when it strikes).
"""

from __future__ import annotations

import dataclasses
import json
import random
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "BEHAVIOURS",
    "FAULTS",
    "HIGH_PRIORITY",
    "JOBSET_CPU",
    "LOCAL_QUEUE",
    "LOW_PRIORITY",
    "MIX",
    "PREEMPTER",
    "PREEMPT_MARGIN",
    "SMALL_FAULTS",
    "Behaviour",
    "Fault",
    "Plan",
    "Task",
    "dag_source",
    "plan",
    "preempter_jobset",
]

Mode = Literal["worker", "deferred"]
BackendName = Literal["controller", "native"]

#: The LocalQueue of the soak's namespace (``tests/cluster/queues.py``, ``own_queue``).
LOCAL_QUEUE = "devcluster-queue"
#: Kueue's WorkloadPriorityClasses of the devcluster: the queued tasks', the preempter's.
LOW_PRIORITY, HIGH_PRIORITY = "devcluster-low", "devcluster-high"
#: CPUs each pod of a queued JobSet requests (Kueue counts requests, not node capacity).
POD_CPU = 1
#: ...and a whole queued JobSet (its two pods): one slot of the soak's ClusterQueue.
JOBSET_CPU = 2 * POD_CPU


@dataclass(frozen=True)
class Behaviour:
    """What a JobSet does, and the task state it deserves for it.

    Attributes:
        name: Short name (the table's row).
        deserved: The Airflow state its task must end in.
        annotations: The fake pods' behaviour (see tests/cluster/README.md).
        max_restarts: The JobSet's ``failurePolicy.maxRestarts``.
        length: How long one attempt runs, as a fraction of the task's share of the window.
        start_grace: The operator's ``start_grace`` (seconds), when not its default.
        queued: Run through the soak's Kueue LocalQueue (low priority, pods requesting
            :data:`POD_CPU` CPUs each): controller backend only.
        backends: The backends it runs with (a row of :data:`MIX` for each).
    """

    name: str
    deserved: Literal["success", "failed"]
    annotations: dict[str, str] = field(default_factory=dict)
    max_restarts: int = 0
    length: float = 1.0
    start_grace: float | None = None
    queued: bool = False
    backends: tuple[BackendName, ...] = ("controller", "native")


#: The behaviours of the mix (each with each mode and each backend).
BEHAVIOURS: tuple[Behaviour, ...] = (
    Behaviour("success", "success"),
    # The first attempt fails, the JobSet restarts; the task's try ends with the restart, the
    # next try reattaches to the same JobSet and sees it complete.
    Behaviour(
        "restart-then-success",
        "success",
        {"devcluster/fail-until-attempt": "1"},
        max_restarts=1,
        length=0.5,
    ),
    Behaviour("terminal-failure", "failed", {"devcluster/exit-code": "3"}, length=0.6),
    # The image cannot be pulled: the run fails with PodsCannotStart once the grace is over,
    # on the first try (never retried), whatever the faults do meanwhile.
    Behaviour(
        "cannot-start",
        "failed",
        {"devcluster/cannot-start": "ErrImagePull"},
        length=0.3,
        start_grace=5.0,
    ),
    # Through the soak's LocalQueue: half of them wait for quota while the others run (two
    # waves, hence half the length), one running is preempted and readmitted; the task waits
    # through it all (on_preemption="wait"), its JobSet never restarts.
    Behaviour("queued", "success", length=0.5, queued=True, backends=("controller",)),
)

#: Every kind of task: (mode, backend, behaviour).
MIX: tuple[tuple[Mode, BackendName, Behaviour], ...] = tuple(
    (mode, backend, behaviour)
    for behaviour in BEHAVIOURS
    for mode in ("worker", "deferred")
    for backend in behaviour.backends
)

FaultName = Literal[
    "apiserver-restart",
    "triggerer-kill",
    "worker-kill",
    "jobset-controller-restart",
    "watch-cut-410",
    "throttle-429",
    "preempt",
]

#: How many times each fault strikes in a full soak (``preempt``: once, whatever its length).
FAULTS: dict[FaultName, int] = {
    "apiserver-restart": 3,
    "triggerer-kill": 2,
    "worker-kill": 2,
    "jobset-controller-restart": 1,
    "watch-cut-410": 3,
    "throttle-429": 1,
    "preempt": 1,
}
#: ...and in the small one of ``make test``.
SMALL_FAULTS: dict[FaultName, int] = dict.fromkeys(FAULTS, 1)


@dataclass(frozen=True)
class Task:
    """One task of the soak DAG.

    Attributes:
        task_id: Its id (``t00``...).
        mode: Worker mode or deferrable.
        backend: ``controller`` or ``native``.
        behaviour: What its JobSet does.
        run_seconds: How long each attempt's pods run.
    """

    task_id: str
    mode: Mode
    backend: BackendName
    behaviour: Behaviour
    run_seconds: float

    @property
    def kind(self) -> str:
        """Its row in the summary."""
        return f"{self.mode}/{self.backend}/{self.behaviour.name}"

    def jobset(self, result: str) -> dict[str, Any]:
        """Its JobSet: two replicated jobs of one pod each, the result in the first pod's
        termination message, the log of the first pod followed (a queued one's pods request
        :data:`POD_CPU` CPUs each; the operator adds its queue's labels)."""
        annotations = {
            "devcluster/run-seconds": f"{self.run_seconds:.1f}",
            "devcluster/log": f"soak task {self.task_id} working",
            "devcluster/termination-message": result,
            **self.behaviour.annotations,
        }
        return _jobset(
            f"soak-{self.task_id}",
            annotations,
            max_restarts=self.behaviour.max_restarts,
            cpu=POD_CPU if self.behaviour.queued else None,
        )

    def options(self) -> dict[str, Any]:
        """The operator's arguments beyond the common ones (the DAG spec's ``options``)."""
        found: dict[str, Any] = {}
        if self.behaviour.start_grace is not None:
            found["start_grace"] = self.behaviour.start_grace
        if self.behaviour.queued:
            found.update(queue=LOCAL_QUEUE, priority_class=LOW_PRIORITY)
        return found


def _jobset(
    name: str,
    annotations: dict[str, str],
    *,
    max_restarts: int = 0,
    cpu: int | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Two replicated jobs (``lead``, ``rest``) of one fake pod each."""
    container: dict[str, Any] = {"name": "c", "image": "busybox"}
    if cpu is not None:
        container["resources"] = {"requests": {"cpu": str(cpu)}}
    pod = {
        "metadata": {"annotations": annotations},
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }
    job = {"backoffLimit": 0, "completions": 1, "parallelism": 1, "template": pod}
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = labels
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": metadata,
        "spec": {
            "failurePolicy": {"maxRestarts": max_restarts},
            "replicatedJobs": [
                {"name": rjob, "replicas": 1, "template": {"spec": job}}
                for rjob in ("lead", "rest")
            ],
        },
    }


#: The label that marks the preempter (the watcher and the summary tell it from the tasks).
PREEMPTER = "soak/preempter"
#: Seconds the preempter's pods run.
PREEMPTER_SECONDS = 5.0
#: Seconds every queued JobSet still runs after the preemption's moment, at least.
PREEMPT_MARGIN = 10.0


def preempter_jobset() -> dict[str, Any]:
    """The fault ``preempt``: a high-priority JobSet in the soak's LocalQueue (no task of the
    DAG) that needs one queued JobSet's quota, so that Kueue evicts a running one; the JobSet
    controller deletes it soon after it completed (``ttlSecondsAfterFinished``)."""
    body = _jobset(
        "soak-preempter",
        {"devcluster/run-seconds": f"{PREEMPTER_SECONDS:.1f}"},
        cpu=POD_CPU,
        labels={
            "kueue.x-k8s.io/queue-name": LOCAL_QUEUE,
            "kueue.x-k8s.io/priority-class": HIGH_PRIORITY,
            PREEMPTER: "true",
        },
    )
    body["spec"]["ttlSecondsAfterFinished"] = 5
    return body


@dataclass(frozen=True)
class Fault:
    """One fault at one moment (seconds after the tasks were started)."""

    at: float
    name: FaultName


@dataclass(frozen=True)
class Plan:
    """A whole soak: its tasks, its faults, and the window they fall in.

    Attributes:
        queue_slots: How many queued JobSets the soak's ClusterQueue holds at once (its CPU
            quota is :attr:`queue_cpu`): half of the queued tasks, rounded up, so that the
            others wait for quota (0: no queued task).
    """

    seed: int
    window: float
    tasks: tuple[Task, ...]
    faults: tuple[Fault, ...]
    queue_slots: int = 0

    @property
    def queued(self) -> tuple[Task, ...]:
        """The tasks that run through the queue."""
        return tuple(t for t in self.tasks if t.behaviour.queued)

    @property
    def queue_cpu(self) -> int:
        """The soak ClusterQueue's CPU quota."""
        return self.queue_slots * JOBSET_CPU

    @property
    def preemptions(self) -> int:
        """How many preemptions the plan makes."""
        return sum(1 for f in self.faults if f.name == "preempt")

    def as_dict(self) -> dict[str, Any]:
        """Plain data for the results file."""
        return {
            "seed": self.seed,
            "window_seconds": self.window,
            "tasks": [
                {"task_id": t.task_id, "kind": t.kind, "run_seconds": t.run_seconds}
                for t in self.tasks
            ],
            "faults": [{"at": round(f.at, 1), "name": f.name} for f in self.faults],
            "queue": {"slots": self.queue_slots, "cpu": self.queue_cpu},
        }


#: Faults are this many seconds apart at least (a restarted API server needs a few).
FAULT_SPACING = 8.0


def plan(
    seed: int, *, tasks: int, window: float, faults: dict[FaultName, int] | None = None
) -> Plan:
    """The soak of ``seed``: ``tasks`` tasks over every kind of :data:`MIX` (each kind as
    often as the others, give or take one), pods running for a seeded share of ``window``
    seconds, and each fault of ``faults`` (:data:`FAULTS` by default) at a seeded moment
    inside the runs (between 15 % and 75 % of the window, :data:`FAULT_SPACING` apart).

    The queued tasks share a ClusterQueue of half their quota (:attr:`Plan.queue_slots`).
    The preemption (at most one) takes the first fault moment, and each queued JobSet runs at
    least :data:`PREEMPT_MARGIN` seconds past it: its ClusterQueue, held until the moment 0,
    is still full of the first queued JobSets then.
    """
    if tasks < 1:
        raise ValueError("a soak needs at least one task")
    rand = random.Random(seed)
    kinds = [MIX[i % len(MIX)] for i in range(tasks)]
    rand.shuffle(kinds)
    chosen = []
    for index, (mode, backend, behaviour) in enumerate(kinds):
        share = rand.uniform(0.45, 0.85) * window * behaviour.length
        chosen.append(Task(f"t{index:02d}", mode, backend, behaviour, round(share, 1)))
    names = [name for name, count in (faults or FAULTS).items() for _ in range(count)]
    moments = _spaced(rand, len(names), 0.15 * window, 0.75 * window, FAULT_SPACING)
    rand.shuffle(names)
    queued = sum(1 for t in chosen if t.behaviour.queued)
    if names.count("preempt") > 1:
        raise ValueError("one preemption per soak: the queue's timeline holds one")
    if "preempt" in names:
        if not queued:
            raise ValueError(
                f"a preemption needs queued tasks: {len(MIX)} tasks at least hold every kind"
            )
        first = names.index("preempt")
        names[0], names[first] = names[first], names[0]
        floor = moments[0] + PREEMPT_MARGIN
        chosen = [
            dataclasses.replace(t, run_seconds=max(t.run_seconds, round(floor, 1)))
            if t.behaviour.queued
            else t
            for t in chosen
        ]
    schedule = tuple(Fault(at, name) for at, name in zip(moments, names, strict=True))
    return Plan(seed, window, tuple(chosen), schedule, queue_slots=(queued + 1) // 2)


def _spaced(rand: random.Random, count: int, low: float, high: float, gap: float) -> list[float]:
    """``count`` sorted moments in ``[low, high]``, ``gap`` apart (a uniform draw of the free
    room, then the gaps added back)."""
    room = (high - low) - gap * max(0, count - 1)
    if room < 0:
        raise ValueError(f"{count} faults {gap:.0f}s apart do not fit in {high - low:.0f}s")
    draws = sorted(rand.uniform(0, room) for _ in range(count))
    return [round(low + d + i * gap, 1) for i, d in enumerate(draws)]


def dag_source(plan_: Plan, *, dag_id: str, namespace: str, timeout: float) -> str:
    """The soak DAG: one JobSetOperator per task, every one in one DAG run."""
    specs = [
        {
            "task_id": t.task_id,
            "deferrable": t.mode == "deferred",
            "backend": t.backend,
            "jobset": t.jobset(result=f'{{"task": "{t.task_id}"}}'),
            "options": t.options(),
        }
        for t in plan_.tasks
    ]
    return _DAG.format(
        dag_id=dag_id, namespace=namespace, timeout=int(timeout), specs=json.dumps(specs)
    )


_DAG = '''
"""The soak DAG (generated by soak/mix.py)."""
import json
from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_provider_jobset.operators import JobSetOperator

SPECS = json.loads({specs!r})

with DAG("{dag_id}", schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         max_active_tasks=len(SPECS),
         default_args={{"retries": 4, "retry_delay": timedelta(seconds=2)}}):
    for spec in SPECS:
        JobSetOperator(
            task_id=spec["task_id"],
            jobset=spec["jobset"],
            namespace="{namespace}",
            backend=spec["backend"],
            deferrable=spec["deferrable"],
            delete_policy="always",
            timeout=timedelta(seconds={timeout}),
            log_replicated_job="lead",
            **spec["options"],
        )
'''
