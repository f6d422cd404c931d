"""Real Airflow processes for end-to-end tests: API server, DAG processor, scheduler and
triggerer (LocalExecutor on SQLite) in a private ``AIRFLOW_HOME``, driven through the REST
API. Every process is stopped on exit, also one restarted meanwhile
(:meth:`AirflowProcesses.restart`, for fault tests)."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests._scratch import scratch_dir

__all__ = ["AirflowProcesses", "airflow_processes"]


#: Tries of a REST call that the API server answers with a 5xx.
_API_TRIES = 5


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class AirflowProcesses:
    """A running Airflow: its home, environment and processes."""

    home: Path
    env: dict[str, str]
    port: int
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    airflow: tuple[str, ...] = (sys.executable, "-m", "airflow")
    #: Extra environment of one process (``scheduler``: also its forked workers).
    process_env: dict[str, dict[str, str]] = field(default_factory=dict)
    #: The running process of each command.
    by_command: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    watchdog: subprocess.Popen[bytes] | None = None
    #: The user and password the REST API calls log in with (``None``: every user is an
    #: admin, ``SIMPLE_AUTH_MANAGER_ALL_ADMINS``).
    login: tuple[str, str] | None = None
    _token: str | None = field(default=None, repr=False)

    def start(self, command: str) -> subprocess.Popen[bytes]:
        """Start ``airflow <command>`` in a session of its own, logging to ``<command>.log``
        (appended: a restarted process continues the log)."""
        env = {**self.env, **self.process_env.get(command, {})}
        with open(self.home / f"{command}.log", "ab") as log:
            proc = subprocess.Popen(
                [*self.airflow, command],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs.append(proc)
        self.by_command[command] = proc
        if self.watchdog is not None and self.watchdog.stdin is not None:
            self.watchdog.stdin.write(f"{proc.pid}\n".encode())  # its group, too
            self.watchdog.stdin.flush()
        return proc

    def kill(self, command: str, sig: signal.Signals = signal.SIGKILL) -> None:
        """Signal the whole process group of ``command`` (the triggerer, the scheduler and
        the workers it forked...) and wait until its leader is gone."""
        proc = self.by_command[command]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        proc.wait(60)

    def restart(self, command: str, sig: signal.Signals = signal.SIGKILL) -> None:
        """Kill ``command`` (SIGKILL by default: a crash) and start it again."""
        self.kill(command, sig)
        self.start(command)

    def logs(self) -> str:
        """The tail of every process log, for assertion messages."""
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
            for p in self.home.glob("*.log")
        )

    def wait_parsed(self, *dag_ids: str, timeout: float = 240) -> None:
        """Until the DAG processor has parsed every DAG named (and the API server answers).

        Asked of the REST API, like every call below: an ``airflow`` CLI call is a new
        interpreter, seconds of CPU each, and polling with it took about a core away from
        the processes under test."""
        deadline = time.monotonic() + timeout
        missing = list(dag_ids)
        while missing:
            missing = [d for d in missing if self.answer("GET", f"/api/v2/dags/{d}") is None]
            if missing:
                assert time.monotonic() < deadline, (
                    f"the DAG processor never parsed {missing}\n{self.logs()}"
                )
                time.sleep(1)

    def unpause(self, dag_id: str) -> None:
        """Let the scheduler run ``dag_id``'s runs."""
        self.api("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})

    def trigger(self, dag_id: str, run_id: str) -> None:
        """Start a run of ``dag_id`` named ``run_id`` (it waits while the DAG is paused)."""
        body = {"dag_run_id": run_id, "logical_date": None}
        try:
            self.api("POST", f"/api/v2/dags/{dag_id}/dagRuns", body)
        except urllib.error.HTTPError as error:
            if error.code != 409:  # 409: a try that answered 500 made it after all
                raise

    def wait_run(self, dag_id: str, run_id: str, timeout: float, every: float = 2) -> str:
        """Until the DAG run ends (or ``timeout`` seconds pass): its last state."""
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            answer = self.answer("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")
            state = str((answer or {}).get("state", ""))
            if state in ("success", "failed"):
                break
            time.sleep(every)
        return state

    def task_instances(self, dag_id: str, run_id: str) -> dict[str, dict[str, Any]]:
        """The task instances of a DAG run by task id (``state``, ``try_number``...)."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances?limit=1000"
        return {t["task_id"]: t for t in self.api("GET", path)["task_instances"]}

    def answer(self, method: str, path: str, body: Any = None) -> Any:
        """:meth:`api`, or ``None`` while the API server is not up yet or answers 404."""
        try:
            return self.api(method, path, body)
        except OSError:  # refused while it starts; HTTPError 404 (not parsed yet) is one too
            return None

    def api(self, method: str, path: str, body: Any = None) -> Any:
        """One REST API call as the (simple auth manager's) admin."""
        return json.loads(self._call(method, path, body))

    def task_log(
        self, dag_id: str, run_id: str, task_id: str, try_number: int
    ) -> list[dict[str, Any]]:
        """A task try's log as the UI reads it, from the API server: ``GET
        /api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}``
        with ``Accept: application/x-ndjson`` (one structured message a line: ``event``,
        ``timestamp``...). While the task runs or is deferred, the API server reads the
        worker's log and the triggerer's (the trigger's lines of this try) for it."""
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}"
        text = self._call("GET", path, accept="application/x-ndjson").decode()
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def token(self) -> str:
        """A JWT of the simple auth manager's admin (:attr:`login`'s user, if set); kept
        for the next calls."""
        if self._token is None:
            self._token = self.token_of(*self.login) if self.login else self.token_of()
        return self._token

    def token_of(self, user: str | None = None, password: str = "") -> str:
        """A new JWT from the simple auth manager's login endpoint: of ``user`` (POST with
        its password), or, without one, of the admin every user is (GET)."""
        url = f"http://127.0.0.1:{self.port}/auth/token"
        request = urllib.request.Request(url)
        if user is not None:
            request = urllib.request.Request(
                url,
                data=json.dumps({"username": user, "password": password}).encode(),
                headers={"Content-Type": "application/json"},
            )
        with urllib.request.urlopen(request, timeout=30) as answer:
            return str(json.loads(answer.read())["access_token"])

    def read(self, path: str, token: str, *, accept: str = "application/json") -> bytes:
        """One GET with ``token`` (:meth:`token`): the answer's body, and nothing else sent
        (to time what the API server does for one request)."""
        return self._call("GET", path, accept=accept, token=token)

    def _call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        accept: str = "application/json",
        token: str | None = None,
    ) -> bytes:
        token = token or self.token()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={
                "Authorization": f"Bearer {token}",
                "Content-Type": "application/json",
                "Accept": accept,
            },
        )
        for attempt in range(_API_TRIES):
            try:
                with urllib.request.urlopen(request, timeout=60) as answer:
                    return bytes(answer.read())
            except urllib.error.HTTPError as error:
                # SQLite: a write of the API server that meets the scheduler's lock answers
                # 500 ("database is locked"); the CLI it replaces waited on the lock instead
                if error.code < 500 or attempt == _API_TRIES - 1:
                    raise
                time.sleep(1)
        raise AssertionError("unreachable")

    def task_logs(self, dag_id: str, run_id: str, task_id: str) -> Path:
        """The folder of a task instance's logs."""
        return self.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}"


