"""Leader + workers where only the leader decides success.

``leader_workers`` makes the leader the coordinator and targets the success policy at it:
the JobSet completes as soon as the leader succeeds (still-running workers are deleted), and
its termination message is the task's result.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import dag, task

from airflow_provider_jobset.operators import JobSetOperator
from jobset_core import leader_workers

jobset = leader_workers(
    "parameter-server",
    "python:3.12-slim",
    workers=3,
    leader_command=["python", "-m", "ps.leader", "--port", "7000"],
    worker_command=["python", "-m", "ps.worker", "--leader", "$(COORDINATOR_ADDRESS):7000"],
    port=7000,
    workers_wait_for_leader=True,
)


@dag(schedule=None, start_date=datetime(2026, 1, 1), catchup=False, tags=["jobset", "example"])
def leader_worker():
    run = JobSetOperator(task_id="run", jobset=jobset, delete_policy="always")

    @task
    def report(result):
        print(f"the leader reported: {result}")

    report(run.output)


leader_worker()
