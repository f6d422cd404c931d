"""Which run an object is, as pure functions: names, identity labels, adoption.

A run is named once, deterministically, from its caller's identity (:func:`resolve_name`), so
a retried or resumed caller names the same object again and adopts it instead of creating a
duplicate; :func:`stamp_identity` puts the name and the identity labels on a JobSet,
:func:`adoption_problem` decides whether an existing object may be adopted (labels and, when
known, UID), :func:`leftovers` lists what of a run still exists. Nothing here performs I/O.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from jobset_core import labels as L
from jobset_core.errors import IdentityMismatch, Problem, SpecError
from jobset_core.models import JobSet
from jobset_core.naming import dns1035_label_errors, label_value_errors

__all__ = [
    "IDENTITY_PREFIX",
    "NAME_HASH_LENGTH",
    "adoption_problem",
    "identity_labels",
    "jobset_selector",
    "label_safe",
    "leftovers",
    "resolve_name",
    "spec_fingerprint",
    "stamp_identity",
]

#: Prefix of identity label keys given without one (``run-id`` → ``jobset-core/run-id``).
IDENTITY_PREFIX = "jobset-core/"
#: Hex digits of the identity hash in a deterministic name.
NAME_HASH_LENGTH = 10
#: The longest name derived from an identity: child Job and pod names add to it, and the
#: webhook checks those, so derived names stay short (``<prefix>-<hash>``).
_DERIVED_NAME_MAX = 40
_DEFAULT_NAME_PREFIX = "jobset"


def label_safe(value: str) -> str:
    """``value`` when it is a valid label value, else a deterministic valid stand-in.

    The stand-in keeps the value's readable characters (up to 40) and appends 10 hex digits of
    its SHA-256, so different values never share a stand-in in practice and the same value
    always gets the same one (an Airflow run id such as ``manual__2024-01-01T00:00:00+00:00``
    has ``:`` and ``+``, which labels do not allow).
    """
    if not label_value_errors(value):
        return value
    digest = hashlib.sha256(value.encode()).hexdigest()[:NAME_HASH_LENGTH]
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "-", value)[:40].strip("-_.")
    return f"{readable}-{digest}" if readable else f"h-{digest}"


def identity_labels(identity: Mapping[str, str] | None) -> dict[str, str]:
    """The labels that mark an object as made for ``identity``.

    Keys without a ``/`` get :data:`IDENTITY_PREFIX`; values go through :func:`label_safe`.

    Raises:
        ValueError: a key is empty or its name part is not a valid label name.
    """
    out: dict[str, str] = {}
    for key, value in (identity or {}).items():
        full = key if "/" in key else IDENTITY_PREFIX + key
        name = full.rsplit("/", 1)[1]
        if (
            not name
            or len(name) > 63
            or not re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", name)
        ):
            raise ValueError(f"identity key {key!r} is not a valid label name")
        out[full] = label_safe(str(value))
    return out


def _identity_hash(identity: Mapping[str, str]) -> str:
    canonical = json.dumps(sorted((str(k), str(v)) for k, v in identity.items()))
    return hashlib.sha256(canonical.encode()).hexdigest()[:NAME_HASH_LENGTH]


def resolve_name(jobset: JobSet, identity: Mapping[str, str] | None) -> str:
    """The name to create the JobSet under.

    ``metadata.name`` when given. Otherwise a deterministic name from the identity:
    ``<generateName without its trailing '-', or 'jobset'>-<10 hex of the identity's hash>``,
    so a retry of the same run names the same object (``generateName`` would make a duplicate).

    Raises:
        SpecError: neither a name nor an identity to derive one from.
    """
    if jobset.metadata.name:
        return jobset.metadata.name
    if not identity:
        raise SpecError(
            [
                Problem(
                    "metadata.name",
                    "Required value: give metadata.name, or an identity to derive a "
                    "deterministic name from (generateName alone cannot be retried safely)",
                    "idempotent-name",
                )
            ]
        )
    prefix = (jobset.metadata.generate_name or _DEFAULT_NAME_PREFIX).rstrip("-")
    prefix = prefix[: _DERIVED_NAME_MAX - NAME_HASH_LENGTH - 1].rstrip("-")
    if not prefix or dns1035_label_errors(prefix):
        prefix = _DEFAULT_NAME_PREFIX
    return f"{prefix}-{_identity_hash(identity)}"


def stamp_identity(
    jobset: JobSet, namespace: str, identity: Mapping[str, str] | None
) -> tuple[JobSet, dict[str, str]]:
    """A copy of ``jobset`` named (see :func:`resolve_name`) and labelled with its identity.

    Returns:
        The JobSet to create and the identity labels it carries.

    Raises:
        SpecError: no usable name, or ``metadata.namespace`` differs from ``namespace``.
        ValueError: an identity key is not a valid label name.
    """
    written = jobset.metadata.namespace
    if written and written != namespace:
        raise SpecError(
            [
                Problem(
                    "metadata.namespace",
                    f"the JobSet's namespace {written!r} does not match {namespace!r}",
                    "namespace",
                )
            ]
        )
    name = resolve_name(jobset, identity)
    marks = identity_labels(identity)
    metadata = jobset.metadata.model_copy(
        update={
            "name": name,
            "generate_name": None,
            "namespace": namespace,
            "labels": {**(jobset.metadata.labels or {}), **marks},
        }
    )
    return jobset.model_copy(update={"metadata": metadata}), marks


def spec_fingerprint(jobset: JobSet) -> str:
    """16 hex digits of the SHA-256 of the JobSet's name and spec: a content identity (the
    same manifest run twice is the same run)."""
    data = {
        "name": jobset.metadata.name or jobset.metadata.generate_name,
        "spec": jobset.spec.to_dict(),
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def adoption_problem(
    *,
    kind: str,
    namespace: str,
    name: str,
    labels: Mapping[str, str] | None,
    uid: str | None,
    expected_labels: Mapping[str, str],
    expected_uid: str | None,
) -> IdentityMismatch | None:
    """Whether an existing object may be adopted as ours; the error to raise when not.

    It may when every expected identity label has the expected value and, when a UID is
    expected, the UIDs are equal. Without any identity label and without a UID there is
    nothing to prove the object is ours: never adopted.
    """
    if expected_uid and uid != expected_uid:
        why = f"its uid is {uid or 'unknown'}, expected {expected_uid}"
        return IdentityMismatch(kind, namespace, name, why)
    if not expected_labels and not expected_uid:
        why = "no identity was given to prove it was created for this run"
        return IdentityMismatch(kind, namespace, name, why)
    have = labels or {}
    wrong = sorted(k for k, v in expected_labels.items() if have.get(k) != v)
    if wrong:
        shown = ", ".join(f"{k}={have.get(k)!r} (expected {expected_labels[k]!r})" for k in wrong)
        return IdentityMismatch(kind, namespace, name, f"identity labels differ: {shown}")
    return None


def jobset_selector(name: str, uid: str | None = None) -> dict[str, str]:
    """Label selector of a JobSet's Jobs and pods (by UID too when known: no namesake's)."""
    selector = {L.JOBSET_NAME: name}
    if uid:
        selector[L.JOBSET_UID] = uid
    return selector


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _label(obj: Mapping[str, Any], key: str) -> str | None:
    found = _meta(obj).get("labels") or {}
    value = found.get(key) if isinstance(found, Mapping) else None
    return str(value) if value is not None else None


def _owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    refs = _meta(obj).get("ownerReferences") or []
    return any(isinstance(r, Mapping) and r.get("uid") == uid for r in refs)


def leftovers(
    uid: str,
    *,
    jobsets: Iterable[JobSet] = (),
    jobs: Iterable[Mapping[str, Any]] = (),
    pods: Iterable[Mapping[str, Any]] = (),
    services: Iterable[Mapping[str, Any]] = (),
) -> list[str]:
    """What of a run (JobSet ``uid``) still exists, as ``kind/name``, from listed objects.

    Jobs and pods count when they carry the JobSet's ``jobset-uid`` label or an owner
    reference to it (pods are owned by their Job, so the label is what ties them); Services
    when the JobSet owns them (a pre-existing Service of the subdomain's name is not ours).
    """
    out = [f"jobset/{js.name}" for js in jobsets if js.metadata.uid == uid]
    for kind, items in (("job", jobs), ("pod", pods)):
        out.extend(
            f"{kind}/{_meta(o).get('name')}"
            for o in items
            if _label(o, L.JOBSET_UID) == uid or _owned_by(o, uid)
        )
    out.extend(f"service/{_meta(s).get('name')}" for s in services if _owned_by(s, uid))
    return out