#: Stops the process groups named in its arguments, and those whose numbers arrive one a
#: line on its stdin, once its stdin closes: when the test process ends, even by SIGKILL,
#: the pipe's last writer is gone.
_WATCHDOG = """
import os, signal, sys, time
groups = [int(g) for g in sys.argv[1:]]
groups += [int(line) for line in sys.stdin.buffer if line.strip()]
for sig in (signal.SIGTERM, signal.SIGKILL):
    alive = []
    for group in groups:
        try:
            os.killpg(group, sig)
            alive.append(group)
        except OSError:
            pass
    if not alive:
        break
    groups = alive
    time.sleep(10)
"""


def _watchdog() -> subprocess.Popen[bytes]:
    """A process that stops the process groups it is told of (on its stdin) if the test run
    dies without doing it."""
    return subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG], stdin=subprocess.PIPE, start_new_session=True
    )


@contextmanager
def airflow_processes(
    dags: Mapping[str, str],
    *,
    parallelism: int = 2,
    extra_env: Mapping[str, str] | None = None,
    process_env: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[AirflowProcesses]:
    """Migrate a fresh SQLite database, write ``dags`` (file stem → source) and start the API
    server, the DAG processor, the scheduler and the triggerer; stop them all on exit.

    ``process_env`` adds variables to one command's environment (e.g. another Kubernetes
    connection for the triggerer than for the scheduler and its workers)."""
    home = scratch_dir("jobset-e2e-airflow-")
    (home / "dags").mkdir()
    for stem, source in dags.items():
        (home / "dags" / f"{stem}.py").write_text(source)
    port = _free_port()
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": str(parallelism),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__WORKERS": "1",
        # The log servers of the workers (the scheduler's) and of the triggerer, which the API
        # server asks for a running or deferred try's log: this Airflow's own, not another
        # one's that a concurrent test started on the default ports (8793, 8794).
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(_free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(_free_port()),
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(16),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        **dict(extra_env or {}),
    }
    env.pop("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", None)
    ctx = AirflowProcesses(
        home=home,
        env=env,
        port=port,
        process_env={k: dict(v) for k, v in (process_env or {}).items()},
    )
    subprocess.run(
        [*ctx.airflow, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300
    )
    watchdog = ctx.watchdog = _watchdog()  # a killed test run leaves no Airflow behind
    for command in ("api-server", "dag-processor", "scheduler", "triggerer"):
        ctx.start(command)
    try:
        yield ctx
    finally:
        for proc in ctx.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for proc in ctx.procs:
            try:
                proc.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        assert watchdog.stdin is not None
        watchdog.stdin.close()  # it stops what is left of their groups (forked workers)
        watchdog.wait(30)
