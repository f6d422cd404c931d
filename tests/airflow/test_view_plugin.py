"""The JobSet view plugin without a cluster: what the page may ask for, which connection it
reads through, one read shared by every viewer, the plugin's shape as Airflow's own models
check it, a page that fetches nothing from the internet, and a DAG file's import that never
loads the plugin (or FastAPI)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from airflow_provider_jobset import get_provider_info
from airflow_provider_jobset._identity import TaskIdentity
from airflow_provider_jobset._view import (
    Pictures,
    _BadQuery,
    connection_of,
    parse_query,
    parse_run_query,
    summarize,
)
from tests._fresh import fresh_python

pytestmark = [pytest.mark.airflow, pytest.mark.airflow_matrix]

Q = {"dag_id": "d", "run_id": "manual__2026-01-01T00:00:00+00:00", "task_id": "t"}


@pytest.mark.parametrize(
    ("params", "map_index"),
    [
        (Q, -1),
        ({**Q, "map_index": ""}, -1),
        ({**Q, "map_index": "{MAP_INDEX}"}, -1),  # the UI leaves it unfilled when not mapped
        ({**Q, "map_index": "-1"}, -1),
        ({**Q, "map_index": " 3 "}, 3),
    ],
)
def test_parse_query(params: dict[str, str], map_index: int) -> None:
    assert parse_query(params) == TaskIdentity("d", "t", Q["run_id"], map_index)


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"run_id": "r", "task_id": "t"}, "dag_id is required"),
        ({**Q, "task_id": ""}, "task_id is required"),
        ({**Q, "dag_id": "x" * 251}, "dag_id is longer than 250 characters"),
        ({**Q, "map_index": "two"}, "map_index must be a whole number, not 'two'"),
        ({**Q, "map_index": "-2"}, "map_index must be -1 or more, not -2"),
    ],
)
def test_bad_queries_say_what_is_wrong(params: dict[str, str], error: str) -> None:
    with pytest.raises(_BadQuery) as raised:
        parse_query(params)
    assert str(raised.value) == error


@pytest.mark.parametrize(
    ("recorded", "expected"),
    [
        (None, ("kubernetes_default", None, None)),
        ({"kubernetes_conn_id": "k8s_team", "cluster_context": "gke", "in_cluster": None},
         ("k8s_team", "gke", None)),
        ({"kubernetes_conn_id": None, "in_cluster": True}, (None, None, True)),
    ],
)  # fmt: skip
def test_the_view_reads_through_the_tasks_own_connection(
    recorded: dict[str, Any] | None, expected: tuple[Any, ...]
) -> None:
    assert connection_of(recorded) == expected


def test_a_kubeconfig_file_named_by_the_task_is_not_read() -> None:
    with pytest.raises(_BadQuery, match="kubeconfig file"):
        connection_of({"kubernetes_conn_id": "k", "config_file": "/etc/passwd"})


def test_one_read_per_run_while_fresh_shared_by_concurrent_viewers() -> None:
    now = [0.0]
    reads: list[str] = []
    pictures = Pictures(fresh_for=3.0, clock=lambda: now[0])

    async def read() -> dict[str, Any]:
        reads.append("read")
        await asyncio.sleep(0.01)
        return {"n": len(reads)}

    async def main() -> list[dict[str, Any]]:
        first = await asyncio.gather(*(pictures.get("a", read) for _ in range(5)))
        now[0] = 2.9
        kept = await pictures.get("a", read)
        other = await pictures.get("b", read)
        now[0] = 6.0
        again = await pictures.get("a", read)
        return [*first, kept, other, again]

    answers = asyncio.run(main())
    assert [a["n"] for a in answers] == [1, 1, 1, 1, 1, 1, 2, 3]
    assert set(pictures._locks) == {"a"}  # b's went stale and was dropped with its answer


def test_a_run_nobody_looks_at_lets_its_watch_go() -> None:
    # Idle watches are closed at the next look at anything, and by the sweeper while nobody
    # looks; one made on another event loop (a test client's, gone) is dropped unclosed.
    import contextlib

    from airflow_provider_jobset._view import Watches, _Watch

    now = [0.0]
    closed: list[str] = []

    async def main() -> None:
        watches = Watches(idle=60.0, clock=lambda: now[0])
        loop = asyncio.get_running_loop()
        for key, used in (("old", 0.0), ("new", 30.0)):
            stack = contextlib.AsyncExitStack()
            stack.callback(closed.append, key)
            watches._watches[key] = _Watch(stack, Any, Any, Any, loop, used)  # type: ignore[arg-type]
        now[0] = 59.0
        await watches._sweep()
        assert (len(watches), closed) == (2, [])
        now[0] = 60.0
        await watches._sweep()
        assert (len(watches), closed) == (1, ["old"])
        other = asyncio.new_event_loop()
        watches._watches["new"].loop = other
        await watches._sweep()  # its loop is not this one: forgotten, not closed here
        other.close()
        assert (len(watches), closed) == (0, ["old"])

    asyncio.run(main())


def test_the_plugin_is_registered_as_airflow_reads_it() -> None:
    from airflow.plugins_manager import AirflowPlugin

    from airflow_provider_jobset.plugin import JobSetViewPlugin

    (entry,) = get_provider_info()["plugins"]
    assert entry == {
        "name": "jobset_view",
        "plugin-class": "airflow_provider_jobset.plugin.JobSetViewPlugin",
    }
    assert issubclass(JobSetViewPlugin, AirflowPlugin)
    (app,) = JobSetViewPlugin.fastapi_apps
    assert app["url_prefix"] == "/jobset"
    view, run = JobSetViewPlugin.external_views
    assert view["destination"] == "task_instance"
    for field in ("{DAG_ID}", "{RUN_ID}", "{TASK_ID}", "{MAP_INDEX}"):
        assert field in view["href"]
    assert run["destination"] == "dag_run"
    assert run["href"] == "/jobset/run?dag_id={DAG_ID}&run_id={RUN_ID}"
    try:  # Airflow's own models of what a plugin exposes (3.1+)
        from airflow.api_fastapi.core_api.datamodels.plugins import ExternalViewResponse
    except ImportError:  # pragma: no cover - 3.0 has no plugin views
        return
    ExternalViewResponse.model_validate(view)
    ExternalViewResponse.model_validate(run)


def test_airflow_loads_the_plugin_with_its_default_settings() -> None:
    """Through the ``airflow.plugins`` entry point: Airflow loads a provider's declared
    plugins only with ``[core] lazy_load_providers = False`` (checked too)."""
    from importlib.metadata import entry_points

    from airflow import plugins_manager
    from airflow.providers_manager import ProvidersManager

    (point,) = [p for p in entry_points(group="airflow.plugins") if p.name == "jobset_view"]
    assert point.value == "airflow_provider_jobset.plugin:JobSetViewPlugin"
    if hasattr(plugins_manager, "_get_plugins"):  # Airflow 3.2+
        loaded, errors = plugins_manager._get_plugins()
    else:
        plugins_manager.ensure_plugins_loaded()
        loaded, errors = plugins_manager.plugins or [], plugins_manager.import_errors
    assert "jobset_view" in [p.name for p in loaded], errors
    names = {p.plugin_class for p in ProvidersManager().plugins}
    assert "airflow_provider_jobset.plugin.JobSetViewPlugin" in names


@pytest.mark.parametrize(("page", "data"), [("PAGE", "api/ti"), ("RUN_PAGE", "api/run")])
def test_the_pages_fetch_nothing_but_their_own_data(page: str, data: str) -> None:
    from airflow_provider_jobset import _view_page

    text = getattr(_view_page, page)
    assert not re.search(r"(src|href)\s*=", text)
    assert "http://" not in text and "https://" not in text
    assert re.findall(r"fetch\(([^,)]*)", text) == [f'"{data}" + location.search']
    assert "innerHTML" not in text  # cluster text goes in as text, never as HTML


@pytest.mark.parametrize(
    ("params", "answer"),
    [
        ({"dag_id": "d", "run_id": "r"}, ("d", "r")),
        ({"dag_id": "d"}, "run_id is required"),
        ({"dag_id": "", "run_id": "r"}, "dag_id is required"),
        ({"dag_id": "d", "run_id": "r" * 251}, "run_id is longer than 250 characters"),
    ],
)
def test_parse_run_query(params: dict[str, str], answer: Any) -> None:
    if isinstance(answer, tuple):
        assert parse_run_query(params) == answer
        return
    with pytest.raises(_BadQuery) as raised:
        parse_run_query(params)
    assert str(raised.value) == answer


def test_a_summary_counts_the_newest_attempts_pods_by_phase() -> None:
    def pod(phase: str, attempt: int) -> dict[str, Any]:
        return {"phase": phase, "attempt": attempt}

    picture = {
        "jobset": {"name": "js", "state": "Running"},
        "grid": [
            {"jobs": [{"pods": [pod("Failed", 0), pod("Running", 1)]}, {"pods": []}]},
            {"jobs": [{"pods": [pod("Pending", 1), pod("Running", 1)]}]},
        ],
        "timeline": [{"kind": "submitted"}, {"kind": "restart", "text": "x"}],
    }
    assert summarize(picture) == {
        "jobset": {"name": "js", "state": "Running"},
        "phases": {"Pending": 1, "Running": 2},
        "last": {"kind": "restart", "text": "x"},
    }
    assert summarize({}) == {"jobset": {}, "phases": {}, "last": None}


def test_a_dag_files_import_loads_neither_the_plugin_nor_fastapi() -> None:
    """Beyond what Airflow's own authoring modules import (3.0's import FastAPI), the
    operator and sensor modules import nothing of the view."""
    code = (
        "import sys\n"
        "import airflow_provider_jobset._compat\n"  # Airflow's modules the provider uses
        "before = set(sys.modules)\n"
        "import airflow_provider_jobset.operators, airflow_provider_jobset.sensors\n"
        "new = set(sys.modules) - before\n"
        "ours = ('airflow_provider_jobset._view', 'airflow_provider_jobset.plugin')\n"
        "print(sorted(m for m in new if m.split('.')[0] == 'fastapi' or m.startswith(ours)))\n"
    )
    assert fresh_python(code).stdout.strip() == "[]"
