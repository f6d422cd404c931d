"""Models of ``jobset.x-k8s.io/v1alpha2`` as of JobSet v0.12.0 (``api/jobset/v1alpha2``).

Every spec and status field is here, with Go enums as ``Literal`` types. Fields the API
leaves optional are ``None`` when absent: the models hold exactly what the user (or the server)
wrote; defaults are applied explicitly by :func:`jobset_core.with_defaults`, never implicitly.

The embedded ``batch/v1`` Job template keeps its ``spec`` as plain data: it is checked against
the Kubernetes ``batch/v1`` schema by validation, and stays lossless for Job fields newer
than any model.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    field_serializer,
    field_validator,
    model_serializer,
)

from jobset_core.models._base import Bool, Int32, K8sModel, NonNegInt32, Str, to_plain
from jobset_core.models.meta import Condition, EmbeddedObjectMeta, ObjectMeta
from jobset_core.resources import JOBSET

__all__ = [
    "DEPENDS_ON_STATUSES",
    "FAILURE_POLICY_ACTIONS",
    "JOB_FAILURE_REASONS",
    "RESTART_STRATEGIES",
    "Coordinator",
    "DependsOn",
    "DependsOnStatus",
    "FailurePolicy",
    "FailurePolicyAction",
    "FailurePolicyRule",
    "JobFailureReason",
    "JobSet",
    "JobSetSpec",
    "JobSetStatus",
    "JobTemplateSpec",
    "Network",
    "ReplicatedJob",
    "ReplicatedJobStatus",
    "RestartStrategy",
    "StartupPolicy",
    "StartupPolicyOrder",
    "SuccessPolicy",
    "SuccessPolicyOperator",
    "TerminalState",
    "VolumeClaimPolicy",
    "VolumeClaimRetentionPolicy",
]

SuccessPolicyOperator = Literal["All", "Any"]
FailurePolicyAction = Literal[
    "FailJobSet",
    "RestartJobSet",
    "RestartJobSetAndIgnoreMaxRestarts",
    "RestartJob",
    "RestartJobAndIgnoreMaxRestarts",
]
RestartStrategy = Literal["Recreate", "BlockingRecreate", "InPlaceRestart"]
StartupPolicyOrder = Literal["AnyOrder", "InOrder"]
DependsOnStatus = Literal["Ready", "Complete"]
JobFailureReason = Literal[
    "BackoffLimitExceeded",
    "DeadlineExceeded",
    "FailedIndexes",
    "MaxFailedIndexesExceeded",
    "PodFailurePolicy",
]
TerminalState = Literal["", "Completed", "Failed"]
RetentionWhenDeleted = Literal["Delete", "Retain"]

FAILURE_POLICY_ACTIONS: tuple[str, ...] = FailurePolicyAction.__args__  # type: ignore[attr-defined]
RESTART_STRATEGIES: tuple[str, ...] = RestartStrategy.__args__  # type: ignore[attr-defined]
JOB_FAILURE_REASONS: tuple[str, ...] = JobFailureReason.__args__  # type: ignore[attr-defined]
DEPENDS_ON_STATUSES: tuple[str, ...] = DependsOnStatus.__args__  # type: ignore[attr-defined]


class JobTemplateSpec(K8sModel):
    """``batch/v1 JobTemplateSpec``: metadata (embedded) and the Job spec as plain data.

    In memory the spec keeps what the user wrote, ``null`` values included, so validation reads
    them as the API server does (an absent field, an empty map entry, or an unknown field, which
    the server refuses); a dump leaves null fields out.
    """

    metadata: EmbeddedObjectMeta | None = None
    spec: dict[str, Any] = Field(default_factory=dict)

    @field_validator("spec", mode="before")
    @classmethod
    def _plain_spec(cls, value: Any) -> Any:
        return to_plain(value, keep_none=True)

    @field_serializer("spec")
    def _dump_spec(self, spec: dict[str, Any]) -> Any:
        return to_plain(spec)


class DependsOn(K8sModel):
    """``replicatedJobs[].dependsOn[]``: start only after ``name`` is Ready or Complete."""

    name: Str
    status: DependsOnStatus


class ReplicatedJob(K8sModel):
    """One group of identical child Jobs (``replicas`` copies of ``template``)."""

    name: Str
    group_name: Str | None = None
    template: JobTemplateSpec
    replicas: NonNegInt32 | None = None
    depends_on: list[DependsOn] | None = None


class Network(K8sModel):
    """Pod-to-pod networking through a headless Service."""

    enable_dns_hostnames: Bool | None = Field(default=None, alias="enableDNSHostnames")
    subdomain: Str | None = None
    publish_not_ready_addresses: Bool | None = None


class SuccessPolicy(K8sModel):
    """When the JobSet counts as completed."""

    operator: SuccessPolicyOperator
    target_replicated_jobs: list[Str] | None = None


class FailurePolicyRule(K8sModel):
    """One rule of the failure policy; the first rule matching a failed Job decides."""

    name: Str | None = None
    action: FailurePolicyAction
    on_job_failure_reasons: list[JobFailureReason] | None = None
    on_job_failure_message_patterns: list[Str] | None = None
    target_replicated_jobs: list[Str] | None = None


class FailurePolicy(K8sModel):
    """What happens when a child Job fails."""

    max_restarts: Int32 | None = None
    restart_strategy: RestartStrategy | None = None
    rules: list[FailurePolicyRule] | None = None


class StartupPolicy(K8sModel):
    """Deprecated upstream in favour of ``dependsOn``; still served."""

    startup_policy_order: StartupPolicyOrder


class Coordinator(K8sModel):
    """The pod whose stable DNS name is published as the coordinator endpoint."""

    replicated_job: Str
    job_index: Int32 | None = None
    pod_index: Int32 | None = None


class VolumeClaimRetentionPolicy(K8sModel):
    """What happens to the claims when the JobSet is deleted."""

    when_deleted: RetentionWhenDeleted | None = None


class VolumeClaimPolicy(K8sModel):
    """PersistentVolumeClaims created for (and mounted into) the child Jobs."""

    templates: list[dict[str, Any]] | None = None
    retention_policy: VolumeClaimRetentionPolicy | None = None

    @field_validator("templates", mode="before")
    @classmethod
    def _plain_templates(cls, value: Any) -> Any:
        return to_plain(value, keep_none=True)

    @field_serializer("templates")
    def _dump_templates(self, templates: list[dict[str, Any]] | None) -> Any:
        return to_plain(templates)


class JobSetSpec(K8sModel):
    """``JobSetSpec``."""

    replicated_jobs: list[ReplicatedJob] | None = None
    network: Network | None = None
    success_policy: SuccessPolicy | None = None
    failure_policy: FailurePolicy | None = None
    startup_policy: StartupPolicy | None = None
    suspend: Bool | None = None
    coordinator: Coordinator | None = None
    managed_by: Str | None = None
    ttl_seconds_after_finished: NonNegInt32 | None = None
    volume_claim_policies: list[VolumeClaimPolicy] | None = None


class ReplicatedJobStatus(K8sModel):
    """Counts of one replicated job's child Jobs in the current restart attempt."""

    name: Str
    ready: Int32 = 0
    succeeded: Int32 = 0
    failed: Int32 = 0
    active: Int32 = 0
    suspended: Int32 = 0
    job_restarts: list[Int32] | None = None
    job_restarts_count_towards_max: list[Int32] | None = None


