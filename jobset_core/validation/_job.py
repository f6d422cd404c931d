"""The Kubernetes Job rules that upstream JobSet only meets when it creates the child Jobs.

The JobSet webhook does not validate the embedded Job template; a template the API server
would reject as a Job is accepted as part of the JobSet and then fails every reconcile with a
``JobCreationFailed`` event, while the JobSet itself never fails. These rules mirror the
create-time Job validation of Kubernetes (``pkg/apis/batch/validation/validation.go``
``validateJobSpec``/``ValidateJobSpec``, v1.36; the Job's policies are in
:mod:`._job_policies`, the pod template in :mod:`._pod`), applied to the template as the Job
will be created: after the JobSet defaults (Indexed, ``restartPolicy: OnFailure``) and after
Kubernetes' own Job defaulting of ``completions``/``parallelism``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
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
from jobset_core.validation._job_policies import check_pod_failure_policy, check_success_policy
from jobset_core.validation._pod import check_metadata, check_pod_spec

__all__ = ["check_job_spec"]

_MAX_INDEXED_PARALLELISM = 100_000
_MAX_FAILED_INDEXES = 100_000
_COMPLETIONS_SOFT_LIMIT = 100_000
_HIGH_COMPLETIONS_LIMIT = 10_000
_REPLACEMENT_POLICIES = ("Failed", "TerminatingOrFailed")
_JOBSET_PREFIX = "jobset.sigs.k8s.io/"


def check_job_spec(
    out: Collector,
    spec: Mapping[str, Any],
    loc: Loc,
    *,
    mode_defaulted: bool,
    claim_names: Collection[str],
    added_labels: Mapping[str, str],
    added_annotations: Mapping[str, str] | None = None,
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
        added_annotations: The annotations the controller adds to the pod template (they
            count towards its size limit).
    """
    completions, parallelism = as_int(spec.get("completions")), as_int(spec.get("parallelism"))
    if spec.get("completions") is None and spec.get("parallelism") is None:
        completions = parallelism = 1  # SetDefaults_Job
    _check_counts(out, spec, loc)
    mode = spec.get("completionMode")
    if mode not in ("Indexed", "NonIndexed"):
        out.add(
            (*loc, "completionMode"),
            unsupported(mode, ("Indexed", "NonIndexed")),
            "job-completion-mode",
        )
    if mode == "Indexed":
        _check_indexed(out, spec, loc, (completions, parallelism), mode_defaulted)
    elif mode == "NonIndexed":
        for key in ("backoffLimitPerIndex", "maxFailedIndexes"):
            if spec.get(key) is not None:
                out.add((*loc, key), "requires indexed completion mode", "job-requires-indexed")
    if spec.get("podFailurePolicy") is not None:
        check_pod_failure_policy(out, spec, (*loc, "podFailurePolicy"))
    if spec.get("successPolicy") is not None:
        if mode != "Indexed":
            out.add(
                (*loc, "successPolicy"), "requires indexed completion mode", "job-requires-indexed"
            )
        elif completions is not None:
            check_success_policy(
                out, as_map(spec["successPolicy"]), completions, (*loc, "successPolicy")
            )
    _check_replacement_and_restart(out, spec, loc)
    _check_selector(out, spec, loc, added_labels)
    pod_template = as_map(spec.get("template"))
    check_metadata(
        out,
        as_map(pod_template.get("metadata")),
        (*loc, "template", "metadata"),
        added=added_annotations,
    )
    if isinstance(pod_template.get("spec"), Mapping):
        check_pod_spec(out, pod_template["spec"], (*loc, "template", "spec"), claim_names)


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


def _check_replacement_and_restart(out: Collector, spec: Mapping[str, Any], loc: Loc) -> None:
    has_pfp = spec.get("podFailurePolicy") is not None
    replacement = spec.get("podReplacementPolicy")
    if replacement is not None:
        allowed = ("Failed",) if has_pfp else _REPLACEMENT_POLICIES
        if replacement not in allowed:
            out.add(
                (*loc, "podReplacementPolicy"),
                unsupported(replacement, allowed),
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
        out.add(restart_loc, unsupported(restart, ("OnFailure", "Never")), "job-restart-policy")
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
    keys |= {str(as_map(expr).get("key")) for expr in as_list(selector.get("matchExpressions"))}
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
