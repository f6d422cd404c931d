"""Validation of a JobSet before anything is sent to a cluster: every problem at once.

:func:`validate` runs, on the object :func:`jobset_core.with_defaults` produces (the upstream
webhook validates the defaulted object too; defaults never move or rename a field, so every
path is one the user wrote or can add):

1. the model's own rules (types, enums, required fields, unknown fields), as loading does;
2. the upstream validating webhook's create rules and the CRD's rules (:mod:`._jobset`);
3. the embedded Job template against the Kubernetes ``batch/v1`` schema of the installed
   ``kubernetes`` client (:mod:`._k8s_schema`), and PVC templates against ``core/v1``;
4. the Kubernetes Job rules that upstream only meets when it creates the child Jobs, as a
   ``JobCreationFailed`` event on a JobSet that never fails (:mod:`._job`).

Each :class:`~jobset_core.errors.Problem` has a field path in API spelling
(``spec.replicatedJobs[1].dependsOn[0].name``), a message and a stable ``rule`` id. Problems
are sorted by path (indexes compared as numbers).

Rule ids:

* input (whole-file problems of :func:`jobset_core.load_jobset`, within
  :mod:`jobset_core.limits`): ``read``, ``file-size``, ``not-utf8``, ``yaml``, ``yaml-depth``,
  ``yaml-aliases``, ``yaml-duplicate-key``, ``too-many-documents``, ``kind``, ``object-size``
  (larger than the API server reads in one request); for Python data ``depth``, ``cycle``,
  ``too-many-nodes``;
* model (as :func:`jobset_core.load_jobset` reports them): ``unknown-field`` and pydantic's
  error types (``literal_error``, ``missing``, ``greater_than_equal``, ...);
* the target namespace (``validate(..., namespace=...)``): ``namespace-mismatch``;
* JobSet (webhook, CRD): ``jobset-name``, ``namespace``, ``subdomain``, ``managed-by``,
  ``replicas``, ``pods-max-int32``, ``group-name``, ``job-name``, ``pod-name``,
  ``replicated-job-duplicate``, ``depends-on-first``, ``depends-on-order``,
  ``depends-on-duplicate``, ``depends-on-max-items``, ``startup-policy-depends-on``,
  ``success-policy-target``, ``in-place-restart-gate``, ``in-place-restart``,
  ``restart-job-gate``, ``restart-job-replicas``, ``failure-rule-name``,
  ``failure-rule-name-unique``, ``failure-rule-target``, ``failure-rule-reason``,
  ``coordinator``, ``coordinator-label``, ``volume-claim-name``, ``volume-claim-unmounted``,
  ``volume-claim-conflict``, ``volume-claim-namespace``, ``volume-claim-max-items``, ``ttl``,
  ``exclusive-topology``, ``depends-on-self``, ``replicated-job-name``;
* Kubernetes schema: ``unknown-field``, ``type``, ``required``, ``quantity``, ``int-range``,
  ``duplicate``;
* Job: ``job-*`` (``job-indexed-completions``, ``job-restart-policy``, ...); pod template:
  ``pod-*``, ``container-*`` (``container-env`` for environment variables),
  ``extended-resource-size``, ``label-key``, ``label-value``, ``annotation-key``,
  ``annotations-size``.

Where a rule rejects what the API server accepts, it is listed in
:data:`.strictness.STRICTNESS`; ``docs/concepts/validation.md`` has the table and the input limits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from jobset_core.defaults import with_defaults
from jobset_core.errors import Problem, SpecError
from jobset_core.models import JobSet, ReplicatedJob, load_jobset
from jobset_core.naming import ensure_namespace
from jobset_core.validation import _job, _jobset, _k8s_schema, _pod
from jobset_core.validation._common import Collector, as_map, as_str, sort_problems

__all__ = ["FEATURE_GATES", "ensure_valid", "sort_problems", "validate"]

#: The upstream controller's feature gates (v0.12.0) and their defaults.
FEATURE_GATES: Mapping[str, bool] = {
    "ElasticJobSet": False,
    "InPlaceRestart": False,
    "RestartJob": False,
    "TLSOptions": True,
}


def validate(
    jobset: JobSet,
    *,
    feature_gates: Mapping[str, bool] | None = None,
    allow_unknown_fields: bool = False,
    namespace: str | None = None,
) -> list[Problem]:
    """Every problem of ``jobset``, as the API server, the upstream webhook and Kubernetes'
    Job validation would find them (and a few they find too late); empty when valid.

    Args:
        jobset: The JobSet as the user wrote it (defaults are applied here, not required).
        feature_gates: The controller's feature gates (``InPlaceRestart``, ``RestartJob``...),
            merged over :data:`FEATURE_GATES`.
        allow_unknown_fields: Accept fields the installed models and ``kubernetes`` client do
            not know (e.g. a Job field newer than the client); they are carried, not checked.
        namespace: The namespace the JobSet will be created in, when known: a
            ``metadata.namespace`` that differs is a problem (the API server refuses it).

    Raises:
        ValueError: ``feature_gates`` names a gate upstream does not have, or ``namespace`` is
            not a valid namespace name.
    """
    gates = _gates(feature_gates)
    out = Collector()
    _check_target_namespace(out, jobset, namespace)
    out.problems.extend(_model_problems(jobset, allow_unknown_fields))
    defaulted = with_defaults(jobset)
    _pod.check_metadata(out, jobset.metadata.to_dict(), ("metadata",))
    _jobset.check_jobset(out, defaulted, gates)
    claims = _claim_names(defaulted)
    added_by_controller = _controller_annotations(defaulted)
    for index, (raw, rjob) in enumerate(
        zip(jobset.replicated_jobs, defaulted.replicated_jobs, strict=True)
    ):
        loc = ("spec", "replicatedJobs", index, "template")
        out.problems.extend(
            _k8s_schema.check_object(
                rjob.template.spec,
                "V1JobSpec",
                (*loc, "spec"),
                allow_unknown_fields=allow_unknown_fields,
            )
        )
        added = added_by_controller[index]
        if rjob.template.metadata is not None:
            _pod.check_metadata(
                out, rjob.template.metadata.to_dict(), (*loc, "metadata"), added=added
            )
        _job.check_job_spec(
            out,
            rjob.template.spec,
            (*loc, "spec"),
            mode_defaulted=raw.template.spec.get("completionMode") is None,
            claim_names=claims,
            added_labels=_jobset.added_pod_labels(defaulted, rjob),
            added_annotations=added,
        )
    for p_index, policy in enumerate(defaulted.spec.volume_claim_policies or []):
        for t_index, template in enumerate(policy.templates or []):
            out.problems.extend(
                _k8s_schema.check_object(
                    template,
                    "V1PersistentVolumeClaim",
                    ("spec", "volumeClaimPolicies", p_index, "templates", t_index),
                    allow_unknown_fields=allow_unknown_fields,
                )
            )
    return sort_problems(out.problems)


def ensure_valid(
    jobset: JobSet,
    *,
    feature_gates: Mapping[str, bool] | None = None,
    allow_unknown_fields: bool = False,
    namespace: str | None = None,
) -> JobSet:
    """Return ``jobset`` unchanged if :func:`validate` finds nothing.

    Raises:
        SpecError: with every problem found.
    """
    problems = validate(
        jobset,
        feature_gates=feature_gates,
        allow_unknown_fields=allow_unknown_fields,
        namespace=namespace,
    )
    if problems:
        raise SpecError(problems)
    return jobset


def _gates(feature_gates: Mapping[str, bool] | None) -> dict[str, bool]:
    unknown = sorted(set(feature_gates or {}) - set(FEATURE_GATES))
    if unknown:
        raise ValueError(f"unknown feature gate(s) {unknown}; known: {sorted(FEATURE_GATES)}")
    return {**FEATURE_GATES, **(feature_gates or {})}


def _check_target_namespace(out: Collector, jobset: JobSet, namespace: str | None) -> None:
    if namespace is None:
        return
    ensure_namespace(namespace)
    written = jobset.metadata.namespace
    if written and written != namespace:
        out.add(
            ("metadata", "namespace"),
            f"the JobSet's namespace {written!r} is not the namespace it is created in "
            f"({namespace!r}); the API server refuses the mismatch",
            "namespace-mismatch",
        )


def _model_problems(jobset: JobSet, allow_unknown_fields: bool) -> list[Problem]:
    # The models check types, enums and required fields on construction, but a JobSet can be
    # built without validation (model_construct) or carry unknown fields: check again.
    try:
        load_jobset(jobset.to_dict(), allow_unknown_fields=allow_unknown_fields)
    except SpecError as err:
        return list(err.problems)
    return []


#: A UID's length (the controller's labels carry the JobSet's, unknown before it is created).
_UID_PLACEHOLDER = "00000000-0000-0000-0000-000000000000"


def _controller_annotations(defaulted: JobSet) -> list[dict[str, str]]:
    """The annotations the controller adds to the Jobs (and pod templates) of each replicated
    job at their first creation, for its last Job (the longest values), in one pass.

    :func:`jobset_core.render.identity` sums the replicas of every replicated job (the global
    and group counts and offsets), so calling it on the JobSet for each replicated job costs
    time quadratic in their number. It is called here on a JobSet of five replicated jobs with
    the same sums instead: padding of this job's group and of another group, before and after
    it (:func:`_same_sums`).
    """
    from jobset_core.render import exclusive_annotations, identity

    rjobs = defaulted.replicated_jobs
    replicas = [_replicas(rjob) for rjob in rjobs]
    groups = [_group(rjob) for rjob in rjobs]
    group_totals: dict[str, int] = {}
    for group, count in zip(groups, replicas, strict=True):
        group_totals[group] = group_totals.get(group, 0) + count
    total = sum(replicas)
    group_offsets: dict[str, int] = {}
    offset = 0
    out: list[dict[str, str]] = []
    for rjob, group, count in zip(rjobs, groups, replicas, strict=True):
        group_offset = group_offsets.get(group, 0)
        sums = _Sums(offset, group_offset, total, group_totals[group])
        last = max(_replicas(rjob) - 1, 0)
        found = identity(
            _same_sums(defaulted, rjob, sums),
            2,
            last,
            "default",
            uid=_UID_PLACEHOLDER,
            restart_attempt=0,
        )
        out.append({**dict(found.values), **exclusive_annotations(defaulted, rjob)})
        offset += count
        group_offsets[group] = group_offset + count
    return out


class _Sums(NamedTuple):
    """Replicas before a replicated job (all, its group's) and in total (all, its group's)."""

    offset: int
    group_offset: int
    total: int
    group_total: int


def _same_sums(defaulted: JobSet, rjob: ReplicatedJob, sums: _Sums) -> JobSet:
    """A JobSet whose replicated job 2 is ``rjob`` with the replicas before and around it that
    ``sums`` gives: ``[its group, another group, rjob, its group, another group]``."""
    group = _group(rjob)
    other = f"{group}-other"
    pads = (
        (group, sums.group_offset),
        (other, sums.offset - sums.group_offset),
        (group, sums.group_total - sums.group_offset - _replicas(rjob)),
        (other, (sums.total - sums.offset) - (sums.group_total - sums.group_offset)),
    )
    padding = [
        ReplicatedJob.model_construct(
            name=f"pad-{i}", replicas=count, group_name=name, template=rjob.template
        )
        for i, (name, count) in enumerate(pads)
    ]
    spec = defaulted.spec.model_copy(
        update={"replicated_jobs": [padding[0], padding[1], rjob, padding[2], padding[3]]}
    )
    return defaulted.model_copy(update={"spec": spec})


def _replicas(rjob: ReplicatedJob) -> int:
    return rjob.replicas if rjob.replicas is not None else 1


def _group(rjob: ReplicatedJob) -> str:
    return rjob.group_name if rjob.group_name is not None else "default"


def _claim_names(jobset: JobSet) -> set[str]:
    names = set()
    for policy in jobset.spec.volume_claim_policies or []:
        for template in policy.templates or []:
            name = as_str(as_map(as_map(template).get("metadata")).get("name"))
            if name:
                names.add(name)
    return names
