"""The detection ways, as their users run them (``python -m benchmarks.ways <spec.json>``).

Processes as Airflow has them:

``workers``    worker mode, one process per way and backend (each task runs in a process of
               its own; the runs of overlapping rounds in threads of it):
               ``JobSetOperator.execute`` (it submits, waits, finishes) or
               ``JobSetSensor`` in ``poke`` mode (its poke waits up to ``poke_interval``).
``triggerer``  one event loop for every deferred task: ``JobSetOperator(deferrable=True)``'s
               trigger, ``JobSetSensor(deferrable=True)``'s, and the anchors
               ``KubernetesJobTrigger`` (a Job) and ``KubernetesPodTrigger`` (a pod), whose
               objects this process creates the way their operators would.

Every round, each way runs one run of its own on each backend (the anchors on theirs), all
ending in the same second (``devcluster/finish-at``). Each answer is reported with the object
whose status decided it (the JobSet on the controller backend, the child Job on native, the
Job or pod of an anchor), so the driver can time it from the status write that ended it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from benchmarks.fleet import build, status_of
from benchmarks.subject import Channel, freeze_start_up
from benchmarks.workloads import finish_at, job_body, jobset_body, pod_body

if TYPE_CHECKING:
    from jobset_core.backends import BackendChoice

__all__ = ["main"]

_verdicts: dict[str, float] = {}
_lock = threading.Lock()


class _TI:
    """A task instance as much as the operator reads of one (no task state store)."""

    dag_id = "bench"
    map_index = -1
    try_number = 1
    start_date = None

    def __init__(self, task_id: str, run_id: str) -> None:
        self.task_id = task_id
        self.run_id = run_id
        self.xcoms: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = value


def _time_verdicts() -> None:
    """Note when each wait of the core gives its verdict (before the operator's finish)."""
    from jobset_core.lifecycle import Lifecycle

    wait = Lifecycle.wait

    async def timed(self: Any, request: Any, handle: Any, **kwargs: Any) -> Any:
        verdict = await wait(self, request, handle, **kwargs)
        with _lock:
            _verdicts[f"{handle.namespace}/{handle.name}"] = time.time()
        return verdict

    Lifecycle.wait = timed  # type: ignore[method-assign]


def _decisive(backend: BackendChoice, namespace: str, name: str) -> dict[str, str]:
    if backend == "native":
        return {"resource": "jobs", "ns": namespace, "name": f"{name}-w-0"}
    return {"resource": "jobsets", "ns": namespace, "name": name}


def _submit(spec: dict[str, Any], body: dict[str, Any], backend: BackendChoice) -> str:
    """Create a run the way the core does (for the sensors, which watch existing runs)."""
    from jobset_core import load_jobset
    from jobset_core.lifecycle import ClientSettings, Lifecycle, RunRequest, blocking

    request = RunRequest(jobset=load_jobset(body), namespace=spec["namespace"], backend=backend)

    async def main(lifecycle: Lifecycle) -> str:
        return (await lifecycle.start(request)).handle.name

    return blocking(ClientSettings(kubeconfig_path=spec["kubeconfig"]), main)


def _body(spec: dict[str, Any], name: str, at: float) -> dict[str, Any]:
    return jobset_body(name, annotations=finish_at(at), run=spec["run"])


# ---------------------------------------------------------------------------------- workers


def _worker(
    spec: dict[str, Any], channel: Channel, backend: BackendChoice, r: int, at: float
) -> None:
    from airflow_provider_jobset.links import XCOM_NAME
    from airflow_provider_jobset.operators import JobSetOperator

    task_id = f"wk-{backend[0]}-{r}"
    op = JobSetOperator(
        task_id=task_id,
        jobset=_body(spec, task_id, at),
        namespace=spec["namespace"],
        backend=backend,
    )
    ti = _TI(task_id, f"{spec['run']}-{r}")
    op.execute({"ti": ti})
    returned = time.time()
    name = ti.xcoms[XCOM_NAME]
    key = f"{spec['namespace']}/{name}"
    with _lock:
        verdict_at = _verdicts.get(key, returned)
    channel.emit(
        "fired",
        way="worker",
        backend=backend,
        round=r,
        at=verdict_at,
        returned=returned,
        status="completed",
        **_decisive(backend, spec["namespace"], name),
    )


def _sensor_poke(
    spec: dict[str, Any], channel: Channel, backend: BackendChoice, r: int, at: float
) -> None:
    from airflow_provider_jobset.sensors import JobSetSensor

    name = _submit(spec, _body(spec, f"sp-{backend[0]}-{r}", at), backend)
    sensor = JobSetSensor(
        task_id=f"sp-{backend[0]}-{r}",
        name=name,
        namespace=spec["namespace"],
        backend=backend,
        mode="poke",
    )
    while not sensor.poke({}):
        pass
    channel.emit(
        "fired",
        way="sensor_poke",
        backend=backend,
        round=r,
        at=time.time(),
        status="completed",
        **_decisive(backend, spec["namespace"], name),
    )


def _guarded(channel: Channel, what: str, call: Callable[[], None]) -> None:
    try:
        call()
    except BaseException as error:  # reported, the other ways go on
        channel.emit("error", what=what, error=repr(error)[:500])


def _warm_config(spec: dict[str, Any]) -> None:
    """Load the kubeconfig once before the threads start: ``kubernetes_asyncio`` registers
    the temporary file of an embedded certificate before writing it, so threads loading the
    same kubeconfig at once can read a half-written file (each Airflow worker is a process of
    its own and never meets this)."""
    from jobset_core.blocking import run
    from jobset_core.client import ClientSettings
    from jobset_core.client.config import load_connection

    run(lambda: load_connection(ClientSettings(kubeconfig_path=spec["kubeconfig"])))


def workers(spec: dict[str, Any], channel: Channel) -> None:
    _time_verdicts()
    _warm_config(spec)
    ways = {"worker": _worker, "sensor_poke": _sensor_poke}
    threads: list[threading.Thread] = []
    for round_ in spec["rounds"]:
        time.sleep(max(0.0, round_["start"] - time.time()))
        for way in spec["ways"]:
            for backend in spec["backends"]:
                call = ways[way]
                thread = threading.Thread(
                    target=_guarded,
                    args=(
                        channel,
                        f"{way} {backend} {round_['r']}",
                        lambda c=call, b=backend, r=round_: c(spec, channel, b, r["r"], r["at"]),
                    ),
                    daemon=True,
                )
                thread.start()
                threads.append(thread)
    for thread in threads:
        thread.join(spec.get("join_timeout", 180))


# ---------------------------------------------------------------------------------- triggerer


async def _deferred(spec: dict[str, Any], make: Callable[[], Any]) -> Any:
    """Run a deferring ``execute`` in a thread (it is synchronous) and take its trigger."""
    try:
        from airflow.sdk.exceptions import TaskDeferred
    except ImportError:  # Airflow 3.0, 3.1
        from airflow.exceptions import TaskDeferred  # type: ignore[no-redef]

    try:
        await asyncio.to_thread(make)
    except TaskDeferred as deferred:
        return deferred.trigger
    raise RuntimeError("the task did not defer")


async def _one_deferred(
    spec: dict[str, Any], channel: Channel, way: str, backend: BackendChoice, r: int, at: float
) -> None:
    from airflow_provider_jobset.links import XCOM_NAME
    from airflow_provider_jobset.operators import JobSetOperator
    from airflow_provider_jobset.sensors import JobSetSensor

    namespace = spec["namespace"]
    if way == "deferrable":
        task_id = f"df-{backend[0]}-{r}"
        op = JobSetOperator(
            task_id=task_id,
            jobset=_body(spec, task_id, at),
            namespace=namespace,
            backend=backend,
            deferrable=True,
        )
        ti = _TI(task_id, f"{spec['run']}-{r}")
        trigger = await _deferred(spec, lambda: op.execute({"ti": ti}))
        name = ti.xcoms[XCOM_NAME]
    else:
        task_id = f"sd-{backend[0]}-{r}"
        name = await asyncio.to_thread(_submit, spec, _body(spec, task_id, at), backend)
        sensor = JobSetSensor(
            task_id=task_id, name=name, namespace=namespace, backend=backend, deferrable=True
        )
        trigger = await _deferred(spec, lambda: sensor.execute({}))
    events = trigger.run()
    event = await anext(events)
    channel.emit(
        "fired",
        way=way,
        backend=backend,
        round=r,
        at=time.time(),
        status=status_of(event.payload),
        **_decisive(backend, namespace, name),
    )
    async for _ in events:  # as the triggerer does: on to the trigger's end
        pass


async def _one_anchor(spec: dict[str, Any], channel: Channel, way: str, r: int, at: float) -> None:
    from kubernetes import client, config

    namespace = spec["namespace"]
    api = config.new_client_from_config(config_file=spec["kubeconfig"])
    try:
        if way == "kjt":
            name = f"kjt-{r}"
            body = job_body(name, annotations=finish_at(at), run=spec["run"])
            await asyncio.to_thread(client.BatchV1Api(api).create_namespaced_job, namespace, body)
            # As KubernetesJobOperator does: find the Job's pods, then defer.
            pods: list[Any] = []
            while not pods:
                found = await asyncio.to_thread(
                    client.CoreV1Api(api).list_namespaced_pod,
                    namespace,
                    label_selector=f"job-name={name}",
                )
                pods = found.items
                if not pods:
                    await asyncio.sleep(0.2)
            task = {"ns": namespace, "name": name, "job": name, "pod": pods[0].metadata.name}
            decisive = {"resource": "jobs", "ns": namespace, "name": name}
        else:
            name = f"kpt-{r}"
            body = pod_body(name, annotations=finish_at(at), run=spec["run"])
            await asyncio.to_thread(client.CoreV1Api(api).create_namespaced_pod, namespace, body)
            task = {"ns": namespace, "name": name, "pod": name, "extras": spec["extras"]}
            decisive = {"resource": "pods", "ns": namespace, "name": name}
    finally:
        api.close()
    event = await anext(build(way, task).run())
    channel.emit(
        "fired",
        way=way,
        backend="-",
        round=r,
        at=time.time(),
        status=status_of(event.payload),
        **decisive,
    )


async def triggerer(spec: dict[str, Any], channel: Channel) -> None:
    running: list[asyncio.Task[None]] = []

    async def guarded(what: str, coro: Any) -> None:
        try:
            await coro
        except Exception as error:
            channel.emit("error", what=what, error=repr(error)[:500])

    loop = asyncio.get_running_loop()
    for round_ in spec["rounds"]:
        await asyncio.sleep(max(0.0, round_["start"] - time.time()))
        r, at = round_["r"], round_["at"]
        for way in spec["ways"]:
            if way in ("kjt", "kpt"):
                coro = _one_anchor(spec, channel, way, r, at)
                running.append(loop.create_task(guarded(f"{way} {r}", coro)))
                continue
            for backend in spec["backends"]:
                coro = _one_deferred(spec, channel, way, backend, r, at)
                running.append(loop.create_task(guarded(f"{way} {backend} {r}", coro)))
    await asyncio.wait(running, timeout=spec.get("join_timeout", 180))


def _prepare(spec: dict[str, Any], channel: Channel) -> None:
    """Import everything first, say ready, then take the rounds' times from the driver's
    ``go`` (offsets from its ``t0``): every way starts warm, on the same clock."""
    import kubernetes  # noqa: F401
    from airflow.providers.cncf.kubernetes.triggers import job, pod  # noqa: F401

    import airflow_provider_jobset.operators
    import airflow_provider_jobset.sensors
    import airflow_provider_jobset.triggers  # noqa: F401
    import jobset_core.client._client  # noqa: F401

    freeze_start_up()
    channel.emit("ready")
    command = channel.blocking_commands()()
    t0 = float(command.get("t0", time.time()))
    for round_ in spec["rounds"]:
        round_["start"] = t0 + round_["start"]
        round_["at"] = t0 + round_["at"]


def main(spec: dict[str, Any]) -> None:
    channel = Channel()
    started = dt.datetime.now(dt.UTC)
    _prepare(spec, channel)
    if spec["mode"] == "workers":
        workers(spec, channel)
    else:
        asyncio.run(triggerer(spec, channel))
    channel.emit("bye", since=started.isoformat())


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as handle:
        main(json.load(handle))
