"""The driver's side of a subject process: start it, talk to it, sample it, stop it.

Each subject runs in a session of its own; :meth:`Subject.stop` asks it to end, then signals
its process group (by the pid it started) if it does not, so nothing outlives a benchmark.
While :class:`Sampler` runs, every subject's RSS, CPU time and established TCP connections to
the API server are read from ``/proc`` once a second, from outside the subject (its event
loop never pays for it).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from benchmarks.cluster import ROOT

__all__ = ["Sample", "Sampler", "Subject"]


class Subject:
    """A running subject process.

    Args:
        name: Its name (its files in ``work`` are named after it).
        module: The module it runs (``python -m <module> <spec file>``).
        spec: What it should do (written as JSON for it).
        env: Environment additions.
        work: The run's folder.
    """

    def __init__(
        self, name: str, module: str, spec: dict[str, Any], env: dict[str, str], work: Path
    ) -> None:
        self.name = name
        spec_file = work / f"{name}.json"
        spec_file.write_text(json.dumps(spec), encoding="utf-8")
        self.log_path = work / f"{name}.log"
        self._log: IO[bytes] = self.log_path.open("wb")
        environ = dict(os.environ, **env)
        environ.setdefault("AIRFLOW_HOME", str(work / "airflow-home"))
        environ["PYTHONUNBUFFERED"] = "1"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, str(spec_file)],
            cwd=ROOT,
            env=environ,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            start_new_session=True,
        )
        self.messages: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True, name=f"read {name}")
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                message = json.loads(raw)
            except ValueError:
                continue
            with self._cond:
                self.messages.append(message)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def send(self, **command: Any) -> None:
        """Send a command (ignored once the process is gone)."""
        if self.proc.stdin is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(BrokenPipeError, OSError):
            self.proc.stdin.write((json.dumps(command) + "\n").encode())
            self.proc.stdin.flush()

    def of(self, event: str) -> list[dict[str, Any]]:
        """The messages of one kind received so far."""
        with self._cond:
            return [m for m in self.messages if m.get("event") == event]

    def wait_for(
        self,
        event: str,
        timeout: float,
        *,
        count: int = 1,
        where: Callable[[dict[str, Any]], bool] = lambda _: True,
    ) -> list[dict[str, Any]]:
        """Wait until ``count`` messages of kind ``event`` (matching ``where``) arrived;
        ``RuntimeError`` if the process ends first or the time runs out."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [m for m in self.messages if m.get("event") == event and where(m)]
                if len(found) >= count:
                    return found
                if self.proc.poll() is not None and not self._reader.is_alive():
                    raise RuntimeError(f"{self.name} ended ({self.proc.returncode}): {self.tail()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(
                        f"{self.name}: {len(found)}/{count} '{event}' after {timeout:.0f}s: "
                        f"{self.tail()}"
                    )
                self._cond.wait(min(left, 1.0))

    def ask(self, command: str, reply: str, timeout: float = 60.0) -> dict[str, Any]:
        """Send a command and wait for its reply (the next message of kind ``reply``)."""
        before = len(self.of(reply))
        self.send(cmd=command)
        return self.wait_for(reply, timeout, count=before + 1)[-1]

    def tail(self, size: int = 2000) -> str:
        """The end of its log."""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-size:]
        except OSError:
            return ""

    def stop(self, timeout: float = 60.0) -> dict[str, Any] | None:
        """Ask it to stop; signal its process group if it does not. Its last message."""
        self.send(cmd="stop")
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self._reader.join(5)
        self._log.close()
        bye = self.of("bye")
        return bye[-1] if bye else None

    def kill(self) -> None:
        """End its process group now (TERM, then KILL)."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(5)
                break
            except subprocess.TimeoutExpired:
                continue
        # Children of its own (none expected) would be in its group: make sure they are gone.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)


@dataclass
class Sample:
    """One look at a subject process from outside.

    Attributes:
        t: When (epoch seconds).
        rss: Resident memory (bytes).
        cpu: User + system CPU seconds so far.
        connections: Established TCP connections to the API server.
    """

    t: float
    rss: int
    cpu: float
    connections: int


@dataclass
class Sampler:
    """Samples subjects once a second in a thread (see the module docs)."""

    port: int
    subjects: list[Subject] = field(default_factory=list)
    samples: dict[str, list[Sample]] = field(default_factory=dict)
    interval: float = 1.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def add(self, subjects: Iterable[Subject]) -> None:
        for subject in subjects:
            self.subjects.append(subject)
            self.samples.setdefault(subject.name, [])

    def look(self, subject: Subject) -> Sample | None:
        """One sample of a subject now (``None`` once it is gone)."""
        import psutil

        try:
            process = psutil.Process(subject.pid)
            with process.oneshot():
                rss = process.memory_info().rss
                times = process.cpu_times()
                sockets = process.net_connections(kind="tcp")
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return None
        connections = sum(
            1
            for c in sockets
            if c.raddr and c.raddr.port == self.port and c.status == psutil.CONN_ESTABLISHED
        )
        return Sample(time.time(), rss, times.user + times.system, connections)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            for subject in list(self.subjects):
                found = self.look(subject)
                if found is not None:
                    self.samples[subject.name].append(found)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, daemon=True, name="sampler")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def between(self, name: str, start: float, end: float) -> list[Sample]:
        """The samples of a subject taken in ``[start, end]``."""
        return [s for s in self.samples.get(name, []) if start <= s.t <= end]
