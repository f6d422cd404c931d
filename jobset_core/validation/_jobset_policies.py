"""The webhook's create rules for the failure policy, the coordinator and volume claims.

Mirrors ``validateFailurePolicy``, ``validateCoordinator``, ``validateCoordinatorLabelValue``
and ``validateVolumeClaimPolicies`` of ``pkg/webhooks/jobset_webhook.go`` (v0.12.0), plus the
CRD's ``maxItems`` and CEL rule on ``volumeClaimPolicies``. Where upstream stops at the first
error (coordinator, a RestartJob action without its gate) every problem is reported. Not
mirrored: the comparison with an already existing PersistentVolumeClaim (needs the cluster).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import NamedTuple

from jobset_core.labels import COORDINATOR
from jobset_core.models import JobSet
from jobset_core.models.jobset import JOB_FAILURE_REASONS
from jobset_core.validation import _names
from jobset_core.validation._common import (
    Collector,
    Loc,
    as_int,
    as_list,
    as_map,
    as_str,
    effective_name,
)

__all__ = ["check_coordinator", "check_failure_policy", "check_volume_claim_policies"]

_MAX_RESTART_JOB_REPLICAS = 1024
_MAX_VOLUME_CLAIM_POLICIES = 50
_MAX_PVC_NAME = 63
_RULE_NAME_RE = re.compile("[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?")


def check_failure_policy(
    out: Collector, js: JobSet, names: Collection[str], gates: Mapping[str, bool]
) -> None:
    policy = js.spec.failure_policy
    if policy is None:
        return
    if not gates["InPlaceRestart"] and policy.restart_strategy == "InPlaceRestart":
        out.add(
            ("spec", "failurePolicy", "restartStrategy"),
            "InPlaceRestart restart strategy cannot be set "
            "when InPlaceRestart feature gate is disabled",
            "in-place-restart-gate",
        )
    rules = policy.rules or []
    restart_job = [
        i
        for i, r in enumerate(rules)
        if r.action in ("RestartJob", "RestartJobAndIgnoreMaxRestarts")
    ]
    for index in restart_job if not gates["RestartJob"] else []:
        out.add(
            ("spec", "failurePolicy", "rules", index, "action"),
            "RestartJob and RestartJobAndIgnoreMaxRestarts failure policy actions are not allowed "
            "when RestartJob feature gate is disabled",
            "restart-job-gate",
        )
    if restart_job and gates["RestartJob"]:
        for index, rjob in enumerate(js.replicated_jobs):
            if (rjob.replicas or 0) > _MAX_RESTART_JOB_REPLICAS:
                out.add(
                    ("spec", "replicatedJobs", index, "replicas"),
                    "JobSet cannot have a failure policy rule with RestartJob or "
                    "RestartJobAndIgnoreMaxRestarts action and a replicated job with replicas "
                    f"> {_MAX_RESTART_JOB_REPLICAS}",
                    "restart-job-replicas",
                )
    first_with_name: dict[str, int] = {}
    for index, rule in enumerate(rules):
        _check_rule(out, rule.name or "", index, first_with_name)
        loc: Loc = ("spec", "failurePolicy", "rules", index)
        for target_index, target in enumerate(rule.target_replicated_jobs or []):
            if target not in names:
                out.add(
                    (*loc, "targetReplicatedJobs", target_index),
                    f"invalid replicatedJob name '{target}' in failure policy does not appear in "
                    ".spec.ReplicatedJobs",
                    "failure-rule-target",
                )
        for reason_index, reason in enumerate(rule.on_job_failure_reasons or []):
            if reason not in JOB_FAILURE_REASONS:
                out.add(
                    (*loc, "onJobFailureReasons", reason_index),
                    f"invalid job failure reason '{reason}' in failure policy is not a recognized "
                    "job failure reason",
                    "failure-rule-reason",
                )


def _check_rule(out: Collector, name: str, index: int, first_with_name: dict[str, int]) -> None:
    loc: Loc = ("spec", "failurePolicy", "rules", index, "name")
    if not 1 <= len(name) <= 128:
        out.add(
            loc,
            f"invalid failure policy rule name of length {len(name)}, the rule name must be at "
            "least 1 characters long and at most 128 characters long",
            "failure-rule-name",
        )
    if not _RULE_NAME_RE.fullmatch(name):
        out.add(
            loc,
            f"invalid failure policy rule name '{name}', a failure policy rule name must start "
            "with an alphabetic character, optionally followed by a string of alphanumeric "
            "characters or '_,:', and must end with an alphanumeric character or '_'",
            "failure-rule-name",
        )
    if name in first_with_name:
        out.add(
            loc,
            f"rule names are not unique, rules with indices [{first_with_name[name]} {index}] all "
            f"have the same name '{name}'",
            "failure-rule-name-unique",
        )
    first_with_name.setdefault(name, index)


def check_coordinator(out: Collector, js: JobSet) -> None:
    coord = js.spec.coordinator
    if coord is None:
        return
    loc: Loc = ("spec", "coordinator")
    job_index, pod_index = coord.job_index or 0, coord.pod_index or 0
    rjob = js.replicated_job(coord.replicated_job)
    if rjob is None:
        out.add(
            (*loc, "replicatedJob"),
            f"coordinator replicatedJob {coord.replicated_job} does not exist",
            "coordinator",
        )
    else:
        spec = rjob.template.spec
        completions = as_int(spec.get("completions"))
        if not 0 <= job_index < (rjob.replicas or 0):
            out.add(
                (*loc, "jobIndex"),
                f"coordinator job index {job_index} is invalid for replicatedJob {rjob.name}",
                "coordinator",
            )
        if spec.get("completionMode") != "Indexed" or completions is None:
            out.add(
                (*loc, "replicatedJob"),
                "job for coordinator pod must be indexed completion mode, "
                "and completions number must be set",
                "coordinator",
            )
        elif not 0 <= pod_index < completions:
            out.add(
                (*loc, "podIndex"),
                f"coordinator pod index {pod_index} is invalid for replicatedJob "
                f"{coord.replicated_job} job index {job_index}",
                "coordinator",
            )
    name = effective_name(js)
    subdomain = (js.spec.network.subdomain if js.spec.network else None) or name
    endpoint = f"{name}-{coord.replicated_job}-{job_index}-{pod_index}.{subdomain}"
    errors = _names.label_value(endpoint)
    if errors:
        out.add(
            loc,
            f"spec will lead to invalid label value {endpoint!r} for coordinator label "
            f"{COORDINATOR!r} (long JobSet / ReplicatedJob / SubDomain name?): {', '.join(errors)}",
            "coordinator-label",
        )


def check_volume_claim_policies(out: Collector, js: JobSet) -> None:
    policies = js.spec.volume_claim_policies or []
    if len(policies) > _MAX_VOLUME_CLAIM_POLICIES:
        out.add(
            ("spec", "volumeClaimPolicies"),
            f"Too many: {len(policies)}: must have at most {_MAX_VOLUME_CLAIM_POLICIES} items",
            "volume-claim-max-items",
        )
    seen: set[str] = set()
    found = _pod_volumes(js) if policies else _PodVolumes({}, set())
    for policy_index, policy in enumerate(policies):
        templates = policy.templates or []
        ploc: Loc = ("spec", "volumeClaimPolicies", policy_index, "templates")
        if policy.templates is None:
            # The CRD's CEL rule reads templates, which must then exist.
            out.add(
                ploc,
                "no such key: templates evaluating rule: namespace cannot be set for "
                "VolumeClaimPolicies templates",
                "volume-claim-namespace",
            )
        if len(templates) > _MAX_VOLUME_CLAIM_POLICIES:
            out.add(
                ploc,
                f"Too many: {len(templates)}: must have at most 50 items",
                "volume-claim-max-items",
            )
        for index, template in enumerate(templates):
            meta = as_map(as_map(template).get("metadata"))
            name = as_str(meta.get("name")) or ""
            _check_claim(out, js, name, (*ploc, index, "metadata"), (seen, found))
            if meta.get("namespace"):
                out.add(
                    (*ploc, index, "metadata", "namespace"),
                    "namespace cannot be set for VolumeClaimPolicies templates",
                    "volume-claim-namespace",
                )
            seen.add(name)


class _PodVolumes(NamedTuple):
    """The pod templates' volumes (each name's paths) and the names their mounts give."""

    volumes: dict[str, list[Loc]]
    mounted: set[str]


def _pod_volumes(js: JobSet) -> _PodVolumes:
    """Read once for all claim templates: their number times the replicated jobs' would be
    quadratic in the input."""
    volumes: dict[str, list[Loc]] = {}
    mounted: set[str] = set()
    for rj_index, rjob in enumerate(js.replicated_jobs):
        pod = as_map(as_map(rjob.template.spec.get("template")).get("spec"))
        loc: Loc = ("spec", "replicatedJobs", rj_index, "template", "spec", "template", "spec")
        for vol_index, volume in enumerate(as_list(pod.get("volumes"))):
            name = as_map(volume).get("name")
            if isinstance(name, str):
                volumes.setdefault(name, []).append((*loc, "volumes", vol_index, "name"))
        for key in ("initContainers", "containers"):
            for ctr in as_list(pod.get(key)):
                for mount in as_list(as_map(ctr).get("volumeMounts")):
                    name = as_map(mount).get("name")
                    if isinstance(name, str):
                        mounted.add(name)
    return _PodVolumes(volumes, mounted)


def _check_claim(
    out: Collector, js: JobSet, name: str, loc: Loc, known: tuple[set[str], _PodVolumes]
) -> None:
    seen, found = known
    nloc = (*loc, "name")
    if name in seen:
        out.add(nloc, "names must be unique for VolumeClaimPolicies template", "volume-claim-name")
    out.extend(nloc, _names.dns1123_subdomain(name), "volume-claim-name")
    if len(f"{name}-{effective_name(js)}") > _MAX_PVC_NAME:
        out.add(nloc, "VolumeClaimPolicies template name is too long", "volume-claim-name")
    for volume_loc in found.volumes.get(name, []):
        out.add(
            volume_loc,
            f"volume name conflicts with VolumeClaimPolicy template name: {name}",
            "volume-claim-conflict",
        )
    mounted = name in found.mounted
    if not mounted:
        out.add(
            nloc,
            "replicatedJob containers don't have a matching volumeMount: "
            f"{name} from VolumeClaimPolicies",
            "volume-claim-unmounted",
        )
