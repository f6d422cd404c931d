"""The inside of a subject process: how it talks to the driver and what it counts itself.

A subject (a fleet of triggers, the floor's raw watches, the detection ways) runs as a
process of its own, started by :class:`benchmarks.proc.Subject`: its RSS, CPU and TCP
connections are its own, sampled from outside. It speaks JSON lines on the file descriptor
that was its stdout (its own stdout is moved to stderr, so log lines never mix in) and reads
commands (``{"cmd": "sample"}``, ``{"cmd": "stop"}``) from stdin.

What only the process itself can see, it counts here, the same way for ours and the anchors:

* event-loop lag: a ticker that asks to wake every 20 ms records how late it woke;
* TCP connections opened to the API server (every ``loop.create_connection``);
* HTTP requests sent through aiohttp (ours and the anchors' clients both use it), by method,
  watches apart: the client-side count, a cross-check of the API server's audit log and the
  count used on a cluster whose audit log cannot be read.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, TextIO

from benchmarks.stats import summary

__all__ = ["Channel", "Counters", "LoopLag", "freeze_start_up", "instrument"]

TICK = 0.02


def freeze_start_up() -> None:
    """Leave what the subject holds once it has imported everything (modules, classes) out
    of the interpreter's later full collections, as the Airflow processes that run the
    subjects' code do: the LocalExecutor freezes its heap before it forks the workers, the
    DAG processor after its start, and a triggerer's first shared lease of ours after it
    imports the client (:func:`jobset_core.observe._shared._import_client`). Unfrozen, a
    subject with Airflow loaded (236,000 objects) pauses 0.17 s for each full collection,
    at moments no production process would; every subject, ours, the anchors' and the
    floor's, freezes at the same point: ready, before its first measured moment."""
    gc.collect()
    gc.freeze()


class Channel:
    """The subject's line to the driver (create it first thing: it moves stdout aside)."""

    def __init__(self) -> None:
        self._out: TextIO = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        self._lock = threading.Lock()

    def emit(self, event: str, **data: Any) -> None:
        """Send one message."""
        line = json.dumps({"event": event, "t": time.time(), **data}, default=str)
        with self._lock:
            self._out.write(line + "\n")
            self._out.flush()

    def commands(self, loop: asyncio.AbstractEventLoop) -> asyncio.Queue[dict[str, Any]]:
        """A queue of the driver's commands (a thread reads stdin; EOF is a ``stop``)."""
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

        def read() -> None:
            for line in sys.stdin:
                if line.strip():
                    loop.call_soon_threadsafe(queue.put_nowait, json.loads(line))
            loop.call_soon_threadsafe(queue.put_nowait, {"cmd": "stop"})

        threading.Thread(target=read, daemon=True, name="commands").start()
        return queue

    def blocking_commands(self) -> Callable[[], dict[str, Any]]:
        """The next command, blocking (for a subject without an event loop)."""

        def next_command() -> dict[str, Any]:
            line = sys.stdin.readline()
            return json.loads(line) if line.strip() else {"cmd": "stop"}

        return next_command


class Counters:
    """What the process sent (see the module docs)."""

    def __init__(self) -> None:
        self.connections = 0
        self.requests: Counter[str] = Counter()

    def snapshot(self) -> dict[str, Any]:
        """A plain copy."""
        return {
            "connections_opened": self.connections,
            "requests": dict(self.requests),
            "requests_total": sum(self.requests.values()),
        }


def instrument(port: int) -> Counters:
    """Count connections to ``port`` and aiohttp requests in this process (see the docs)."""
    import asyncio.base_events as base

    import aiohttp

    counters = Counters()
    connect = base.BaseEventLoop.create_connection

    async def create_connection(self: Any, *args: Any, **kwargs: Any) -> Any:
        transport, protocol = await connect(self, *args, **kwargs)
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2 and peer[1] == port:
            counters.connections += 1
        return transport, protocol

    base.BaseEventLoop.create_connection = create_connection  # type: ignore[method-assign]
    request = aiohttp.ClientSession._request

    async def counted(
        self: Any, method: str, str_or_url: Any, *args: Any, **kwargs: Any
    ) -> aiohttp.ClientResponse:
        text = str(str_or_url).lower() + str(kwargs.get("params") or "").lower()
        counters.requests["watch" if "watch=true" in text else method.upper()] += 1
        return await request(self, method, str_or_url, *args, **kwargs)

    aiohttp.ClientSession._request = counted  # type: ignore[method-assign]
    return counters


class LoopLag:
    """How late the event loop wakes a 20 ms ticker (a blocked loop delays every trigger)."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start ticking on the running loop."""
        self._task = asyncio.get_running_loop().create_task(self._tick())

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(TICK)
            self.samples.append(max(0.0, loop.time() - before - TICK))

    def take(self) -> dict[str, Any]:
        """The lag since the last take (milliseconds), and restart counting."""
        samples, self.samples = self.samples, []
        found = summary([s * 1000 for s in samples])
        return {**found, "n": len(samples)}

    def stop(self) -> None:
        """Stop ticking."""
        if self._task is not None:
            self._task.cancel()
