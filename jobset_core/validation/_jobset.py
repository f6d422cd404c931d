"""The JobSet's own rules: the upstream validating webhook's ``ValidateCreate`` and the CRD.

Mirrors ``pkg/webhooks/jobset_webhook.go`` (v0.12.0) and the CRD's schema/CEL rules, on the
defaulted object (the webhook validates what the mutating webhook produced). Messages are
upstream's where upstream has one; paths point at the field to change (upstream reports many
of these errors without a path).

Every problem is reported, where upstream stops early (coordinator checks, a RestartJob action
without its gate). Where a rule rejects what upstream accepts, it is listed in
:data:`jobset_core.validation.strictness.STRICTNESS` (and nowhere else).

The failure-policy, coordinator and volume-claim rules are in :mod:`._jobset_policies`.
"""

from __future__ import annotations

from collections.abc import Mapping

from jobset_core.labels import EXCLUSIVE_TOPOLOGY, GROUP_NAME, JOBSET_NAME, REPLICATED_JOB_NAME
from jobset_core.models import JobSet, ReplicatedJob
from jobset_core.validation import _names
from jobset_core.validation._common import Collector, Loc, as_int, effective_name
from jobset_core.validation._jobset_policies import (
    check_coordinator,
    check_failure_policy,
    check_volume_claim_policies,
)

__all__ = ["added_pod_labels", "check_jobset"]

_MAX_INT32 = 2**31 - 1
_MAX_DEPENDS_ON = 5

_JOB_NAME_TOO_LONG = (
    "JobSet name is too long, job names generated for this JobSet will exceed 63 characters"
)
_POD_NAME_TOO_LONG = (
    "JobSet name is too long, pod names generated for this JobSet will exceed 63 characters"
)
_GROUP_NAME_TOO_LONG = (
    ".spec.replicatedJob[].groupName is too long, must be less than 63 characters"
)
_SUBDOMAIN_TOO_LONG = ".spec.network.subdomain is too long, must be less than 63 characters"


def check_jobset(out: Collector, js: JobSet, gates: Mapping[str, bool]) -> None:
    """Check a defaulted JobSet against the webhook's create rules and the CRD's rules."""
    name_ok = _check_name(out, js)
    _check_network(out, js)
    _check_managed_by(out, js)
    # Each name's first index (a replicated job may depend only on an earlier one): lookups
    # stay constant-time, so thousands of replicated jobs cost linear time.
    names: dict[str, int] = {}
    for index, rjob in enumerate(js.replicated_jobs):
        names.setdefault(rjob.name, index)
    _check_replicated_job_list(out, js)
    for index, rjob in enumerate(js.replicated_jobs):
        loc: Loc = ("spec", "replicatedJobs", index)
        _check_sizes(out, js, rjob, loc, name_ok)
        _check_depends_on(out, rjob, names, (loc, index))
        if gates["InPlaceRestart"] and _restart_strategy(js) == "InPlaceRestart":
            _check_in_place_restart(out, rjob, loc)
    for index, target in enumerate(_success_targets(js)):
        if target not in names:
            out.add(
                ("spec", "successPolicy", "targetReplicatedJobs", index),
                f"invalid replicatedJob name '{target}' does not appear in .spec.ReplicatedJobs",
                "success-policy-target",
            )
    check_failure_policy(out, js, names, gates)
    check_coordinator(out, js)
    check_volume_claim_policies(out, js)
    _check_exclusive_topology(out, js)


def _check_name(out: Collector, js: JobSet) -> bool:
    meta = js.metadata
    if not meta.name and not meta.generate_name:
        out.add(
            ("metadata", "name"), "Required value: name or generateName is required", "jobset-name"
        )
        return False
    loc: Loc = ("metadata", "name") if meta.name else ("metadata", "generateName")
    errors = [
        e for e in _names.dns1035_label(effective_name(js)) if not e.startswith("must be no more")
    ]
    out.extend(loc, errors, "jobset-name")
    if meta.namespace:
        out.extend(("metadata", "namespace"), _names.dns1123_label(meta.namespace), "namespace")
    return not errors


