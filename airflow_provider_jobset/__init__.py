"""Airflow provider for Kubernetes JobSets: a thin adapter over :mod:`jobset_core`.

Importing this package imports nothing from Airflow or the Kubernetes clients, so DAG parsing
stays cheap; operators, sensors, hooks and triggers live in their submodules.
"""

from __future__ import annotations

from typing import Any

__all__ = ["__version__", "get_provider_info"]

from jobset_core._version import __version__


def get_provider_info() -> dict[str, Any]:
    """Provider metadata read by Airflow's providers manager (``apache_airflow_provider``)."""
    return {
        "package-name": "airflow-provider-jobset",
        "name": "JobSet",
        "description": "Run Kubernetes JobSets (distributed ML/HPC jobs) as Airflow tasks.",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "Kubernetes JobSet",
                "external-doc-url": "https://jobset.sigs.k8s.io/",
                "tags": ["software"],
            }
        ],
        "operators": [
            {
                "integration-name": "Kubernetes JobSet",
                "python-modules": ["airflow_provider_jobset.operators"],
            }
        ],
        "sensors": [
            {
                "integration-name": "Kubernetes JobSet",
                "python-modules": ["airflow_provider_jobset.sensors"],
            }
        ],
        "hooks": [
            {
                "integration-name": "Kubernetes JobSet",
                "python-modules": ["airflow_provider_jobset.hooks"],
            }
        ],
        "triggers": [
            {
                "integration-name": "Kubernetes JobSet",
                "python-modules": ["airflow_provider_jobset.triggers"],
            }
        ],
        "extra-links": ["airflow_provider_jobset.links.JobSetLink"],
        # The JobSet tab of a task instance (Airflow 3.1+; the API server loads it).
        "plugins": [
            {
                "name": "jobset_view",
                "plugin-class": "airflow_provider_jobset.plugin.JobSetViewPlugin",
            }
        ],
        # The connection type is the cncf.kubernetes provider's ``kubernetes``: it is reused,
        # not registered a second time (existing ``kubernetes_default`` connections just work).
        "config": {
            "jobset": {
                "description": "Options of the JobSet provider.",
                "options": {
                    "link_template": {
                        "description": "URL template of the JobSet extra link, with "
                        "{namespace}, {name} and {uid}.",
                        "type": "string",
                        "example": "https://console.example.com/ns/{namespace}/jobsets/{name}",
                        "default": "",
                        "version_added": "0.1.0",
                    }
                },
            }
        },
    }
