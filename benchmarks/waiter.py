"""One run, waited for by one process the way a worker (or ``jobsetctl run``) waits
(``python -m benchmarks.waiter <spec.json>``): the core's ``Run`` over an observer of the
run's own scope.

``mode``: ``execute`` submits the JobSet ``body`` on ``backend`` and waits (``Run.execute``),
``wait`` waits for the existing JobSet ``name``. ``lean`` leaves the pod and Event informers
out (the observer's kinds, patched in this process only): what the run costs without them.
Reports ``submitting`` (before the create), ``fired`` (the verdict), answers ``sample`` with
the observer's stats; ``stop`` cancels the wait (``Run.execute`` then deletes the run).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from benchmarks.subject import Channel, freeze_start_up, instrument

__all__ = ["main"]


def _lean() -> None:
    from jobset_core.observe import _observer
    from jobset_core.observe._views import Kind

    _observer._NEEDS = {
        "controller": (Kind.JOBSET, Kind.JOB),
        "native": (Kind.ANCHOR, Kind.JOB),
    }


async def run(spec: dict[str, Any], channel: Channel) -> None:
    import jobset_core.client._client  # noqa: F401  (before the baseline: a one-off cost)
    from jobset_core import load_jobset
    from jobset_core.client import Client, ClientSettings
    from jobset_core.lifecycle import Handle, Lifecycle, RunRequest
    from jobset_core.observe import Observer

    if spec.get("lean"):
        _lean()
    freeze_start_up()  # before the baseline: the collection it makes frees the imports' garbage
    commands = channel.commands(asyncio.get_running_loop())
    channel.emit("baseline")
    while (await commands.get()).get("cmd") not in ("go", "stop"):
        pass
    async with Client(ClientSettings(kubeconfig_path=spec["kubeconfig"])) as client:
        observer = Observer(client, scope="run")
        lifecycle = Lifecycle(observer)

        async def work() -> None:
            if spec["mode"] == "execute":
                channel.emit("submitting")
                request = RunRequest(
                    jobset=load_jobset(spec["body"]),
                    namespace=spec["namespace"],
                    backend=spec["backend"],
                )
                verdict = (await lifecycle.execute(request)).verdict
            else:
                handle = Handle(
                    spec["name"], spec["namespace"], spec.get("uid", ""), spec["backend"]
                )
                request = RunRequest(namespace=handle.namespace, backend=handle.backend)
                verdict = await lifecycle.wait(request, handle)
            channel.emit("fired", at=time.time(), kind=verdict.kind, message=verdict.message)

        task = asyncio.ensure_future(work())
        channel.emit("ready")
        while True:
            command = await commands.get()
            if command.get("cmd") == "sample":
                channel.emit("sample", observer=observer.stats(), done=task.done())
            elif command.get("cmd") == "stop":
                break
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        except Exception as error:
            channel.emit("error", error=repr(error)[:500])
        stats = observer.stats()
        await observer.aclose()
    channel.emit("bye", observer=stats)


def main(spec: dict[str, Any]) -> None:
    channel = Channel()
    instrument(spec["port"])
    asyncio.run(run(spec, channel))


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as handle:
        main(json.load(handle))
