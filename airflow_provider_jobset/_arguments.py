"""The operator's and the sensor's arguments, checked when the DAG is parsed (pure, no I/O).

Every argument gets its type and range checked at construction, with a ``TypeError`` or
``ValueError`` that names it (``JobSetOperator(start_grace=...): must be 0 or more, not
-1``), so a wrong argument fails the DAG import instead of failing a task after its JobSet
was created. The arguments every way in shares (durations, pod start rules, log options,
backend, delete policy, namespace) are checked by the core's one set of checks
(:mod:`jobset_core.lifecycle.request`): the same words as the KFP launcher and ``jobsetctl``
say for them. The templated fields may hold Jinja until the task runs: they are checked at
construction when they hold no template, and again after rendering.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar

from jobset_core import lifecycle as core
from jobset_core.lifecycle import InvalidArgument, InvalidArgumentType
from jobset_core.models import JobSet
from jobset_core.naming import ensure_jobset_name

__all__ = [
    "CONNECTION_FIELDS",
    "check_connection",
    "check_operator_arguments",
    "check_rendered",
    "check_sensor_arguments",
    "checked",
    "is_templated",
]

T = TypeVar("T")

#: The connection arguments the operator and the sensor share (templated, as the cncf
#: operators template them).
CONNECTION_FIELDS = ("kubernetes_conn_id", "config_file", "cluster_context")


def is_templated(value: Any) -> bool:
    """Whether ``value`` (or a string inside it) holds Jinja that rendering will replace."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, Mapping):
        return any(is_templated(k) or is_templated(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(is_templated(item) for item in value)
    return False


def checked(owner: str, check: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``check(*args, **kwargs)`` with a refusal reworded for a DAG author: the argument as
    the class takes it (``JobSetOperator(start_grace=...)``), the core's words after it.

    Raises:
        TypeError, ValueError: naming the argument.
    """
    try:
        return check(*args, **kwargs)
    except InvalidArgument as err:
        kind = TypeError if isinstance(err, InvalidArgumentType) else ValueError
        raise kind(f"{owner}({err.argument}=...): {err.problem}") from None


def _text(value: Any, argument: str) -> None:
    if value is not None and not isinstance(value, str):
        raise core.request.wrong_type(argument, "a string or None", value)


def _optional_flag(value: Any, argument: str) -> None:
    if value is not None and not isinstance(value, bool):
        raise core.request.wrong_type(argument, "True, False or None", value)


def _name(value: Any, argument: str) -> None:
    if value is None or is_templated(value):
        return
    if not isinstance(value, str):
        raise core.request.wrong_type(argument, "a string or None", value)
    try:
        ensure_jobset_name(value, argument)
    except ValueError as err:
        raise InvalidArgument(argument, str(err).removeprefix(f"{argument} ")) from None


def _namespace(value: Any) -> None:
    if value is not None and not is_templated(value):
        core.namespace(value)


def check_connection(
    *, kubernetes_conn_id: Any, config_file: Any, cluster_context: Any, in_cluster: Any
) -> None:
    """The connection arguments (templated ones only when they hold no template).

    Raises:
        InvalidArgument: naming the argument.
    """
    _text(kubernetes_conn_id, "kubernetes_conn_id")
    _text(cluster_context, "cluster_context")
    if config_file is not None and not isinstance(config_file, (str, os.PathLike)):
        raise core.request.wrong_type("config_file", "a path or None", config_file)
    _optional_flag(in_cluster, "in_cluster")


def _jobset(value: Any) -> None:
    if not isinstance(value, (JobSet, Mapping, str, os.PathLike)):
        raise core.request.wrong_type(
            "jobset",
            "a JobSet, a mapping, YAML/JSON text or the path of a .yaml/.yml/.json file",
            value,
        )
    if isinstance(value, str) and not value.strip():
        raise InvalidArgument("jobset", "must not be empty")


def check_operator_arguments(
    *,
    jobset: Any,
    namespace: Any,
    name: Any,
    deferrable: Any,
    timeout: Any,
    stream_logs: Any,
    link_template: Any,
    delete_on_kill: Any,
    retries: Any,
    **connection: Any,
) -> None:
    """Check the ``JobSetOperator`` arguments of its own (the shared ones are checked as the
    request is built).

    Raises:
        InvalidArgument: naming the argument.
    """
    _jobset(jobset)
    _namespace(namespace)
    _name(name, "name")
    check_connection(**connection)
    _text(link_template, "link_template")
    _optional_flag(deferrable, "deferrable")
    core.flag(stream_logs, "stream_logs")
    core.flag(delete_on_kill, "delete_on_kill")
    if timeout is not None and not isinstance(timeout, _dt.timedelta):
        raise core.request.wrong_type(
            "timeout", "a datetime.timedelta or None (e.g. timedelta(hours=6))", timeout
        )
    core.seconds(timeout, "timeout", positive=True)
    if retries is not None:
        core.count(retries, "retries")


def check_sensor_arguments(
    *,
    name: Any,
    label_selector: Any,
    namespace: Any,
    target_phases: Any,
    phases: Collection[str],
    deferrable: Any,
    **connection: Any,
) -> None:
    """Check every ``JobSetSensor`` argument of its own (``BaseSensorOperator`` checks
    ``poke_interval``, ``timeout`` and ``mode``).

    Raises:
        InvalidArgument: naming the argument (or ``ValueError`` for the pair of them).
    """
    if (name is None) == (label_selector is None):
        raise ValueError("JobSetSensor: give exactly one of name and label_selector")
    _name(name, "name")
    _labels(label_selector)
    _namespace(namespace)
    if isinstance(target_phases, str) or not isinstance(target_phases, (list, tuple)):
        raise core.request.wrong_type("target_phases", "a list of phases", target_phases)
    if not target_phases:
        raise InvalidArgument("target_phases", "must name at least one phase")
    for phase in target_phases:
        core.one_of(phase, "target_phases", phases)
    check_connection(**connection)
    _optional_flag(deferrable, "deferrable")


def _labels(selector: Any) -> None:
    if selector is None or is_templated(selector):
        return
    if not isinstance(selector, Mapping) or not selector:
        raise core.request.wrong_type("label_selector", "a non-empty mapping of labels", selector)
    for key, value in selector.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise core.request.wrong_type("label_selector", "a mapping of strings", selector)


def check_rendered(owner: str, **fields: Any) -> None:
    """The templated fields once rendered: now they must be what they stand for (``jobset``,
    ``namespace``, ``name``, ``label_selector``, the connection's).

    Raises:
        TypeError, ValueError: naming the argument (``..., after rendering``).
    """
    checks: dict[str, Callable[[Any], None]] = {
        "jobset": _jobset,
        "namespace": _namespace,
        "name": lambda value: _name(value, "name"),
        "label_selector": _labels,
        "kubernetes_conn_id": lambda value: _text(value, "kubernetes_conn_id"),
        "cluster_context": lambda value: _text(value, "cluster_context"),
        "config_file": lambda value: check_connection(
            kubernetes_conn_id=None, config_file=value, cluster_context=None, in_cluster=None
        ),
    }
    for field, value in fields.items():
        check = checks.get(field)
        if check is None or value is None:
            continue
        try:
            check(value)
        except InvalidArgument as err:
            kind = TypeError if isinstance(err, InvalidArgumentType) else ValueError
            raise kind(f"{owner}({err.argument}=..., after rendering): {err.problem}") from None
