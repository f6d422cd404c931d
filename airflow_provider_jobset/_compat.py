"""Every Airflow version difference the provider cares about, in one place.

The provider supports Airflow 3.0+; some features need 3.3 (task state store, trigger
``on_kill``, retry policies). Everything imported here is part of Airflow's authoring API
(``airflow.sdk``) or the trigger base classes, and none of it imports a Kubernetes client.
"""

from __future__ import annotations

from typing import Any

from airflow import __version__ as AIRFLOW_VERSION
from airflow.sdk import BaseHook, BaseOperator, BaseOperatorLink, BaseSensorOperator, conf
from airflow.sdk.exceptions import (
    AirflowException,
    AirflowFailException,
    AirflowNotFoundException,
)
from airflow.triggers.base import BaseTrigger, TriggerEvent
from packaging.version import Version

__all__ = [
    "AIRFLOW_VERSION",
    "AIRFLOW_V_3_3_PLUS",
    "AirflowException",
    "AirflowFailException",
    "AirflowNotFoundException",
    "BaseHook",
    "BaseOperator",
    "BaseOperatorLink",
    "BaseSensorOperator",
    "BaseTrigger",
    "TriggerEvent",
    "conf",
    "default_deferrable",
    "task_state_store",
]

AIRFLOW_V_3_3_PLUS = Version(Version(AIRFLOW_VERSION).base_version) >= Version("3.3.0")


def default_deferrable() -> bool:
    """``[operators] default_deferrable``, read when an operator is built (not at import)."""
    return conf.getboolean("operators", "default_deferrable", fallback=False)


def task_state_store(context: Any) -> Any:
    """The task state store of a running task (Airflow 3.3+), else ``None``."""
    try:
        return context.get("task_state_store")
    except AttributeError:
        return None
