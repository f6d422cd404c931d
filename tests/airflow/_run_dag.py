"""Run one DAG file with ``dag.test()`` in this process and print what happened as JSON
(the last line of stdout): the run's state and, per task, state, try number, the states of
earlier tries and the XComs. Used by the cluster tests as a subprocess."""

from __future__ import annotations

import json
import sys


def main(path: str, dag_id: str) -> None:
    try:  # Airflow 3.2+
        from airflow.dag_processing.dagbag import DagBag
    except ImportError:  # 3.0, 3.1
        from airflow.models.dagbag import DagBag
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.taskinstancehistory import TaskInstanceHistory
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    bag = DagBag(dag_folder=path)
    if bag.import_errors:
        raise SystemExit(f"import errors: {bag.import_errors}")
    run = bag.dags[dag_id].test()
    out: dict[str, object] = {"state": str(run.state), "run_id": run.run_id, "tasks": {}}
    with create_session() as session:
        tis = session.query(TaskInstance).filter_by(dag_id=dag_id, run_id=run.run_id).all()
        for ti in tis:
            history = (
                session.query(TaskInstanceHistory)
                .filter_by(dag_id=dag_id, run_id=run.run_id, task_id=ti.task_id)
                .order_by(TaskInstanceHistory.try_number)
                .all()
            )
            xcoms = (
                session.query(XComModel)
                .filter_by(dag_id=dag_id, run_id=run.run_id, task_id=ti.task_id)
                .all()
            )
            out["tasks"][ti.task_id] = {  # type: ignore[index]
                "state": str(ti.state),
                "try_number": ti.try_number,
                "history": [[h.try_number, str(h.state)] for h in history],
                "xcom": {x.key: x.value for x in xcoms},
            }
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
