"""Run one DAG file with ``dag.test()`` in this process and report what happened as JSON
(printed, and written to the file named by a third argument, where no logger writing to stdout
meanwhile can split it): the run's state and, per task, state, try number, the states of
earlier tries and the XComs. Used by the cluster tests as a subprocess (:func:`run_dag`);
:func:`tasks_of` also by ``make demo`` (``scripts/demo_narrator.py``), to show the tries."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

#: How long a subprocess that imports Airflow and the provider may take (seconds). Quiet, it
#: takes a few; but the matrix runs the older minors' unit tests niced beside the suite's first
#: pass, where such a process gets about a tenth of the two busy cores. A CI run's import check
#: failed there, most likely at its old 120 s (what it printed was not kept). Below the tests'
#: own 600 s.
IMPORT_WAIT = 480


def run_dag(
    path: Path, dag_id: str, env: dict[str, str] | None = None, timeout: float = 420
) -> dict[str, Any]:
    """This script on one DAG file in a subprocess (with the caller's environment, or
    ``env``): its report, after checking it ran to it."""
    with tempfile.TemporaryDirectory() as tmp:
        written = Path(tmp) / "report.json"
        proc = subprocess.run(
            [sys.executable, __file__, str(path), dag_id, str(written)],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
        return report(proc.stdout, proc.stderr, written)


#: What asyncio and aiohttp log for what a run left open (a client session a trigger held
#: when ``dag.test()`` closed its loop): a user sees these as errors in the task's log.
LEFT_OPEN = ("Unclosed client session", "Unclosed connector", "Task was destroyed but it is")


def report(stdout: str, stderr: str, written: Path) -> dict[str, Any]:
    """The report this script wrote to ``written``, after checking that the run's output
    (``stdout``, ``stderr``) says nothing was left open."""
    assert written.is_file(), stdout[-4000:] + stderr[-4000:]
    left = [ln for ln in (stdout + stderr).splitlines() if any(m in ln for m in LEFT_OPEN)]
    assert not left, "\n".join(left)
    return json.loads(written.read_text())  # type: ignore[no-any-return]


def tasks_of(dag_id: str, run_id: str) -> dict[str, dict[str, Any]]:
    """Per task of the run: state, try number, ``history`` ([try, state] of the earlier tries),
    ``xcom`` (key -> value) and ``rendered`` (the templated fields as rendered, e.g. the
    arguments a ``@task`` got from XCom; None when not recorded)."""
    from airflow.models.renderedtifields import RenderedTaskInstanceFields as Rendered
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.taskinstancehistory import TaskInstanceHistory
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    tasks: dict[str, dict[str, Any]] = {}
    with create_session() as session:
        tis = session.query(TaskInstance).filter_by(dag_id=dag_id, run_id=run_id).all()
        for ti in tis:
            history = (
                session.query(TaskInstanceHistory)
                .filter_by(dag_id=dag_id, run_id=run_id, task_id=ti.task_id)
                .order_by(TaskInstanceHistory.try_number)
                .all()
            )
            xcoms = (
                session.query(XComModel)
                .filter_by(dag_id=dag_id, run_id=run_id, task_id=ti.task_id)
                .all()
            )
            rendered = (
                session.query(Rendered)
                .filter_by(dag_id=dag_id, run_id=run_id, task_id=ti.task_id, map_index=ti.map_index)
                .one_or_none()
            )
            tasks[ti.task_id] = {
                "state": str(ti.state),
                "try_number": ti.try_number,
                "history": [[h.try_number, str(h.state)] for h in history],
                "xcom": {x.key: x.value for x in xcoms},
                "rendered": rendered.rendered_fields if rendered is not None else None,
            }
    return tasks


def main(path: str, dag_id: str, written: str | None = None) -> None:
    try:  # Airflow 3.2+
        from airflow.dag_processing.dagbag import DagBag
    except ImportError:  # 3.0, 3.1
        from airflow.models.dagbag import DagBag

    bag = DagBag(dag_folder=path)
    if bag.import_errors:
        raise SystemExit(f"import errors: {bag.import_errors}")
    run = bag.dags[dag_id].test()
    out = {"state": str(run.state), "run_id": run.run_id, "tasks": tasks_of(dag_id, run.run_id)}
    text = json.dumps(out, default=str)
    if written is not None:
        Path(written).write_text(text)
    print(text)


if __name__ == "__main__":
    main(*sys.argv[1:4])
