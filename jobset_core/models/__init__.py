"""Typed models of ``jobset.x-k8s.io/v1alpha2`` (JobSet v0.12.0) and how to load them."""

from jobset_core.models._base import K8sModel, to_plain, unknown_fields
from jobset_core.models._input import load_yaml_documents, read_bounded
from jobset_core.models.jobset import (
    Coordinator,
    DependsOn,
    FailurePolicy,
    FailurePolicyRule,
    JobSet,
    JobSetSpec,
    JobSetStatus,
    JobTemplateSpec,
    Network,
    ReplicatedJob,
    ReplicatedJobStatus,
    StartupPolicy,
    SuccessPolicy,
    VolumeClaimPolicy,
    VolumeClaimRetentionPolicy,
)
from jobset_core.models.loading import (
    JobSetSource,
    dump_yaml,
    load_jobset,
    load_jobsets,
    read_stream,
    source_label,
)
from jobset_core.models.meta import Condition, EmbeddedObjectMeta, ObjectMeta, OwnerReference

__all__ = [
    "Condition",
    "Coordinator",
    "DependsOn",
    "EmbeddedObjectMeta",
    "FailurePolicy",
    "FailurePolicyRule",
    "JobSet",
    "JobSetSource",
    "JobSetSpec",
    "JobSetStatus",
    "JobTemplateSpec",
    "K8sModel",
    "Network",
    "ObjectMeta",
    "OwnerReference",
    "ReplicatedJob",
    "ReplicatedJobStatus",
    "StartupPolicy",
    "SuccessPolicy",
    "VolumeClaimPolicy",
    "VolumeClaimRetentionPolicy",
    "dump_yaml",
    "load_jobset",
    "load_jobsets",
    "load_yaml_documents",
    "read_bounded",
    "read_stream",
    "source_label",
    "to_plain",
    "unknown_fields",
]
