"""Airflow provider for Kubernetes JobSets: a thin adapter over :mod:`jobset_core`.

Importing this package imports nothing from Airflow or the Kubernetes clients, so DAG parsing
stays cheap; operators, sensors, hooks and triggers live in their submodules.
"""

from __future__ import annotations

from typing import Any

__all__ = ["__version__", "get_provider_info"]

__version__ = "0.1.0"


def get_provider_info() -> dict[str, Any]:
    """Provider metadata read by Airflow's providers manager (``apache_airflow_provider``)."""
    return {
        "package-name": "airflow-provider-jobset",
        "name": "JobSet",
        "description": "Run Kubernetes JobSets (distributed ML/HPC jobs) as Airflow tasks.",
        "versions": [__version__],
    }