class JobSetStatus(K8sModel):
    """``JobSetStatus``."""

    conditions: list[Condition] | None = None
    restarts: Int32 | None = None
    restarts_count_towards_max: Int32 | None = None
    terminal_state: TerminalState | None = None
    replicated_jobs_status: list[ReplicatedJobStatus] | None = None
    previous_in_place_restart_attempt: Int32 | None = None
    current_in_place_restart_attempt: Int32 | None = None

    def condition(self, type_: str) -> Condition | None:
        """The condition of that type, if present."""
        for cond in self.conditions or []:
            if cond.type == type_:
                return cond
        return None


class JobSet(K8sModel):
    """A ``jobset.x-k8s.io/v1alpha2`` JobSet."""

    api_version: Literal["jobset.x-k8s.io/v1alpha2"] = JOBSET.api_version  # type: ignore[assignment]
    kind: Literal["JobSet"] = "JobSet"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: JobSetSpec = Field(default_factory=JobSetSpec)
    status: JobSetStatus | None = None

    @model_serializer(mode="wrap")
    def _omit_unwritten(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # ``metadata`` and ``spec`` default to empty objects for convenience; a dump shows them
        # only when written (or filled in since), so a document without them round-trips.
        data: dict[str, Any] = handler(self)
        # The attribute behind ``model_fields_set``, which pydantic 2.6 (our floor) types as
        # a method.
        written = self.__pydantic_fields_set__
        for key in ("metadata", "spec"):
            if key not in written and data.get(key) == {}:
                del data[key]
        return data

    @property
    def name(self) -> str:
        """``metadata.name`` (empty when only ``generateName`` is set)."""
        return self.metadata.name or ""

    @property
    def replicated_jobs(self) -> list[ReplicatedJob]:
        """``spec.replicatedJobs`` (empty list when absent)."""
        return self.spec.replicated_jobs or []

    def replicated_job(self, name: str) -> ReplicatedJob | None:
        """The replicated job of that name, if any."""
        for rjob in self.replicated_jobs:
            if rjob.name == name:
                return rjob
        return None