def _check_network(out: Collector, js: JobSet) -> None:
    subdomain = js.spec.network.subdomain if js.spec.network else None
    dns = js.spec.network is None or js.spec.network.enable_dns_hostnames is not False
    if not subdomain and dns and len(effective_name(js)) > 63:
        # The headless Service is named after the JobSet (and selects its jobset-name label).
        out.add(
            ("metadata", "name"),
            f"{_names.max_len(63)}: it names the headless Service (set spec.network.subdomain)",
            "jobset-name",
        )
    if not subdomain:
        return
    loc: Loc = ("spec", "network", "subdomain")
    out.extend(loc, _names.dns1123_subdomain(subdomain), "subdomain")
    for message in _names.dns1035_label(subdomain):
        out.add(
            loc,
            _SUBDOMAIN_TOO_LONG if message.startswith("must be no more") else message,
            "subdomain",
        )


def _check_managed_by(out: Collector, js: JobSet) -> None:
    manager = js.spec.managed_by
    if manager is None:
        return
    out.extend(("spec", "managedBy"), _names.domain_prefixed_path(manager), "managed-by")
    if len(manager) > 63:
        out.add(("spec", "managedBy"), "Too long: may not be more than 63 bytes", "managed-by")


def _check_replicated_job_list(out: Collector, js: JobSet) -> None:
    # CRD: listType=map keyed by name; the CEL rule on spec; dependsOn maxItems/listType=map.
    seen: dict[str, int] = {}
    for index, rjob in enumerate(js.replicated_jobs):
        if rjob.name in seen:
            out.add(
                ("spec", "replicatedJobs", index),
                f'Duplicate value: {{"name": "{rjob.name}"}} '
                f"(same as replicatedJobs[{seen[rjob.name]}])",
                "replicated-job-duplicate",
            )
        seen.setdefault(rjob.name, index)
    startup = js.spec.startup_policy
    in_order = startup is not None and startup.startup_policy_order == "InOrder"
    if in_order and js.spec.replicated_jobs is None:
        # The CRD's CEL rule reads spec.replicatedJobs, which must then exist.
        out.add(
            ("spec", "replicatedJobs"),
            "no such key: replicatedJobs evaluating rule: StartupPolicy and DependsOn APIs are "
            "mutually exclusive",
            "startup-policy-depends-on",
        )
    if in_order and any(rjob.depends_on is not None for rjob in js.replicated_jobs):
        out.add(
            ("spec", "startupPolicy", "startupPolicyOrder"),
            "StartupPolicy and DependsOn APIs are mutually exclusive",
            "startup-policy-depends-on",
        )
    ttl = js.spec.ttl_seconds_after_finished
    if ttl is not None and ttl < 0:
        out.add(("spec", "ttlSecondsAfterFinished"), "should be greater than or equal to 0", "ttl")


def _check_sizes(out: Collector, js: JobSet, rjob: ReplicatedJob, loc: Loc, name_ok: bool) -> None:
    replicas = rjob.replicas if rjob.replicas is not None else 1
    spec = rjob.template.spec
    if replicas < 0:
        out.add((*loc, "replicas"), "should be greater than or equal to 0", "replicas")
    parallelism = as_int(spec.get("parallelism")) if spec.get("parallelism") is not None else 1
    if parallelism is not None and parallelism * replicas > _MAX_INT32:
        out.add(
            (*loc, "replicas"),
            f"the product of replicas and parallelism must not exceed {_MAX_INT32} "
            f"for replicatedJob '{rjob.name}'",
            "pods-max-int32",
        )
    # The name is the value of the replicatedjob-name label of every Job and pod.
    out.extend((*loc, "name"), _names.label_value(rjob.name), "replicated-job-name")
    for message in _names.dns1035_label(rjob.group_name or ""):
        too_long = message.startswith("must be no more")
        out.add((*loc, "groupName"), _GROUP_NAME_TOO_LONG if too_long else message, "group-name")
    job_name = f"{effective_name(js)}-{rjob.name}-{replicas - 1}"
    for message in _names.dns1035_label(job_name):
        if message.startswith("must be no more"):
            out.add((*loc, "name"), _JOB_NAME_TOO_LONG, "job-name")
        elif name_ok:  # otherwise metadata.name already says why
            out.add((*loc, "name"), f"generated Job name {job_name!r}: {message}", "job-name")
    completions = as_int(spec.get("completions"))
    if spec.get("completionMode") == "Indexed" and completions is not None:
        pod_name = f"{job_name}-{completions - 1}-abcde"  # + the random suffix
        if len(pod_name) > 63:
            out.add((*loc, "name"), _POD_NAME_TOO_LONG, "pod-name")


