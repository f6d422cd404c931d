"""Run a ``JobSetOperator`` try in this process, outside a scheduler, with a minimal task
instance (no task state store: identity-label reattach, the Airflow < 3.3 path). Prints one
JSON line per XCom pushed and a final JSON line with the outcome. Used by the cluster tests
as a subprocess that can be SIGKILLed mid-wait.

Usage: ``python _run_op.py '<json spec>'`` with keys namespace, backend, deferrable, run_id,
annotations, mode (``run`` or ``kill``: call the kill path once the JobSet exists).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import threading
import time
from typing import Any


def emit(record: dict[str, Any]) -> None:
    """One record for the test, as a line of its own: a single write (no other thread's log
    line can come between its parts), opened with a newline in case a log line is half
    written (the test reads the lines that start with ``{``)."""
    sys.stdout.write("\n" + json.dumps(record) + "\n")
    sys.stdout.flush()


class _TI:
    dag_id = "reattach_dag"
    task_id = "train"
    map_index = -1
    try_number = 1
    start_date = None

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.xcoms: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = value
        emit({"xcom": key, "value": value})


def _jobset(annotations: dict[str, str]) -> dict[str, Any]:
    pod = {
        "metadata": {"annotations": annotations},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
    }
    job = {"backoffLimit": 0, "completions": 1, "parallelism": 1, "template": pod}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "train"},
        "spec": {"replicatedJobs": [{"name": "w", "replicas": 2, "template": {"spec": job}}]},
    }


#: The message a triggerer cancels a user-killed task's trigger with (its own is a constant
#: of Airflow's; what matters is that on_kill() is called only for it).
USER_ACTION = "user action"


async def first_event(trigger: Any) -> Any:
    """The trigger's first event, as a triggerer runs it: on to the trigger's end after it."""
    events = trigger.run()
    event = await anext(events)
    async for _ in events:
        raise AssertionError("a JobSet trigger fires one event")
    return event


async def _as_the_triggerer_runs(trigger: Any) -> Any:
    """The trigger's event, as a triggerer (Airflow 3.3+) runs it: cancelled for a user's
    action, ``on_kill()`` is awaited (bounded) and a cancellation of it swallowed."""
    try:
        return await first_event(trigger)
    except asyncio.CancelledError as cancel:
        if cancel.args == (USER_ACTION,):
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(trigger.on_kill(), 30)
        raise


async def _trigger_then_kill(trigger: Any) -> str:
    """Kill the deferred task as a triggerer does: its trigger is cancelled, and cancelled
    again at every state sync until it has ended (here at every turn of the loop: a busy
    triggerer's on_kill() can take longer than a sync)."""
    run = asyncio.ensure_future(_as_the_triggerer_runs(trigger))
    await asyncio.sleep(2)
    cancels = 0
    while not run.done():
        run.cancel(USER_ACTION)
        cancels += 1
        await asyncio.sleep(0)
    assert run.cancelled()
    # A triggerer's loop runs on: what on_kill() left running (a deletion) may finish.
    others = asyncio.all_tasks() - {asyncio.current_task()}
    if others:
        await asyncio.wait(others, timeout=30)
    return f"trigger cancelled {cancels} times"


def main(spec: dict[str, Any]) -> None:
    try:  # Airflow 3.2+
        from airflow.sdk.exceptions import TaskDeferred
    except ImportError:  # 3.0, 3.1
        from airflow.exceptions import TaskDeferred

    from airflow_provider_jobset.operators import JobSetOperator

    op = JobSetOperator(
        task_id="train",
        jobset=_jobset(spec["annotations"]),
        namespace=spec["namespace"],
        backend=spec["backend"],
        deferrable=spec["deferrable"],
        delete_policy="never",
    )
    ti = _TI(spec["run_id"])
    context = {"ti": ti}
    kill = spec.get("mode") == "kill"
    killing: threading.Thread | None = None
    if kill and not spec["deferrable"]:

        def killer() -> None:
            while "jobset_uid" not in ti.xcoms:
                time.sleep(0.2)
            time.sleep(2)
            op.on_kill()
            emit({"killed": True})

        killing = threading.Thread(target=killer, daemon=True)
        killing.start()
    try:
        result = op.execute(context)
    except TaskDeferred as deferred:
        if kill:
            said = asyncio.run(_trigger_then_kill(deferred.trigger))
            emit({"killed": True, "said": said})
            return
        event = asyncio.run(first_event(deferred.trigger))
        result = op.execute_complete(context, event.payload)
    except Exception as err:
        emit({"error": type(err).__name__, "message": str(err)})
        return
    finally:
        if killing is not None:  # the wait may see the deletion before on_kill() returns
            killing.join(60)
    emit({"result": result})


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
