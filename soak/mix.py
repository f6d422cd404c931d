"""What a soak runs, as pure data: the mix of tasks, their JobSets, and when each fault strikes.

Nothing here performs I/O: :func:`plan` turns a seed and a size into the tasks and the fault
schedule, so a seed names one run exactly (:mod:`soak.run` carries it out).

Adding a kind of task is one row of :data:`MIX` (e.g. the pods-that-cannot-start kinds, once
their verdicts exist: ``Kind("cannot-start", "failed", {"devcluster/cannot-start":
"ErrImagePull"})``, with the mode and backend rows built from it as the others are).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "BEHAVIOURS",
    "FAULTS",
    "MIX",
    "SMALL_FAULTS",
    "Behaviour",
    "Fault",
    "Plan",
    "Task",
    "dag_source",
    "plan",
]

Mode = Literal["worker", "deferred"]
BackendName = Literal["controller", "native"]


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
    """

    name: str
    deserved: Literal["success", "failed"]
    annotations: dict[str, str] = field(default_factory=dict)
    max_restarts: int = 0
    length: float = 1.0
    start_grace: float | None = None


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
)

#: Every kind of task: (mode, backend, behaviour).
MIX: tuple[tuple[Mode, BackendName, Behaviour], ...] = tuple(
    (mode, backend, behaviour)
    for behaviour in BEHAVIOURS
    for mode in ("worker", "deferred")
    for backend in ("controller", "native")
)

FaultName = Literal[
    "apiserver-restart",
    "triggerer-kill",
    "worker-kill",
    "jobset-controller-restart",
    "watch-cut-410",
    "throttle-429",
]

#: How many times each fault strikes in a full soak.
FAULTS: dict[FaultName, int] = {
    "apiserver-restart": 3,
    "triggerer-kill": 2,
    "worker-kill": 2,
    "jobset-controller-restart": 1,
    "watch-cut-410": 3,
    "throttle-429": 1,
}
#: ...and in the small one of ``make test``.
SMALL_FAULTS: dict[FaultName, int] = dict.fromkeys(FAULTS, 1)  # type: ignore[arg-type]


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
        termination message, the log of the first pod followed."""
        annotations = {
            "devcluster/run-seconds": f"{self.run_seconds:.1f}",
            "devcluster/log": f"soak task {self.task_id} working",
            "devcluster/termination-message": result,
            **self.behaviour.annotations,
        }
        pod = {
            "metadata": {"annotations": annotations},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
        }
        job = {"backoffLimit": 0, "completions": 1, "parallelism": 1, "template": pod}
        return {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": f"soak-{self.task_id}"},
            "spec": {
                "failurePolicy": {"maxRestarts": self.behaviour.max_restarts},
                "replicatedJobs": [
                    {"name": name, "replicas": 1, "template": {"spec": job}}
                    for name in ("lead", "rest")
                ],
            },
        }


@dataclass(frozen=True)
class Fault:
    """One fault at one moment (seconds after the tasks were started)."""

    at: float
    name: FaultName


@dataclass(frozen=True)
class Plan:
    """A whole soak: its tasks, its faults, and the window they fall in."""

    seed: int
    window: float
    tasks: tuple[Task, ...]
    faults: tuple[Fault, ...]

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
    schedule = tuple(Fault(at, name) for at, name in zip(moments, names, strict=True))
    return Plan(seed, window, tuple(chosen), schedule)


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
            "options": (
                {"start_grace": t.behaviour.start_grace}
                if t.behaviour.start_grace is not None
                else {}
            ),
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
