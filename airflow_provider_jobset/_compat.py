"""Every Airflow version difference the provider cares about, in one place.

The provider supports Airflow 3.0+ (every minor is tested: ``requirements/airflow-3.*.txt``);
some features need 3.3 (task state store, trigger ``on_kill``, retry policies). Everything
imported here is part of Airflow's authoring API (``airflow.sdk``, or where 3.0/3.1 kept it
before it moved there) or the trigger base classes, and none of it imports a Kubernetes
client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow import __version__ as AIRFLOW_VERSION
from airflow.sdk import BaseOperator, BaseOperatorLink, BaseSensorOperator
from airflow.triggers.base import BaseTrigger, TriggerEvent
from packaging.version import Version

if TYPE_CHECKING:  # the newest layout; the fallbacks below are for older minors
    from airflow.sdk import BaseHook, conf
    from airflow.sdk.exceptions import (
        AirflowException,
        AirflowFailException,
        AirflowNotFoundException,
    )
else:
    try:  # Airflow 3.1+
        from airflow.sdk import BaseHook
    except ImportError:  # 3.0
        from airflow.hooks.base import BaseHook
    try:  # Airflow 3.2+
        from airflow.sdk import conf
    except ImportError:  # 3.0, 3.1
        from airflow.configuration import conf
    try:  # Airflow 3.2+
        from airflow.sdk.exceptions import (
            AirflowException,
            AirflowFailException,
            AirflowNotFoundException,
        )
    except ImportError:  # 3.0, 3.1
        from airflow.exceptions import (
            AirflowException,
            AirflowFailException,
            AirflowNotFoundException,
        )

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
