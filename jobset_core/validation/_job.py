"""The Kubernetes Job rules that upstream JobSet only meets when it creates the child Jobs.

The JobSet webhook does not validate the embedded Job template; a template the API server
would reject as a Job is accepted as part of the JobSet and then fails every reconcile with a
``JobCreationFailed`` event, while the JobSet itself never fails. These rules mirror the
create-time Job validation of Kubernetes (``pkg/apis/batch/validation/validation.go``
``validateJobSpec``/``ValidateJobSpec`` and a subset of ``pkg/apis/core/validation``'s pod
template rules, v1.36), applied to the template as the Job will be created: after the JobSet
defaults (Indexed, ``restartPolicy: OnFailure``) and after Kubernetes' own Job defaulting of
``completions``/``parallelism``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from jobset_core.validation import _names
from jobset_core.validation._common import Collector, Loc, as_int, as_list, as_map, as_str

__all__ = ["check_job_spec", "check_metadata"]

_MAX_INDEXED_PARALLELISM = 100_000
_MAX_FAILED_INDEXES = 100_000
_COMPLETIONS_SOFT_LIMIT = 100_000
_HIGH_COMPLETIONS_LIMIT = 10_000
_MAX_POD_FAILURE_RULES = 20
_MAX_EXIT_CODES = 255
_MAX_POD_CONDITIONS = 20
_MAX_SUCCESS_RULES = 20
_MAX_SUCCEEDED_INDEXES = 64 * 1024

_POD_FAILURE_ACTIONS = ("Count", "FailIndex", "FailJob", "Ignore")
_EXIT_CODE_OPERATORS = ("In", "NotIn")
_CONDITION_STATUSES = ("False", "True", "Unknown")
_REPLACEMENT_POLICIES = ("Failed", "TerminatingOrFailed")
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_PORT_PROTOCOLS = ("SCTP", "TCP", "UDP")
_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
_JOBSET_PREFIX = "jobset.sigs.k8s.io/"


def _unsupported(value: Any, supported: Collection[str]) -> str:
    shown = ", ".join(f'"{item}"' for item in sorted(supported))
    return f"Unsupported value: {value!r}: supported values: {shown}"


def check_job_spec(
    out: Collector,
    spec: Mapping[str, Any],
    loc: Loc,
    *,
    mode_defaulted: bool,
    claim_names: Collection[str],
    added_labels: Mapping[str, str],
) -> None:
    """Check one (defaulted) Job template spec.

    Args:
        out: Where problems go.
        spec: ``replicatedJobs[i].template.spec`` after :func:`jobset_core.with_defaults`.
        loc: Location of ``spec``.
        mode_defaulted: ``completionMode`` was set by the JobSet default, not by the user.
        claim_names: ``volumeClaimPolicies`` template names (JobSet adds those volumes).
        added_labels: Pod-template labels the JobSet controller adds with the same value to
            every Job of this replicated job (used to evaluate a manual ``selector``).
    """
    completions, parallelism = as_int(spec.get("completions")), as_int(spec.get("parallelism"))
    if spec.get("completions") is None and spec.get("parallelism") is None:
        completions = parallelism = 1  # SetDefaults_Job
    _check_counts(out, spec, loc)
    mode = spec.get("completionMode")
    if mode not in ("Indexed", "NonIndexed"):
        out.add(
            (*loc, "completionMode"),
            _unsupported(mode, ("Indexed", "NonIndexed")),
            "job-completion-mode",
        )
    if mode == "Indexed":
        _check_indexed(out, spec, loc, (completions, parallelism), mode_defaulted)
    elif mode == "NonIndexed":
        for key in ("backoffLimitPerIndex", "maxFailedIndexes"):
            if spec.get(key) is not None:
                out.add((*loc, key), "requires indexed completion mode", "job-requires-indexed")
    if spec.get("podFailurePolicy") is not None:
        _check_pod_failure_policy(out, spec, (*loc, "podFailurePolicy"))
    if spec.get("successPolicy") is not None:
        if mode != "Indexed":
            out.add(
                (*loc, "successPolicy"), "requires indexed completion mode", "job-requires-indexed"
            )
        elif completions is not None:
            _check_success_policy(
                out, as_map(spec["successPolicy"]), completions, (*loc, "successPolicy")
            )
    _check_replacement_and_restart(out, spec, loc)
    _check_selector(out, spec, loc, added_labels)
    pod_template = as_map(spec.get("template"))
    check_metadata(out, as_map(pod_template.get("metadata")), (*loc, "template", "metadata"))
    if isinstance(pod_template.get("spec"), Mapping):
        _check_pod_spec(out, pod_template["spec"], (*loc, "template", "spec"), claim_names)


def _check_counts(out: Collector, spec: Mapping[str, Any], loc: Loc) -> None:
    for key in (
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
    ):
        value = as_int(spec.get(key))
        if value is not None and value < 0:
            out.add((*loc, key), "must be greater than or equal to 0", "job-nonnegative")
    if spec.get("maxFailedIndexes") is not None and spec.get("backoffLimitPerIndex") is None:
        out.add(
            (*loc, "backoffLimitPerIndex"),
            "Required value: when maxFailedIndexes is specified",
            "job-backoff-limit-per-index-required",
        )
    managed_by = as_str(spec.get("managedBy"))
    if managed_by is not None:
        out.extend((*loc, "managedBy"), _names.domain_prefixed_path(managed_by), "job-managed-by")
        if len(managed_by) > 63:
            out.add((*loc, "managedBy"), _names.max_len(63), "job-managed-by")


def _check_indexed(
    out: Collector,
    spec: Mapping[str, Any],
    loc: Loc,
    counts: tuple[int | None, int | None],
    mode_defaulted: bool,
) -> None:
    completions, parallelism = counts
    max_failed = as_int(spec.get("maxFailedIndexes"))
    if spec.get("completions") is None and completions is None:
        hint = (
            " (JobSet defaults completionMode to Indexed: set completions, usually equal to "
            "parallelism, or set completionMode: NonIndexed)"
            if mode_defaulted
            else ""
        )
        out.add(
            (*loc, "completions"),
            f"Required value: when completion mode is Indexed{hint}",
            "job-indexed-completions",
        )
    if parallelism is not None and parallelism > _MAX_INDEXED_PARALLELISM:
        out.add(
            (*loc, "parallelism"),
            f"must be less than or equal to {_MAX_INDEXED_PARALLELISM} "
            "when completion mode is Indexed",
            "job-indexed-parallelism",
        )
    if completions is not None and max_failed is not None and max_failed > completions:
        out.add(
            (*loc, "maxFailedIndexes"),
            "must be less than or equal to completions",
            "job-max-failed-indexes",
        )
    if max_failed is not None and max_failed > _MAX_FAILED_INDEXES:
        out.add(
            (*loc, "maxFailedIndexes"),
            f"must be less than or equal to {_MAX_FAILED_INDEXES}",
            "job-max-failed-indexes",
        )
    if (
        completions is not None
        and completions > _COMPLETIONS_SOFT_LIMIT
        and spec.get("backoffLimitPerIndex") is not None
    ):
        suffix = (
            f"when completions are above {_COMPLETIONS_SOFT_LIMIT} "
            "and used with backoff limit per index"
        )
        if spec.get("maxFailedIndexes") is None:
            out.add(
                (*loc, "maxFailedIndexes"),
                "Required value: must be specified when completions is above "
                f"{_COMPLETIONS_SOFT_LIMIT}",
                "job-max-failed-indexes",
            )
        if parallelism is not None and parallelism > _HIGH_COMPLETIONS_LIMIT:
            out.add(
                (*loc, "parallelism"),
                f"must be less than or equal to {_HIGH_COMPLETIONS_LIMIT} {suffix}",
                "job-indexed-parallelism",
            )
        if max_failed is not None and max_failed > _HIGH_COMPLETIONS_LIMIT:
            out.add(
                (*loc, "maxFailedIndexes"),
                f"must be less than or equal to {_HIGH_COMPLETIONS_LIMIT} {suffix}",
                "job-max-failed-indexes",
            )


def _check_pod_failure_policy(out: Collector, spec: Mapping[str, Any], loc: Loc) -> None:
    rules = as_list(as_map(spec.get("podFailurePolicy")).get("rules"))
    if len(rules) > _MAX_POD_FAILURE_RULES:
        out.add(
            (*loc, "rules"),
            f"Too many: {len(rules)}: must have at most {_MAX_POD_FAILURE_RULES} items",
            "job-pod-failure-policy",
        )
    pod_spec = as_map(as_map(spec.get("template")).get("spec"))
    names: set[Any] = {
        as_map(c).get("name")
        for key in ("containers", "initContainers")
        for c in as_list(pod_spec.get(key))
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
                _unsupported(action, _POD_FAILURE_ACTIONS),
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
    out: Collector, on_exit: Mapping[str, Any], loc: Loc, names: set[Any]
) -> None:
    operator = on_exit.get("operator")
    if not operator:
        out.add((*loc, "operator"), "Required value", "job-pod-failure-policy")
    elif operator not in _EXIT_CODE_OPERATORS:
        out.add(
            (*loc, "operator"),
            _unsupported(operator, _EXIT_CODE_OPERATORS),
            "job-pod-failure-policy",
        )
    container = on_exit.get("containerName")
    if container is not None and container not in names:
        out.add(
            (*loc, "containerName"),
            "must be one of the container or initContainer names in the pod template",
            "job-pod-failure-policy",
        )
    values = [as_int(v) for v in as_list(on_exit.get("values"))]
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
                _unsupported(status, _CONDITION_STATUSES),
                "job-pod-failure-policy",
            )


def _check_success_policy(
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


def _check_replacement_and_restart(out: Collector, spec: Mapping[str, Any], loc: Loc) -> None:
    has_pfp = spec.get("podFailurePolicy") is not None
    replacement = spec.get("podReplacementPolicy")
    if replacement is not None:
        allowed = ("Failed",) if has_pfp else _REPLACEMENT_POLICIES
        if replacement not in allowed:
            out.add(
                (*loc, "podReplacementPolicy"),
                _unsupported(replacement, allowed),
                "job-pod-replacement-policy",
            )
    restart_loc = (*loc, "template", "spec", "restartPolicy")
    pod_spec = as_map(as_map(spec.get("template")).get("spec"))
    restart = pod_spec.get("restartPolicy")
    if restart in ("Always", "", None):
        out.add(
            restart_loc, 'Required value: valid values: "OnFailure", "Never"', "job-restart-policy"
        )
    elif restart not in ("OnFailure", "Never"):
        out.add(restart_loc, _unsupported(restart, ("OnFailure", "Never")), "job-restart-policy")
    elif has_pfp and restart != "Never":
        hint = " (JobSet defaults it to OnFailure)" if "restartPolicy" in pod_spec else ""
        out.add(
            restart_loc,
            f'only "Never" is supported when podFailurePolicy is specified{hint}',
            "job-restart-policy",
        )


def _check_selector(
    out: Collector, spec: Mapping[str, Any], loc: Loc, added_labels: Mapping[str, str]
) -> None:
    # Without manualSelector the API server generates the selector (controller-uid); a user
    # selector is then rejected as "`selector` not auto-generated".
    manual = spec.get("manualSelector") is True
    selector = spec.get("selector")
    if manual and selector is None:
        out.add((*loc, "selector"), "Required value: when manualSelector is true", "job-selector")
    if not manual and selector is not None and as_map(selector):
        out.add(
            (*loc, "selector"),
            "`selector` not auto-generated: the API server generates a unique selector for "
            "each Job; remove it, or set manualSelector: true",
            "job-selector",
        )
    if manual and selector is not None:
        labels = {
            **as_map(as_map(as_map(spec.get("template")).get("metadata")).get("labels")),
            **added_labels,
        }
        if not _selector_matches(as_map(selector), labels):
            out.add(
                (*loc, "template", "metadata", "labels"),
                "`selector` does not match template `labels`",
                "job-selector",
            )


def _selector_matches(selector: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    keys: set[Any] = {*as_map(selector.get("matchLabels"))}
    keys |= {as_map(expr).get("key") for expr in as_list(selector.get("matchExpressions"))}
    if any(isinstance(k, str) and k.startswith(_JOBSET_PREFIX) and k not in labels for k in keys):
        return True  # a per-Job JobSet label (job-index, uid...): cannot be decided here
    for key, value in as_map(selector.get("matchLabels")).items():
        if labels.get(key) != value:
            return False
    for raw in as_list(selector.get("matchExpressions")):
        expr = as_map(raw)
        label, operator, values = (
            str(expr.get("key")),
            expr.get("operator"),
            as_list(expr.get("values")),
        )
        present = label in labels
        if (
            (operator == "In" and labels.get(label) not in values)
            or (operator == "NotIn" and present and labels.get(label) in values)
            or (operator == "Exists" and not present)
            or (operator == "DoesNotExist" and present)
        ):
            return False
    return True


def check_metadata(out: Collector, metadata: Mapping[str, Any], loc: Loc) -> None:
    """Label keys and values, annotation keys (``ValidateObjectMeta``)."""
    for key, value in as_map(metadata.get("labels")).items():
        out.extend((*loc, "labels", key), _names.qualified_name(str(key)), "label-key")
        if isinstance(value, str):
            out.extend((*loc, "labels", key), _names.label_value(value), "label-value")
    for key in as_map(metadata.get("annotations")):
        out.extend((*loc, "annotations", key), _names.qualified_name(str(key)), "annotation-key")


def _check_pod_spec(
    out: Collector, pod: Mapping[str, Any], loc: Loc, claim_names: Collection[str]
) -> None:
    if (
        "containers" in pod
        and not as_list(pod.get("containers"))
        and isinstance(pod.get("containers"), list)
    ):
        out.add(
            (*loc, "containers"),
            "Required value: a Job's pod needs at least one container",
            "pod-containers",
        )
    # Duplicates inside one list (volumes, containers) are reported by the schema check: the
    # CRD declares those lists as maps keyed by name.
    volumes = set(claim_names)
    for index, raw in enumerate(as_list(pod.get("volumes"))):
        name = as_str(as_map(raw).get("name"))
        if name is not None:
            out.extend(
                (*loc, "volumes", index, "name"), _names.dns1123_label(name), "pod-volume-name"
            )
            volumes.add(name)
    earlier: set[str] = set()
    for key in _CONTAINER_LISTS:
        current: set[str] = set()
        for index, raw in enumerate(as_list(pod.get(key))):
            _check_container(out, as_map(raw), (*loc, key, index), earlier, volumes)
            current.add(str(as_map(raw).get("name")))
        earlier |= current
    for key, value in as_map(pod.get("nodeSelector")).items():
        out.extend((*loc, "nodeSelector", key), _names.qualified_name(str(key)), "label-key")
        if isinstance(value, str):
            out.extend((*loc, "nodeSelector", key), _names.label_value(value), "label-value")


def _check_container(
    out: Collector, ctr: Mapping[str, Any], loc: Loc, names: set[str], volumes: set[str]
) -> None:
    name = as_str(ctr.get("name"))
    if name:
        out.extend((*loc, "name"), _names.dns1123_label(name), "container-name")
        if name in names:
            out.add(
                (*loc, "name"),
                f"Duplicate value: {name!r} (container names are unique across containers, "
                "initContainers and ephemeralContainers)",
                "container-name",
            )
    elif name == "":
        out.add((*loc, "name"), "Required value", "container-name")
    if not ctr.get("image"):
        out.add((*loc, "image"), "Required value", "container-image")
    pull = ctr.get("imagePullPolicy")
    if pull is not None and pull not in _PULL_POLICIES:
        out.add(
            (*loc, "imagePullPolicy"),
            _unsupported(pull, _PULL_POLICIES),
            "container-image-pull-policy",
        )
    _check_ports(out, as_list(ctr.get("ports")), (*loc, "ports"))
    for index, raw in enumerate(as_list(ctr.get("env"))):
        if as_map(raw).get("name") == "":
            out.add((*loc, "env", index, "name"), "Required value", "container-env")
    for index, raw in enumerate(as_list(ctr.get("volumeMounts"))):
        mount = as_map(raw)
        mount_name = as_str(mount.get("name"))
        if mount_name is not None and mount_name not in volumes:
            out.add(
                (*loc, "volumeMounts", index, "name"),
                f"Not found: {mount_name!r} "
                "(no volume or volumeClaimPolicies template of that name)",
                "container-volume-mount",
            )
        if mount.get("mountPath") == "":
            out.add(
                (*loc, "volumeMounts", index, "mountPath"),
                "Required value",
                "container-volume-mount",
            )


def _check_ports(out: Collector, ports: list[Any], loc: Loc) -> None:
    names: set[str] = set()
    for index, raw in enumerate(ports):
        port, port_loc = as_map(raw), (*loc, index)
        name = as_str(port.get("name"))
        if name:
            errors = _names.port_name(name)
            out.extend((*port_loc, "name"), errors, "container-port")
            if not errors and name in names:
                out.add((*port_loc, "name"), f"Duplicate value: {name!r}", "container-port")
            names.add(name)
        for key in ("containerPort", "hostPort"):
            number = as_int(port.get(key))
            if (
                number is not None
                and not (key == "hostPort" and number == 0)
                and not 1 <= number <= 65535
            ):
                out.add(
                    (*port_loc, key), "must be between 1 and 65535, inclusive", "container-port"
                )
        protocol = port.get("protocol")
        if protocol is not None and protocol not in _PORT_PROTOCOLS:
            out.add(
                (*port_loc, "protocol"), _unsupported(protocol, _PORT_PROTOCOLS), "container-port"
            )
