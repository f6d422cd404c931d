"""Every Airflow version difference the provider cares about, in one place.

The provider supports Airflow 3.0+ (every minor is tested: ``requirements/airflow-3.*.txt``);
some features need 3.3 (task state store, trigger ``on_kill``, retry policies), and 3.0
needs one fix (:data:`STALE_RESUME_ON_RETRY`). Everything
imported here is part of Airflow's authoring API (``airflow.sdk``, or where 3.0/3.1 kept it
before it moved there) or the trigger base classes, and none of it imports a Kubernetes
client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow import __version__ as AIRFLOW_VERSION
from airflow.sdk import BaseOperator as _SdkBaseOperator
from airflow.sdk import BaseOperatorLink
from airflow.sdk import BaseSensorOperator as _SdkBaseSensorOperator
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
    "Deferrable",
    "TriggerEvent",
    "conf",
    "default_deferrable",
    "task_state_store",
]

_BASE_VERSION = Version(Version(AIRFLOW_VERSION).base_version)
AIRFLOW_V_3_3_PLUS = Version("3.3.0") <= _BASE_VERSION
#: Airflow 3.0 keeps a deferred task's ``next_method`` / ``next_kwargs`` when the task is
#: retried (apache/airflow#56704, fixed in 3.1): the next try would resume with the earlier
#: try's trigger event instead of running ``execute``.
STALE_RESUME_ON_RETRY = Version("3.1.0") > _BASE_VERSION
#: XCom key of the try a task deferred in (Airflow 3.0 only).
DEFERRED_IN_TRY = "jobset_deferred_in_try"


def _current_ti() -> Any:
    """The running task instance, or ``None`` outside a task runner."""
    from airflow.sdk import get_current_context

    try:
        return get_current_context()["ti"]
    except (RuntimeError, KeyError):
        return None


class _FreshTryAfterRetry:
    """On Airflow 3.0: note (as an XCom of the task instance) the try a task deferred in, and
    run ``execute`` afresh when a later try is handed the earlier try's resumption, so a retry
    reattaches to its JobSet instead of re-raising the old event. (The note cannot travel in
    the resumption's kwargs: ``dag.test()`` replaces them with the event.)"""

    def defer(
        self, *, trigger: Any, method_name: str, kwargs: Any = None, timeout: Any = None
    ) -> Any:
        ti = _current_ti()
        if ti is not None:
            ti.xcom_push(key=DEFERRED_IN_TRY, value=ti.try_number)
        return super().defer(  # type: ignore[misc]
            trigger=trigger, method_name=method_name, kwargs=kwargs, timeout=timeout
        )

    def resume_execution(self, next_method: str, next_kwargs: Any, context: Any) -> Any:
        ti = context["ti"]
        deferred_in = ti.xcom_pull(task_ids=ti.task_id, key=DEFERRED_IN_TRY)
        if deferred_in != ti.try_number:
            return self.execute(context)  # type: ignore[attr-defined]
        return super().resume_execution(next_method, next_kwargs, context)  # type: ignore[misc]


if TYPE_CHECKING or not STALE_RESUME_ON_RETRY:
    BaseOperator = _SdkBaseOperator
    BaseSensorOperator = _SdkBaseSensorOperator
else:

    class BaseOperator(_FreshTryAfterRetry, _SdkBaseOperator):
        """``airflow.sdk.BaseOperator`` with the Airflow 3.0 retry fix."""

    class BaseSensorOperator(_FreshTryAfterRetry, _SdkBaseSensorOperator):
        """``airflow.sdk.BaseSensorOperator`` with the Airflow 3.0 retry fix."""


def default_deferrable() -> bool:
    """``[operators] default_deferrable``, read when asked (not at import)."""
    return conf.getboolean("operators", "default_deferrable", fallback=False)


class Deferrable:
    """An operator's ``deferrable``: the value it was given, else ``[operators]
    default_deferrable`` read when the attribute is read (when the task runs), not when the
    operator is built: a DAG processor builds every operator of a file at every parse, and
    the configuration read was a third of a ``JobSetOperator``'s construction."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._key = f"_{name}_given"

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        if instance is None:
            return self
        given = instance.__dict__.get(self._key)
        return default_deferrable() if given is None else given

    def __set__(self, instance: object, value: bool | None) -> None:
        instance.__dict__[self._key] = value


def task_state_store(context: Any) -> Any:
    """The task state store of a running task (Airflow 3.3+), else ``None``."""
    try:
        return context.get("task_state_store")
    except AttributeError:
        return None
