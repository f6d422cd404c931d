"""A fleet of deferred tasks: N triggers of one kind on one event loop, as a triggerer runs
them (``python -m benchmarks.fleet <spec.json>``).

Kinds, each built with the arguments its operator defers with (their defaults otherwise):

``ours``    ``JobSetTrigger`` as ``JobSetOperator(deferrable=True)`` defers.
``sensor``  ``JobSetTrigger`` as ``JobSetSensor(deferrable=True)`` defers (target phase
            ``Completed``, through restarts, nothing deleted on kill).
``kjt``     ``KubernetesJobTrigger`` as ``KubernetesJobOperator(deferrable=True)`` defers:
            ``job_poll_interval`` 10 s, ``get_logs``.
``kpt``     ``KubernetesPodTrigger`` as ``KubernetesPodOperator(deferrable=True)`` defers:
            ``poll_interval`` 2 s, startup checks every 5 s with the events watch.

Each task is ``{"ns", "name", "uid", "job", "pod"}`` (the JobSet, its child Job and pod: the
anchors wait for the Job or the pod of the same run), and ``queue`` for a JobSet queued in a
Kueue LocalQueue (the operator's ``queue``). The fleet reports ``ready`` once every trigger
runs (ours: once the shared observer tracks every run, every informer that can watch has a
watch open and every trigger has judged its run once, which its first log line says; the
anchors: once every trigger has sent its first request), ``fired`` for each trigger that
fires, ``said`` for each line a trigger logs (when the spec asks for ``said``: its text and
when it was logged), and answers ``sample`` with its loop lag and counters. ``watch_window``
shortens the shared observer's watch window (the one knob ``Observer`` takes; see
``docs/benchmarks.md``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from benchmarks.subject import Channel, Counters, LoopLag, freeze_start_up, instrument

if TYPE_CHECKING:
    from jobset_core.client import Client
    from jobset_core.observe import Scope

__all__ = ["Said", "build", "stopped"]

SENSOR_TIMEOUT = 7 * 24 * 3600.0  # BaseSensorOperator's default timeout
#: How often the fleet looks whether every trigger runs (seconds): the start-up figures'
#: resolution, the same for every kind.
READY_POLL = 0.1


def _handle(task: dict[str, Any]) -> Any:
    from jobset_core.lifecycle import Handle

    backend = task.get("backend", "controller")
    return Handle(task["name"], task["ns"], task.get("uid", ""), backend)


def build(kind: str, task: dict[str, Any]) -> Any:
    """The trigger a task of ``kind`` defers to."""
    from jobset_core.lifecycle import Deadline, RunRequest
    from jobset_core.outcome import Phase

    if kind == "ours":
        from airflow_provider_jobset.triggers import JobSetTrigger

        request = RunRequest(  # its deadline begun, as the operator's start begins it
            namespace=task["ns"],
            deadline=Deadline().begin(time.time()),
            on_restart="return",
            cancel_on_kill=True,
            queue=task.get("queue"),
        )
        return JobSetTrigger(handle=_handle(task), request=request, restarts=0)
    if kind == "sensor":
        from airflow_provider_jobset.triggers import JobSetTrigger

        return JobSetTrigger(
            handle=_handle(task),
            request=RunRequest(
                namespace=task["ns"],
                deadline=Deadline(timeout=SENSOR_TIMEOUT).begin(time.time()),
                until=frozenset({Phase.COMPLETED}),
                cancel_on_kill=False,
            ),
        )
    if kind == "kjt":
        from airflow.providers.cncf.kubernetes.triggers.job import KubernetesJobTrigger

        return KubernetesJobTrigger(
            job_name=task["job"],
            job_namespace=task["ns"],
            pod_names=[task["pod"]],
            pod_namespace=task["ns"],
            base_container_name="base",
            kubernetes_conn_id="kubernetes_default",
            poll_interval=10,
            get_logs=True,
            do_xcom_push=False,
        )
    if kind == "kpt":
        from airflow.providers.cncf.kubernetes.triggers.pod import KubernetesPodTrigger

        return KubernetesPodTrigger(
            pod_name=task["pod"],
            pod_namespace=task["ns"],
            trigger_start_time=dt.datetime.now(dt.UTC),
            base_container_name="base",
            kubernetes_conn_id="kubernetes_default",
            connection_extras=task.get("extras"),
            poll_interval=2,
            get_logs=True,
            startup_timeout=120,
            startup_check_interval=5,
            schedule_timeout=120,
            on_finish_action="delete_pod",
            on_kill_action="delete_pod",
        )
    raise ValueError(f"unknown kind {kind!r}")


class Said:
    """A trigger's logger, passed through, that also hands each line it logs at ``info`` to
    ``heard`` the moment it is logged (the task log's line, as the triggerer would ship it).

    Args:
        real: The trigger's own logger.
        heard: Called with each line's text.
    """

    def __init__(self, real: Any, heard: Callable[[str], None]) -> None:
        self._real = real
        self._heard = heard

    def info(self, event: Any, *args: Any, **kwargs: Any) -> Any:
        self._heard(str(event) % args if args else str(event))
        return self._real.info(event, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def stopped(observer: Any) -> dict[str, int]:
    """The observer's informers that stopped for good (a failure retrying cannot fix), by
    kind (read from its informers: the stats only count them)."""
    found: dict[str, int] = {}
    for informer in list(observer._informers.values()):
        if informer.problem is not None:
            kind = informer.source.kind.value
            found[kind] = found.get(kind, 0) + 1
    return found


def status_of(payload: Any) -> str:
    """What a fired event says, in a word."""
    if isinstance(payload, dict):
        return str(payload.get("kind") or payload.get("status") or "?")
    return "?"


def prepare(kind: str, watch_window: int | None) -> Callable[[], dict[str, Any]]:
    """Import what the kind needs (before the baseline RSS) and return its stats reader."""
    if kind in ("ours", "sensor"):
        import jobset_core.client._client  # noqa: F401  (the first lease imports it anyway)
        import jobset_core.observe._shared as shared
        from airflow_provider_jobset.triggers import JobSetTrigger  # noqa: F401
        from jobset_core.observe import Observer, shared_stats

        built: list[Observer] = []

        def recorded(client: Client, *, scope: Scope = "run") -> Observer:
            """An observer as ``shared_observer`` builds one (with the bench's window, if
            any), kept here to read which of its informers stopped for good."""
            if watch_window:
                found = Observer(client, scope=scope, window=watch_window)
            else:
                found = Observer(client, scope=scope)
            built.append(found)
            return found

        # Deliberate patch: shared_observer() builds its observer by calling this name.
        shared.Observer = recorded  # type: ignore[attr-defined,assignment]

        def stats() -> dict[str, Any]:
            found = list(shared_stats().values())
            if not found:
                return {}
            return {**found[0], "stopped": stopped(built[-1]) if built else {}}

        return stats
    if kind == "kjt":
        from airflow.providers.cncf.kubernetes.triggers.job import KubernetesJobTrigger  # noqa: F401
    else:
        from airflow.providers.cncf.kubernetes.triggers.pod import KubernetesPodTrigger  # noqa: F401
    return dict


async def run(spec: dict[str, Any], channel: Channel, counters: Counters) -> None:
    kind = spec["kind"]
    tasks: list[dict[str, Any]] = spec["tasks"]
    stats = prepare(kind, spec.get("watch_window"))
    freeze_start_up()
    lag = LoopLag()
    lag.start()
    commands = channel.commands(asyncio.get_running_loop())
    channel.emit("baseline")
    while True:  # the driver reads the baseline RSS, then says go
        command = (await commands.get()).get("cmd")
        if command == "go":
            break
        if command == "stop":
            channel.emit("bye", errors=[], observer={}, **counters.snapshot())
            return

    looked: set[str] = set()  # ours: the tasks whose trigger has judged its run once

    async def one(task: dict[str, Any]) -> None:
        trigger = build(kind, task)
        key = f"{task['ns']}/{task['name']}"
        if kind in ("ours", "sensor"):

            def heard(text: str) -> None:
                looked.add(key)  # a trigger's first line is its first judgement's
                if spec.get("said"):
                    channel.emit("said", key=key, at=time.time(), line=text)

            trigger._log = Said(trigger.log, heard)
        event = await anext(trigger.run())
        at = time.time()
        channel.emit(
            "fired", key=f"{task['ns']}/{task['name']}", at=at, status=status_of(event.payload)
        )

    started = time.time()
    running = [asyncio.ensure_future(one(t)) for t in tasks]
    ready_deadline = time.monotonic() + spec.get("ready_timeout", 300)
    timed_out = True
    while time.monotonic() < ready_deadline:
        await asyncio.sleep(READY_POLL)
        found = stats()
        if kind in ("ours", "sensor"):
            kept = (found.get("kept") or {}).get("runs", 0)
            # Informers that stopped for good (a 403 or 404: Kueue's Workloads for an identity
            # that may not read them, or on a cluster without Kueue) never open a watch.
            stopped_ = sum((found.get("stopped") or {}).values())
            informers = sum((found.get("informers") or {}).values()) - stopped_
            open_ = (found.get("client") or {}).get("watches_open", 0)
            if (
                kept >= len(tasks)
                and informers > 0
                and open_ >= informers
                and len(looked) >= len(tasks)
            ):
                timed_out = False
                break
        elif sum(counters.requests.values()) >= len(tasks):
            timed_out = False
            break
    channel.emit(
        "ready",
        took=time.time() - started,
        timed_out=timed_out,
        observer=stats(),
        **counters.snapshot(),
    )
    lag.take()
    while True:
        command = await commands.get()
        if command.get("cmd") == "sample":
            channel.emit(
                "sample",
                lag=lag.take(),
                observer=stats(),
                fired=sum(1 for r in running if r.done()),
                **counters.snapshot(),
            )
        elif command.get("cmd") == "stop":
            break
    for task in running:
        task.cancel()
    results = await asyncio.gather(*running, return_exceptions=True)
    errors = [
        repr(r)
        for r in results
        if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError)
    ]
    lag.stop()
    channel.emit("bye", errors=errors[:5], observer=stats(), **counters.snapshot())


def main(spec: dict[str, Any]) -> None:
    channel = Channel()
    counters = instrument(spec["port"])
    asyncio.run(run(spec, channel, counters))


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as handle:
        main(json.load(handle))
