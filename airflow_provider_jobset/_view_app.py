"""The FastAPI app of the JobSet view, mounted by the Airflow API server (Airflow 3.1+).

``GET <prefix>/ti?dag_id=&run_id=&task_id=&map_index=`` is the page (static: it holds no
data); ``GET <prefix>/api/ti?...`` its data, for users the auth manager lets read that DAG's
task instances and their logs. The cluster is read through the task try's own connection
(recorded in its XComs), as the API server's identity of that connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.core_api.security import requires_access_dag
from fastapi import Depends, FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse

from airflow_provider_jobset._identity import TaskIdentity
from airflow_provider_jobset._view import (
    Pictures,
    Recorded,
    Watches,
    _BadQuery,
    parse_query,
    parse_run_query,
    read_picture,
    settings_of,
)
from airflow_provider_jobset._view_page import PAGE, RUN_PAGE
from airflow_provider_jobset.links import XCOM_CONNECTION, XCOM_NAMESPACE, XCOM_UID
from jobset_core.errors import JobSetError

__all__ = ["URL_PREFIX", "make_app"]

URL_PREFIX = "/jobset"
log = logging.getLogger(__name__)
_XCOM_BACKEND = "jobset_backend"


_KEYS = (XCOM_NAMESPACE, XCOM_UID, _XCOM_BACKEND, XCOM_CONNECTION)


def _recorded_of(
    dag_id: str, run_id: str, task_id: str | None = None, map_index: int | None = None
) -> dict[tuple[str, int], Recorded]:
    """What the tries of a DAG run (one task instance, when named) recorded about their runs,
    by ``(task_id, map_index)`` (blocking: a database read)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    query = select(XComModel).where(  # columns every Airflow 3 minor has
        XComModel.dag_id == dag_id, XComModel.run_id == run_id, XComModel.key.in_(_KEYS)
    )
    if task_id is not None:
        query = query.where(XComModel.task_id == task_id, XComModel.map_index == map_index)
    values: dict[tuple[str, int], dict[str, Any]] = {}
    with create_session() as session:
        rows: list[Any] = list(session.scalars(query))
        for row in rows:
            key = (str(row.task_id), int(row.map_index))
            values.setdefault(key, {})[row.key] = XComModel.deserialize_value(row)
    out = {}
    for key, said in values.items():
        connection = said.get(XCOM_CONNECTION)
        out[key] = Recorded(
            namespace=said.get(XCOM_NAMESPACE),
            uid=said.get(XCOM_UID),
            backend=said.get(_XCOM_BACKEND),
            connection=connection if isinstance(connection, dict) else None,
        )
    return out


def _recorded(identity: TaskIdentity) -> Recorded:
    """The try's XComs about its run (blocking: a database read)."""
    found = _recorded_of(identity.dag_id, identity.run_id, identity.task_id, identity.map_index)
    return found.get((identity.task_id, identity.map_index), Recorded(None, None, None, None))


def _summary(
    settings: Any, identity: TaskIdentity, recorded: Recorded
) -> Callable[[], Awaitable[dict[str, Any]]]:
    async def read() -> dict[str, Any]:
        return await read_picture(settings, identity, recorded, summary=True)

    return read


def make_app() -> FastAPI:
    """The app (one :class:`Pictures` and one :class:`Watches` per API-server process)."""
    app = FastAPI(title="JobSet view", docs_url=None, redoc_url=None, openapi_url=None)
    pictures = Pictures()
    watches = Watches()
    app.state.watches = watches
    readers = [
        Depends(requires_access_dag("GET", DagAccessEntity.TASK_INSTANCE)),
        Depends(requires_access_dag("GET", DagAccessEntity.TASK_LOGS)),
    ]

    @app.get("/ti", response_class=HTMLResponse)
    def page() -> HTMLResponse:
        return HTMLResponse(PAGE, headers={"Cache-Control": "no-store"})

    @app.get("/run", response_class=HTMLResponse)
    def run_page() -> HTMLResponse:
        return HTMLResponse(RUN_PAGE, headers={"Cache-Control": "no-store"})

    @app.get("/api/run", dependencies=readers[:1])
    async def run_data(request: Request) -> JSONResponse:
        """Every JobSet task of a DAG run, summed up (no log, no node read)."""
        try:
            dag_id, run_id = parse_run_query(request.query_params)
            recorded = await asyncio.to_thread(_recorded_of, dag_id, run_id)
        except _BadQuery as error:
            return JSONResponse({"tasks": [], "message": str(error)}, status_code=400)
        tasks = []
        for (task_id, map_index), said in sorted(recorded.items()):
            identity = TaskIdentity(dag_id, task_id, run_id, map_index)
            row: dict[str, Any] = {"task_id": task_id, "map_index": map_index}
            try:
                settings = await asyncio.to_thread(settings_of, said.connection)
                key = ("summary", identity, said.namespace, said.uid, str(said.connection))
                row.update(await pictures.get(key, _summary(settings, identity, said)))
            except Exception as error:  # one task's cluster or connection: said on its row
                log.warning("JobSet view of %s: %s", identity, error)
                row.update({"found": False, "message": f"cannot be read: {error}"})
            tasks.append(row)
        return JSONResponse({"tasks": tasks, "message": ""}, headers={"Cache-Control": "no-store"})

    @app.get("/api/ti", dependencies=readers)
    async def data(request: Request) -> JSONResponse:
        try:
            identity = parse_query(request.query_params)
            recorded = await asyncio.to_thread(_recorded, identity)
            settings = await asyncio.to_thread(settings_of, recorded.connection)
        except _BadQuery as error:
            return JSONResponse({"found": False, "message": str(error)}, status_code=400)
        except Exception as error:  # the connection: unknown, unreadable...
            log.warning("JobSet view: %s", error)
            message = f"the task's connection cannot be used: {error}"
            return JSONResponse({"found": False, "message": message}, status_code=502)
        key = (identity, recorded.namespace, recorded.uid, str(recorded.connection))
        try:
            answer = await pictures.get(key, lambda: watches.read(settings, identity, recorded))
        except JobSetError as error:
            log.warning("JobSet view of %s: %s", identity, error)
            message = f"the cluster did not answer: {error}"
            return JSONResponse({"found": False, "message": message}, status_code=502)
        return JSONResponse(answer, headers={"Cache-Control": "no-store"})

    return app
