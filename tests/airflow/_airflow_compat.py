"""Test-side imports that moved between Airflow 3 minors (the provider's own are in
``airflow_provider_jobset._compat``); the tests run on every minor of the matrix."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow.dag_processing.dagbag import DagBag
    from airflow.sdk.exceptions import TaskDeferred
else:
    try:  # Airflow 3.2+
        from airflow.dag_processing.dagbag import DagBag
    except ImportError:  # 3.0, 3.1
        from airflow.models.dagbag import DagBag
    try:  # Airflow 3.2+
        from airflow.sdk.exceptions import TaskDeferred
    except ImportError:  # 3.0, 3.1
        from airflow.exceptions import TaskDeferred

__all__ = ["DagBag", "TaskDeferred"]
