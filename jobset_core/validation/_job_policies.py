"""Kubernetes Job validation of ``podFailurePolicy`` and ``successPolicy`` (v1.36).

Mirrors ``validatePodFailurePolicy``, ``validateSuccessPolicy`` and ``validateIndexesFormat`` of
``pkg/apis/batch/validation/validation.go``, with the API server's messages. Duplicate exit
codes are reported by the schema check (the CRD declares ``values`` a set).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobset_core.validation import _names
from jobset_core.validation._common import (
    Collector,
    Loc,
    as_int,
    as_list,
    as_map,
    as_str,
    unsupported,
)

__all__ = ["check_pod_failure_policy", "check_success_policy"]

_MAX_POD_FAILURE_RULES = 20
_MAX_EXIT_CODES = 255
_MAX_POD_CONDITIONS = 20
_MAX_SUCCESS_RULES = 20
_MAX_SUCCEEDED_INDEXES = 64 * 1024
_POD_FAILURE_ACTIONS = ("Count", "FailIndex", "FailJob", "Ignore")
_EXIT_CODE_OPERATORS = ("In", "NotIn")
_CONDITION_STATUSES = ("False", "True", "Unknown")


def check_pod_failure_policy(out: Collector, spec: Mapping[str, Any], loc: Loc) -> None:
    rules = as_list(as_map(spec.get("podFailurePolicy")).get("rules"))
    if len(rules) > _MAX_POD_FAILURE_RULES:
        out.add(
            (*loc, "rules"),
            f"Too many: {len(rules)}: must have at most {_MAX_POD_FAILURE_RULES} items",
            "job-pod-failure-policy",
        )
    pod_spec = as_map(as_map(spec.get("template")).get("spec"))
    names = {
        name
        for key in ("containers", "initContainers")
        for c in as_list(pod_spec.get(key))
        if (name := as_str(as_map(c).get("name"))) is not None
    }
    for index, raw in enumerate(rules):
        rule, rule_loc = as_map(raw), (*loc, "rules", index)
        action = rule.get("action")
        if not action:
            out.add((*rule_loc, "action"), "Required value", "job-pod-failure-policy")
        elif action == "FailIndex" and spec.get("backoffLimitPerIndex") is None:
            out.add(
                (*rule_loc, "action"),
                "requires the backoffLimitPerIndex to be set",
                "job-pod-failure-policy",
            )
        elif action not in _POD_FAILURE_ACTIONS:
            out.add(
                (*rule_loc, "action"),
                unsupported(action, _POD_FAILURE_ACTIONS),
                "job-pod-failure-policy",
            )
        on_exit = rule.get("onExitCodes")
        on_conditions = as_list(rule.get("onPodConditions"))
        if on_exit is not None:
            _check_on_exit_codes(out, as_map(on_exit), (*rule_loc, "onExitCodes"), names)
        _check_on_pod_conditions(out, on_conditions, (*rule_loc, "onPodConditions"))
        if on_exit is not None and on_conditions:
            out.add(
                rule_loc,
                "specifying both OnExitCodes and OnPodConditions is not supported",
                "job-pod-failure-policy",
            )
        if on_exit is None and not on_conditions:
            out.add(
                rule_loc,
                "specifying one of OnExitCodes and OnPodConditions is required",
                "job-pod-failure-policy",
            )


def _check_on_exit_codes(
    out: Collector, on_exit: Mapping[str, Any], loc: Loc, names: set[str]
) -> None:
    operator = on_exit.get("operator")
    if not operator:
        out.add((*loc, "operator"), "Required value", "job-pod-failure-policy")
    elif operator not in _EXIT_CODE_OPERATORS:
        out.add(
            (*loc, "operator"),
            unsupported(operator, _EXIT_CODE_OPERATORS),
            "job-pod-failure-policy",
        )
    container = as_str(on_exit.get("containerName"))
    if container is not None and container not in names:
        out.add(
            (*loc, "containerName"),
            "must be one of the container or initContainer names in the pod template",
            "job-pod-failure-policy",
        )
    # A null item is decoded as 0 by the API server.
    values = [0 if v is None else as_int(v) for v in as_list(on_exit.get("values"))]
    if not values:
        out.add((*loc, "values"), "at least one value is required", "job-pod-failure-policy")
    elif len(values) > _MAX_EXIT_CODES:
        out.add(
            (*loc, "values"),
            f"Too many: {len(values)}: must have at most {_MAX_EXIT_CODES} items",
            "job-pod-failure-policy",
        )
    if operator == "In":
        for index, value in enumerate(values):
            if value == 0:
                out.add(
                    (*loc, "values", index),
                    "must not be 0 for the In operator",
                    "job-pod-failure-policy",
                )
    known = [v for v in values if v is not None]
    if known != sorted(known):
        out.add((*loc, "values"), "must be ordered", "job-pod-failure-policy")


def _check_on_pod_conditions(out: Collector, patterns: list[Any], loc: Loc) -> None:
    if len(patterns) > _MAX_POD_CONDITIONS:
        out.add(
            loc,
            f"Too many: {len(patterns)}: must have at most {_MAX_POD_CONDITIONS} items",
            "job-pod-failure-policy",
        )
    for index, raw in enumerate(patterns):
        pattern = as_map(raw)
        type_ = as_str(pattern.get("type"))
        if type_ is not None:
            out.extend(
                (*loc, index, "type"), _names.qualified_name(type_), "job-pod-failure-policy"
            )
        status = pattern.get("status")  # SetDefaults_PodFailurePolicyOnPodConditionsPattern: True
        if status and status not in _CONDITION_STATUSES:
            out.add(
                (*loc, index, "status"),
                unsupported(status, _CONDITION_STATUSES),
                "job-pod-failure-policy",
            )


def check_success_policy(
    out: Collector, policy: Mapping[str, Any], completions: int, loc: Loc
) -> None:
    rules = as_list(policy.get("rules"))
    if not rules:
        out.add(
            (*loc, "rules"),
            "Required value: at least one rules must be specified "
            "when the successPolicy is specified",
            "job-success-policy",
        )
    if len(rules) > _MAX_SUCCESS_RULES:
        out.add(
            (*loc, "rules"),
            f"Too many: {len(rules)}: must have at most {_MAX_SUCCESS_RULES} items",
            "job-success-policy",
        )
    for index, raw in enumerate(rules):
        rule, rule_loc = as_map(raw), (*loc, "rules", index)
        count, indexes = as_int(rule.get("succeededCount")), as_str(rule.get("succeededIndexes"))
        if rule.get("succeededCount") is None and rule.get("succeededIndexes") is None:
            out.add(
                rule_loc,
                "at least one of succeededCount or succeededIndexes must be specified",
                "job-success-policy",
            )
        total = 0
        if indexes is not None:
            if len(indexes) > _MAX_SUCCEEDED_INDEXES:
                out.add(
                    (*rule_loc, "succeededIndexes"),
                    f"Too long: may not be more than {_MAX_SUCCEEDED_INDEXES} bytes",
                    "job-success-policy",
                )
            try:
                total = _count_indexes(indexes, completions)
            except ValueError as err:
                out.add(
                    (*rule_loc, "succeededIndexes"),
                    f"error parsing succeededIndexes: {err}",
                    "job-success-policy",
                )
        if count is not None:
            path = (*rule_loc, "succeededCount")
            if count < 0:
                out.add(path, "must be greater than or equal to 0", "job-success-policy")
            if count > completions:
                out.add(
                    path,
                    f"must be less than or equal to {completions} "
                    "(the number of specified completions)",
                    "job-success-policy",
                )
            if indexes is not None and count > total:
                out.add(
                    path,
                    f"must be less than or equal to {total} "
                    "(the number of indexes in the specified succeededIndexes field)",
                    "job-success-policy",
                )


def _count_indexes(text: str, completions: int) -> int:
    """``validateIndexesFormat``: ``"1,3-5"`` style intervals, increasing, below completions."""
    if not text:
        return 0
    last, total = None, 0
    for interval in text.split(","):
        bounds = interval.split("-")
        if len(bounds) > 2:
            raise ValueError(
                f"the fragment {interval!r} violates the requirement that an index interval can "
                "have at most two parts separated by '-'"
            )
        numbers = []
        for bound in bounds:
            if not bound.isdigit():
                raise ValueError(f"cannot convert string to integer for index: {bound!r}")
            if int(bound) >= completions:
                raise ValueError(f"too large index: {bound!r}")
            numbers.append(int(bound))
        first, end = numbers[0], numbers[-1]
        if len(numbers) == 2 and first >= end:
            raise ValueError(f"non-increasing order, previous: {first}, current: {end}")
        if last is not None and last >= first:
            raise ValueError(f"non-increasing order, previous: {last}, current: {first}")
        total += end - first + 1
        last = end
    return total
