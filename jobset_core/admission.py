"""What an admission refusal says: the words of a ``... is forbidden: ...`` (a create the API
server refused), read once for every reader (pure).

The server checks read them from a dry run's answer (:mod:`jobset_core.render`'s probes), the
judge from the Job controller's ``FailedCreate`` Events (:mod:`jobset_core.policy.pod_create`):
which admission step refused (Pod Security, a ResourceQuota, a LimitRange, the ServiceAccount
admission, a webhook or an admission policy, the server's validation), whether waiting can
lift it (a quota the pod fits but the namespace's current use does not), and what is the
cluster's own trouble rather than a refusal (a webhook that cannot be called, a quota not yet
counted, a namespace being deleted): :func:`read_refusal` and :func:`cluster_trouble`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Literal

__all__ = ["Refusal", "RefusalKind", "cluster_trouble", "read_refusal"]

_PREFIX = "Error creating: "

RefusalKind = Literal[
    "pod-security",
    "quota",
    "limit-range",
    "service-account",
    "webhook",
    "admission-policy",
    "invalid",
    "admission",
]


@dataclass(frozen=True)
class Refusal:
    """What one ``FailedCreate`` message says.

    Attributes:
        kind: Which admission step refused the pod.
        plugin: It in words (``PodSecurity "restricted:latest"``, ``ResourceQuota compute``).
        final: Whether waiting cannot lift it (else it may pass after :data:`QUOTA_GRACE`).
    """

    kind: RefusalKind
    plugin: str
    final: bool = True


# ------------------------------------------------------------------------------- the words

_TRANSIENT = (
    "failed calling webhook",  # the webhook could not be reached: the cluster's trouble
    "status unknown for quota",  # the quota controller has not counted the namespace yet
    "at this time",  # LimitRanger or quota could not be read
    "because it is being terminated",  # the namespace goes; the Job goes with it
    # The JobSet pod webhook holds an exclusive placement's follower pods until their leader
    # is scheduled and the follower carries its node selector (upstream v0.12.0's own words:
    # "leader pod not yet scheduled, not creating follower pod. this is an expected, transient
    # error"; "expected 1 leader pod ..."; "follower pod node selector not set"; "follower pod
    # node selector for topology domain not found"): the Job controller tries again.
    "this is an expected, transient error",
    "follower pod node selector",
)
_POD_SECURITY = re.compile(r'violates PodSecurity "([^"]+)"')
_EXCEEDED = re.compile(
    r"exceeded quota: (?P<name>[^,]+), requested: (?P<requested>\S*), used: (?P<used>\S*), "
    r"limited: (?P<limited>\S*)"
)
_FAILED_QUOTA = re.compile(r"failed quota: ([^:]+):")
_LIMIT_RANGE = re.compile(r"(?:maximum|minimum) \S+ usage per (?:Container|Pod)|limit to request")
_WEBHOOK = re.compile(r'admission webhook "([^"]+)" denied the request')
_POLICY = re.compile(r"ValidatingAdmissionPolicy '([^']+)'(?: with binding '[^']+')? denied")
_INVALID = re.compile(r'^Pod "[^"]*" is invalid: ')
_FORBIDDEN = re.compile(r'^pods "[^"]*" is forbidden: (?!User ")')
_SUFFIXES = {
    **{s: Decimal(1024) ** i for i, s in enumerate(("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
    **{s: Decimal(1000) ** i for i, s in enumerate(("", "k", "M", "G", "T", "P", "E"))},
    **{"m": Decimal("1e-3"), "u": Decimal("1e-6"), "n": Decimal("1e-9")},
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")


def _quantity(text: str) -> Decimal | None:
    """A Kubernetes quantity as the quota admission prints it (``2``, ``500m``, ``1Gi``)."""
    match = _QUANTITY.match(text.strip())
    if match is None or match.group(2) not in _SUFFIXES:
        return None
    try:
        return Decimal(match.group(1)) * _SUFFIXES[match.group(2)]
    except InvalidOperation:
        return None


def _amounts(text: str) -> dict[str, Decimal | None]:
    """``pods=1,limits.cpu=2`` as amounts by resource."""
    out: dict[str, Decimal | None] = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        if name:
            out[name] = _quantity(value)
    return out


def _exceeds_for_ever(requested: str, limited: str) -> bool:
    """Whether the pod alone asks for more than the quota holds (no release can make room)."""
    asked, hard = _amounts(requested), _amounts(limited)
    return any(
        a is not None and h is not None and a > h
        for name, a in asked.items()
        for h in [hard.get(name)]
    )


def cluster_trouble(message: str) -> bool:
    """Whether the words are the cluster's trouble, not a refusal of the object (a webhook
    that cannot be called, a quota not counted yet, a namespace being deleted)."""
    return any(t in message for t in _TRANSIENT)


def read_refusal(message: str) -> Refusal | None:
    """What a refusal's message says (a ``FailedCreate`` Event's, or a create's answer):
    ``None`` when it is not a refusal of the object (the cluster's trouble; see the module
    docs) or names no admission step."""
    words = message.removeprefix(_PREFIX)
    if cluster_trouble(words):
        return None
    if found := _POD_SECURITY.search(words):
        return Refusal("pod-security", f'PodSecurity "{found.group(1)}"')
    if found := _EXCEEDED.search(words):
        final = _exceeds_for_ever(found.group("requested"), found.group("limited"))
        return Refusal("quota", f"ResourceQuota {found.group('name')}", final)
    if found := _FAILED_QUOTA.search(words):
        return Refusal("quota", f"ResourceQuota {found.group(1)}")
    if _LIMIT_RANGE.search(words):
        return Refusal("limit-range", "LimitRange")
    if "error looking up service account" in words:
        return Refusal("service-account", "ServiceAccount")
    if found := _WEBHOOK.search(words):
        return Refusal("webhook", f'admission webhook "{found.group(1)}"')
    if found := _POLICY.search(words):
        return Refusal("admission-policy", f"ValidatingAdmissionPolicy {found.group(1)}")
    if _INVALID.search(words):
        return Refusal("invalid", "validation")
    if _FORBIDDEN.search(words):
        return Refusal("admission", "admission")
    return None
