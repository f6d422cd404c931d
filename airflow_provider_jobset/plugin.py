"""The JobSet view in the Airflow UI (Airflow 3.1+): a plugin the provider registers
(``get_provider_info()["plugins"]``), so installing the package adds it.

It adds a "JobSet" tab to every task instance and a "JobSets" tab (a summary of its JobSet
tasks) to every DAG run, served by the API server under
:data:`~airflow_provider_jobset._view_app.URL_PREFIX`. Nothing a DAG file imports imports this
module; the API server (and Airflow's plugin manager elsewhere) does.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_provider_jobset._view_app import URL_PREFIX, make_app

__all__ = ["RUN_HREF", "VIEW_HREF", "JobSetViewPlugin"]

#: The tab's page; the UI fills in the task instance.
VIEW_HREF = (
    f"{URL_PREFIX}/ti?dag_id={{DAG_ID}}&run_id={{RUN_ID}}&task_id={{TASK_ID}}"
    "&map_index={MAP_INDEX}"
)
#: The DAG run's summary of its JobSet tasks.
RUN_HREF = f"{URL_PREFIX}/run?dag_id={{DAG_ID}}&run_id={{RUN_ID}}"


class JobSetViewPlugin(AirflowPlugin):
    """The JobSet tab of a task instance, the JobSets tab of a DAG run, and their app."""

    name = "jobset_view"
    fastapi_apps = [{"app": make_app(), "url_prefix": URL_PREFIX, "name": "JobSet view"}]
    external_views = [
        {
            "name": "JobSet",
            "href": VIEW_HREF,
            "destination": "task_instance",
            "url_route": "jobset",
        },
        {
            "name": "JobSets",
            "href": RUN_HREF,
            "destination": "dag_run",
            "url_route": "jobsets",
        },
    ]
