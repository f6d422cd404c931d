"""``metav1`` shapes used by JobSet: object metadata, owner references, conditions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, field_validator

from jobset_core.models._base import Bool, Int32, Int64, K8sModel, Str

__all__ = ["Condition", "EmbeddedObjectMeta", "ObjectMeta", "OwnerReference"]


class OwnerReference(K8sModel):
    """``metav1.OwnerReference``."""

    api_version: Str
    kind: Str
    name: Str
    uid: Str
    controller: Bool | None = None
    block_owner_deletion: Bool | None = None


class ObjectMeta(K8sModel):
    """``metav1.ObjectMeta`` of a top-level object (all fields the API server may return)."""

    name: Str | None = None
    generate_name: Str | None = None
    namespace: Str | None = None
    uid: Str | None = None
    resource_version: Str | None = None
    generation: Int64 | None = None
    creation_timestamp: Str | None = None
    deletion_timestamp: Str | None = None
    deletion_grace_period_seconds: Int64 | None = None
    labels: dict[Str, Str] | None = None
    annotations: dict[Str, Str] | None = None
    owner_references: list[OwnerReference] | None = None
    finalizers: list[Str] | None = None
    managed_fields: list[dict[str, Any]] | None = None
    self_link: Str | None = None

    @field_validator("labels", "annotations", mode="before")
    @classmethod
    def _null_entry_is_empty(cls, value: Any) -> Any:
        return _empty_for_null(value)


class EmbeddedObjectMeta(K8sModel):
    """Metadata of an embedded template.

    The JobSet CRD is generated with ``generateEmbeddedObjectMeta=true``: the API server keeps
    only these five fields of a template's metadata and prunes the rest.
    """

    name: Str | None = None
    namespace: Str | None = None
    labels: dict[Str, Str] | None = None
    annotations: dict[Str, Str] | None = None
    finalizers: list[Str] | None = None

    @field_validator("labels", "annotations", mode="before")
    @classmethod
    def _null_entry_is_empty(cls, value: Any) -> Any:
        return _empty_for_null(value)


def _empty_for_null(value: Any) -> Any:
    # The API server decodes a null map entry as the empty string.
    if isinstance(value, Mapping):
        return {key: "" if item is None else item for key, item in value.items()}
    return value


class Condition(K8sModel):
    """``metav1.Condition``."""

    type: Str
    status: Literal["True", "False", "Unknown"]
    reason: Str = ""
    message: Str = ""
    last_transition_time: Str | None = None
    observed_generation: Int32 | None = Field(default=None)
