"""Container resource requirements, as Kubernetes validates them (``pkg/apis/core``, v1.36).

Mirrors ``ValidateContainerResourceRequirements`` for what users most often get wrong:
unknown resource names, negative quantities, fractional extended resources, requests above
limits, and extended resources (``nvidia.com/gpu``) whose request is missing its limit or
differs from it: those cannot be overcommitted. Quantity syntax itself is checked by the schema
check. Not mirrored: hugepages' page-size rules and pod-level ``resources``.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from jobset_core.validation import _names
from jobset_core.validation._common import Collector, Loc, as_map
from jobset_core.validation._quantity import parse_quantity

__all__ = ["check_container_resources"]

_STANDARD = ("cpu", "memory", "ephemeral-storage")


def _is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _is_hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def _overcommit_allowed(name: str) -> bool:
    return _is_native(name) and not _is_hugepages(name)


def _is_extended(name: str) -> bool:
    return (
        not _is_native(name)
        and not name.startswith("requests.")
        and not _names.qualified_name(f"requests.{name}")
    )


def _check_name(out: Collector, name: str, loc: Loc) -> None:
    if "/" not in name:
        if name not in _STANDARD and not _is_hugepages(name):
            out.add(loc, "must be a standard resource for containers", "container-resources")
    elif not _is_native(name) and not _is_extended(name):
        out.add(loc, "doesn't follow extended resource name standard", "container-resources")


#: The largest extended-resource quantity whose thousandfold fits an int64: above it the API
#: server's integer check (``MilliValue() % 1000``) overflows, and depending on the spelling it
#: accepts the value or calls it not an integer.
EXTENDED_RESOURCE_MAX = (2**63 - 1) // 1000


def _check_value(out: Collector, name: str, quantity: Decimal, loc: Loc) -> None:
    if quantity < 0:
        out.add(loc, "must be greater than or equal to 0", "container-resources")
    if not _is_extended(name):
        return
    if quantity > EXTENDED_RESOURCE_MAX:
        out.add(
            loc,
            f"must be at most {EXTENDED_RESOURCE_MAX} (the API server's integer check "
            "overflows above it)",
            "extended-resource-size",
        )
    elif quantity != quantity.to_integral_value():
        out.add(loc, "must be an integer", "container-resources")


def check_container_resources(out: Collector, resources: Mapping[str, Any], loc: Loc) -> None:
    """Check ``containers[i].resources`` (requests, limits)."""
    limits, requests = as_map(resources.get("limits")), as_map(resources.get("requests"))
    parsed_limits: dict[str, Decimal] = {}
    for name, value in limits.items():
        quantity = parse_quantity(value)
        _check_name(out, str(name), (*loc, "limits", name))
        if quantity is not None:
            _check_value(out, str(name), quantity, (*loc, "limits", name))
            parsed_limits[str(name)] = quantity
    for name, value in requests.items():
        quantity = parse_quantity(value)
        path = (*loc, "requests", name)
        _check_name(out, str(name), path)
        if quantity is None:
            continue
        _check_value(out, str(name), quantity, path)
        limit = parsed_limits.get(str(name))
        if limit is not None:
            if quantity != limit and not _overcommit_allowed(str(name)):
                out.add(
                    path, f"must be equal to {name} limit of {limits[name]}", "container-resources"
                )
            elif quantity > limit:
                out.add(
                    path,
                    f"must be less than or equal to {name} limit of {limits[name]}",
                    "container-resources",
                )
        elif str(name) not in limits and not _overcommit_allowed(str(name)):
            out.add(
                (*loc, "limits"),
                f"Required value: Limit must be set for non overcommitable resources ({name})",
                "container-resources",
            )