def _check_depends_on(
    out: Collector, rjob: ReplicatedJob, names: Mapping[str, int], at: tuple[Loc, int]
) -> None:
    """``names``: each replicated job name's first index; ``at``: this one's path and index."""
    if rjob.depends_on is None:
        return
    loc, position = at
    first = position == 0
    if first:
        out.add(
            (*loc, "dependsOn"),
            "DependsOn can't be set for the first ReplicatedJob",
            "depends-on-first",
        )
    if len(rjob.depends_on) > _MAX_DEPENDS_ON:
        out.add(
            (*loc, "dependsOn"),
            f"Too many: {len(rjob.depends_on)}: must have at most {_MAX_DEPENDS_ON} items",
            "depends-on-max-items",
        )
    seen: set[str] = set()
    for index, dep in enumerate(rjob.depends_on):
        if dep.name in seen:
            out.add(
                (*loc, "dependsOn", index),
                f'Duplicate value: {{"name": "{dep.name}"}}',
                "depends-on-duplicate",
            )
        seen.add(dep.name)
        if dep.name == rjob.name:
            out.add(
                (*loc, "dependsOn", index, "name"),
                f"replicatedJob: {rjob.name} cannot depend on itself (it would wait forever)",
                "depends-on-self",
            )
        elif not first and names.get(dep.name, position) >= position:
            out.add(
                (*loc, "dependsOn", index, "name"),
                f"replicatedJob: {rjob.name} cannot depend on replicatedJob: {dep.name} "
                "(it must name an earlier replicatedJob)",
                "depends-on-order",
            )


def _restart_strategy(js: JobSet) -> str | None:
    return js.spec.failure_policy.restart_strategy if js.spec.failure_policy else None


def _check_in_place_restart(out: Collector, rjob: ReplicatedJob, loc: Loc) -> None:
    spec, tloc = rjob.template.spec, (*loc, "template", "spec")
    if as_int(spec.get("backoffLimit")) != _MAX_INT32:
        out.add(
            (*tloc, "backoffLimit"),
            f"replicatedJob {rjob.name}: must be set to {_MAX_INT32} (MaxInt32) "
            "when in-place restart is enabled",
            "in-place-restart",
        )
    if spec.get("podReplacementPolicy") != "Failed":
        out.add(
            (*tloc, "podReplacementPolicy"),
            f"replicatedJob {rjob.name}: must be set to Failed when in-place restart is enabled",
            "in-place-restart",
        )
    completions, parallelism = as_int(spec.get("completions")), as_int(spec.get("parallelism"))
    if completions is None or parallelism is None or completions != parallelism:
        out.add(
            (*tloc, "completions"),
            f"replicatedJob {rjob.name}: completions and parallelism must be set and equal to each "
            "other when in-place restart is enabled",
            "in-place-restart",
        )


def _success_targets(js: JobSet) -> list[str]:
    policy = js.spec.success_policy
    return list(policy.target_replicated_jobs or []) if policy else []


def added_pod_labels(js: JobSet, rjob: ReplicatedJob) -> dict[str, str]:
    """Pod-template labels the controller adds with one value to every Job of ``rjob``."""
    return {
        JOBSET_NAME: effective_name(js),
        REPLICATED_JOB_NAME: rjob.name,
        GROUP_NAME: rjob.group_name or "default",
    }


def _check_exclusive_topology(out: Collector, js: JobSet) -> None:
    sources: list[tuple[Loc, dict[str, str] | None]] = [
        (("metadata", "annotations"), js.metadata.annotations)
    ]
    for index, rjob in enumerate(js.replicated_jobs):
        meta = rjob.template.metadata
        loc: Loc = ("spec", "replicatedJobs", index, "template", "metadata", "annotations")
        sources.append((loc, meta.annotations if meta else None))
    for loc, values in sources:
        key = (values or {}).get(EXCLUSIVE_TOPOLOGY)
        if key is not None:
            errors = _names.qualified_name(key)
            out.extend(
                (*loc, EXCLUSIVE_TOPOLOGY),
                [
                    f"must be a node label key (the topologyKey of the placement): {e}"
                    for e in errors
                ],
                "exclusive-topology",
            )
