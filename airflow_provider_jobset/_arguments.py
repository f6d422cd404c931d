"""The operator's and the sensor's arguments, checked when the DAG is parsed (pure, no I/O).

Every argument gets its type and range checked at construction, with a ``TypeError`` or
``ValueError`` that names it, so a wrong argument fails the DAG import instead of failing a
task after its JobSet was created. The templated fields (``jobset``, ``namespace``, ``name``,
the sensor's ``label_selector``) may hold Jinja until the task runs: they are checked at
construction when they hold no template, and again after rendering
(:func:`check_rendered_operator`, :func:`check_rendered_sensor`, called from the classes'
``render_template_fields``), before anything is sent to a cluster.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
from collections.abc import Callable, Collection, Mapping
from typing import Any

from jobset_core.backends import BACKEND_CHOICES
from jobset_core.lifecycle import LogOptions, LogTarget
from jobset_core.models import JobSet
from jobset_core.naming import ensure_jobset_name, ensure_namespace
from jobset_core.policy.pod_start import PodStartRules

__all__ = [
    "check_operator_arguments",
    "check_rendered_operator",
    "check_rendered_sensor",
    "check_sensor_arguments",
    "is_templated",
    "log_options",
    "pod_start_rules",
    "seconds_of",
]


def is_templated(value: Any) -> bool:
    """Whether ``value`` (or a string inside it) holds Jinja that rendering will replace."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, Mapping):
        return any(is_templated(k) or is_templated(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(is_templated(item) for item in value)
    return False


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_error(owner: str, argument: str, expected: str, value: Any) -> TypeError:
    return TypeError(
        f"{owner}({argument}=...): must be {expected}, not {type(value).__name__} {_shown(value)}"
    )


def _flag(owner: str, argument: str, value: Any, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, bool):
        expected = "True, False or None" if optional else "True or False"
        raise _type_error(owner, argument, expected, value)


def _text(owner: str, argument: str, value: Any, *, optional: bool = True) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise _type_error(owner, argument, "a string" + (" or None" if optional else ""), value)


def _count(owner: str, argument: str, value: Any) -> None:
    """A whole number >= 0 (``bool`` is not a number here)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise _type_error(owner, argument, "an int >= 0", value)
    if value < 0:
        raise ValueError(f"{owner}({argument}=...): must be >= 0, not {value}")


def _choice(owner: str, argument: str, value: Any, allowed: Collection[str]) -> None:
    if value not in allowed:
        shown = ", ".join(repr(item) for item in allowed)
        raise ValueError(f"{owner}({argument}=...): must be one of {shown}, not {_shown(value)}")


def _dns_name(owner: str, argument: str, value: Any, check: Callable[[object, str], str]) -> None:
    """A namespace or JobSet name, unless it is unset or still a template."""
    if value is None or is_templated(value):
        return
    try:
        check(value, f"{owner}({argument}=...)")
    except TypeError:
        raise _type_error(owner, argument, "a string or None", value) from None


def _jobset(owner: str, value: Any) -> None:
    if not isinstance(value, (JobSet, Mapping, str, os.PathLike)):
        raise _type_error(
            owner,
            "jobset",
            "a JobSet, a mapping, YAML/JSON text or the path of a .yaml/.yml/.json file",
            value,
        )
    if isinstance(value, str) and not value.strip():
        raise ValueError(f"{owner}(jobset=...): must not be empty")


def check_operator_arguments(
    *,
    jobset: Any,
    namespace: Any,
    name: Any,
    backend: Any,
    kubernetes_conn_id: Any,
    config_file: Any,
    cluster_context: Any,
    in_cluster: Any,
    deferrable: Any,
    timeout: Any,
    delete_policy: Any,
    delete_policies: Collection[str],
    stream_logs: Any,
    log_replicated_job: Any,
    log_job_index: Any,
    log_pod_index: Any,
    failed_pod_log_lines: Any,
    link_template: Any,
    delete_on_kill: Any,
    retries: Any,
) -> None:
    """Check every ``JobSetOperator`` argument (templated ones only when they hold no
    template).

    Raises:
        TypeError: an argument has the wrong type (the message names it).
        ValueError: an argument is out of range or not one of its choices.
    """
    owner = "JobSetOperator"
    _jobset(owner, jobset)
    _dns_name(owner, "namespace", namespace, ensure_namespace)
    _dns_name(owner, "name", name, ensure_jobset_name)
    _choice(owner, "backend", backend, BACKEND_CHOICES)
    for argument, value in (
        ("kubernetes_conn_id", kubernetes_conn_id),
        ("cluster_context", cluster_context),
        ("log_replicated_job", log_replicated_job),
        ("link_template", link_template),
    ):
        _text(owner, argument, value)
    if config_file is not None and not isinstance(config_file, (str, os.PathLike)):
        raise _type_error(owner, "config_file", "a path or None", config_file)
    _flag(owner, "in_cluster", in_cluster, optional=True)
    _flag(owner, "deferrable", deferrable, optional=True)
    _flag(owner, "stream_logs", stream_logs)
    _flag(owner, "delete_on_kill", delete_on_kill)
    if timeout is not None:
        if not isinstance(timeout, _dt.timedelta):
            raise _type_error(
                owner, "timeout", "a datetime.timedelta or None (e.g. timedelta(hours=6))", timeout
            )
        if timeout <= _dt.timedelta(0):
            raise ValueError(f"{owner}(timeout=...): must be positive, not {timeout}")
    _choice(owner, "delete_policy", delete_policy, delete_policies)
    for argument, value in (
        ("log_job_index", log_job_index),
        ("log_pod_index", log_pod_index),
        ("failed_pod_log_lines", failed_pod_log_lines),
    ):
        _count(owner, argument, value)
    if retries is not None:
        _count(owner, "retries", retries)


def check_rendered_operator(*, jobset: Any, namespace: Any, name: Any) -> None:
    """The templated fields once rendered: now they must be what they stand for.

    Raises:
        TypeError, ValueError: as :func:`check_operator_arguments`.
    """
    owner = "JobSetOperator"
    _jobset(owner, jobset)
    for argument, value, check in (
        ("namespace", namespace, ensure_namespace),
        ("name", name, ensure_jobset_name),
    ):
        if value is not None:
            check(value, f"{owner}({argument}=..., after rendering)")


def check_sensor_arguments(
    *,
    name: Any,
    label_selector: Any,
    namespace: Any,
    target_phases: Any,
    phases: Collection[str],
    backend: Any,
    kubernetes_conn_id: Any,
    deferrable: Any,
) -> None:
    """Check every ``JobSetSensor`` argument of its own (``BaseSensorOperator`` checks
    ``poke_interval``, ``timeout`` and ``mode``).

    Raises:
        TypeError: an argument has the wrong type (the message names it).
        ValueError: an argument is out of range or not one of its choices.
    """
    owner = "JobSetSensor"
    if (name is None) == (label_selector is None):
        raise ValueError(f"{owner}: give exactly one of name and label_selector")
    _dns_name(owner, "name", name, ensure_jobset_name)
    _labels(owner, label_selector)
    _dns_name(owner, "namespace", namespace, ensure_namespace)
    if isinstance(target_phases, str) or not isinstance(target_phases, (list, tuple)):
        raise _type_error(owner, "target_phases", "a list of phases", target_phases)
    if not target_phases:
        raise ValueError(f"{owner}(target_phases=...): must name at least one phase")
    for phase in target_phases:
        _choice(owner, "target_phases", phase, phases)
    _choice(owner, "backend", backend, BACKEND_CHOICES)
    _text(owner, "kubernetes_conn_id", kubernetes_conn_id)
    _flag(owner, "deferrable", deferrable, optional=True)


def _labels(owner: str, selector: Any) -> None:
    if selector is None or is_templated(selector):
        return
    if not isinstance(selector, Mapping) or not selector:
        raise _type_error(owner, "label_selector", "a non-empty mapping of labels", selector)
    for key, value in selector.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise _type_error(owner, "label_selector", "a mapping of strings", selector)


def check_rendered_sensor(*, name: Any, namespace: Any, label_selector: Any) -> None:
    """The sensor's templated fields once rendered.

    Raises:
        TypeError, ValueError: as :func:`check_sensor_arguments`.
    """
    owner = "JobSetSensor"
    if name is not None:
        ensure_jobset_name(name, f"{owner}(name=..., after rendering)")
    if namespace is not None:
        ensure_namespace(namespace, f"{owner}(namespace=..., after rendering)")
    _labels(owner, label_selector)


def seconds_of(owner: str, argument: str, value: Any) -> float | None:
    """A duration argument as seconds: a ``timedelta`` or a number of seconds (``None``:
    never).

    Raises:
        TypeError: neither.
        ValueError: negative.
    """
    if value is None:
        return None
    if isinstance(value, _dt.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise _type_error(owner, argument, "a datetime.timedelta, seconds or None", value)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{owner}({argument}=...): must be 0 or more, not {value!r}")
    return seconds


def pod_start_rules(
    owner: str, *, start_grace: Any, pending_timeout: Any, crash_loop_restarts: Any
) -> PodStartRules:
    """The pod start rules of an operator or sensor (see
    :class:`~jobset_core.policy.pod_start.PodStartRules`).

    Raises:
        TypeError, ValueError: naming the argument.
    """
    grace = seconds_of(owner, "start_grace", start_grace)
    pending = seconds_of(owner, "pending_timeout", pending_timeout)
    if crash_loop_restarts is not None:
        if isinstance(crash_loop_restarts, bool) or not isinstance(crash_loop_restarts, int):
            raise _type_error(
                owner, "crash_loop_restarts", "an int >= 1 or None", crash_loop_restarts
            )
        if crash_loop_restarts < 1:
            raise ValueError(
                f"{owner}(crash_loop_restarts=...): must be >= 1 (or None: never), "
                f"not {crash_loop_restarts}"
            )
    return PodStartRules(grace, pending, crash_loop_restarts)


def log_options(
    owner: str,
    *,
    log_pods: Any,
    log_container: Any,
    log_max_pods: Any,
    log_max_bytes_per_second: Any,
    log_max_bytes: Any,
    target: LogTarget,
) -> LogOptions:
    """The log options of an operator (see :class:`~jobset_core.lifecycle.LogOptions`).

    Raises:
        TypeError, ValueError: naming the argument.
    """
    _text(owner, "log_pods", log_pods, optional=False)
    _text(owner, "log_container", log_container)
    for argument, value, optional in (
        ("log_max_pods", log_max_pods, False),
        ("log_max_bytes_per_second", log_max_bytes_per_second, True),
        ("log_max_bytes", log_max_bytes, True),
    ):
        if value is None and optional:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise _type_error(
                owner, argument, "an int >= 1" + (" or None" if optional else ""), value
            )
        if value < 1:
            raise ValueError(f"{owner}({argument}=...): must be >= 1, not {value}")
    try:
        return LogOptions(
            pods=log_pods,
            container=log_container,
            target=target,
            max_pods=log_max_pods,
            max_bytes_per_second=log_max_bytes_per_second,
            max_bytes=log_max_bytes,
        )
    except ValueError as err:
        raise ValueError(f"{owner}(log_pods=... or log_container=...): {err}") from None
