"""Container environment variables, as Kubernetes validates them (``pkg/apis/core``, v1.36).

Mirrors ``ValidateEnv``, ``validateEnvVarValueFrom``, ``validateObjectFieldSelector`` (with
``ConvertDownwardAPIFieldLabel``), ``validateContainerResourceFieldSelector``,
``validateContainerResourceDivisor``, the ConfigMap and Secret key selectors and
``ValidateEnvFrom``. Names follow ``IsRelaxedEnvVarName``: the ``RelaxedEnvironmentVariable
Validation`` gate is GA and locked on since Kubernetes 1.34, so any printable ASCII but ``=``.
Not mirrored: ``fileKeyRef`` (behind the alpha ``EnvFiles`` gate).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from jobset_core.validation import _names
from jobset_core.validation._common import Collector, Loc, as_list, as_map, as_str, unsupported
from jobset_core.validation._quantity import quantity_string

__all__ = ["check_env", "check_env_from", "env_var_name"]

_RULE = "container-env"
_RELAXED_NAME = (
    "a valid environment variable name must consist only of printable ASCII characters "
    "other than '='"
)
#: ``validEnvDownwardAPIFieldPathExpressions``.
_ENV_FIELD_PATHS = (
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
)
#: The labels ``ConvertDownwardAPIFieldLabel`` knows for ``v1`` pods (``spec.host`` is an old
#: spelling of ``spec.nodeName``).
_POD_FIELD_LABELS = (
    *_ENV_FIELD_PATHS,
    "metadata.annotations",
    "metadata.labels",
    "spec.restartPolicy",
    "spec.schedulerName",
    "status.phase",
)
#: ``validContainerResourceFieldPathExpressions`` and the hugepages prefixes.
_RESOURCE_PATHS = (
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
)
_HUGEPAGES_PREFIXES = ("limits.hugepages-", "requests.hugepages-")
_CPU_DIVISORS = ("1m", "1")
_BYTE_DIVISORS = tuple(
    f"1{suffix}"
    for suffix in ("", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
)
_CONFIG_KEY = "[-._a-zA-Z0-9]+"


def env_var_name(value: str) -> list[str]:
    """``IsRelaxedEnvVarName``."""
    if not value:
        return ["environment variable name must be non-empty"]
    if any(not 0x20 <= ord(char) <= 0x7E or char == "=" for char in value):
        return [_RELAXED_NAME]
    return []


def check_env(out: Collector, env: Any, loc: Loc) -> None:
    """``containers[i].env``: names and value sources."""
    for index, raw in enumerate(as_list(env)):
        var, vloc = as_map(raw), (*loc, index)
        name = as_str(var.get("name")) or ""
        if not name:
            out.add((*vloc, "name"), "Required value", _RULE)
        else:
            out.extend((*vloc, "name"), env_var_name(name), _RULE)
        if var.get("valueFrom") is not None:
            _check_value_from(out, var, (*vloc, "valueFrom"))


def _check_value_from(out: Collector, var: Mapping[str, Any], loc: Loc) -> None:
    source = as_map(var.get("valueFrom"))
    checks = (
        ("fieldRef", _check_field_ref),
        ("resourceFieldRef", _check_resource_field_ref),
        ("configMapKeyRef", _check_key_selector),
        ("secretKeyRef", _check_key_selector),
        ("fileKeyRef", None),
    )
    present = 0
    for key, check in checks:
        if source.get(key) is None:
            continue
        present += 1
        if check is not None:
            check(out, as_map(source[key]), (*loc, key))
    if present == 0:
        out.add(
            loc,
            "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or "
            "`secretKeyRef`",
            _RULE,
        )
    elif as_str(var.get("value")):
        out.add(loc, "may not be specified when `value` is not empty", _RULE)
    elif present > 1:
        out.add(loc, "may not have more than one field specified at a time", _RULE)


def _check_field_ref(out: Collector, ref: Mapping[str, Any], loc: Loc) -> None:
    # Kubernetes defaults an empty apiVersion to v1 before it validates.
    version = as_str(ref.get("apiVersion")) or "v1"
    path = as_str(ref.get("fieldPath")) or ""
    if not path:
        out.add((*loc, "fieldPath"), "Required value", _RULE)
        return
    base, subscript, subscripted = _split_subscript(path)
    if version != "v1":
        error = f"unsupported pod version: {version}"
    elif subscripted and base not in ("metadata.annotations", "metadata.labels"):
        error = f"field label does not support subscript: {path}"
    elif not subscripted and base not in _POD_FIELD_LABELS and path != "spec.host":
        error = f"field label not supported: {path}"
    else:
        error = ""
    if error:
        out.add(
            (*loc, "fieldPath"),
            f"Invalid value: {path!r}: error converting fieldPath: {error}",
            _RULE,
        )
        return
    if base == "spec.host":
        base = "spec.nodeName"
    if subscripted:
        key = subscript.lower() if base == "metadata.annotations" else subscript
        out.extend(loc, _names.qualified_name(key), _RULE)
    elif base not in _ENV_FIELD_PATHS:
        out.add((*loc, "fieldPath"), unsupported(base, _ENV_FIELD_PATHS), _RULE)


def _split_subscript(path: str) -> tuple[str, str, bool]:
    """``fieldpath.SplitMaybeSubscriptedPath``: ``metadata.labels['x']`` -> base, ``x``."""
    if not path.endswith("']"):
        return path, "", False
    parts = path[:-2].split("['", 1)
    if len(parts) < 2 or not parts[0]:
        return path, "", False
    return parts[0], parts[1], True


def _check_resource_field_ref(out: Collector, ref: Mapping[str, Any], loc: Loc) -> None:
    resource = as_str(ref.get("resource")) or ""
    if not resource:
        out.add((*loc, "resource"), "Required value", _RULE)
    elif resource not in _RESOURCE_PATHS and not resource.startswith(_HUGEPAGES_PREFIXES):
        out.add((*loc, "resource"), unsupported(resource, _RESOURCE_PATHS), _RULE)
    # The API server compares the divisor's String(): its spelling, or its canonical form.
    shown = quantity_string(ref.get("divisor")) if ref.get("divisor") is not None else None
    if shown is None or shown == "0":
        return
    if resource in ("limits.cpu", "requests.cpu"):
        if shown not in _CPU_DIVISORS:
            out.add(
                (*loc, "divisor"),
                "only divisor's values 1m and 1 are supported with the cpu resource",
                _RULE,
            )
        return
    kinds = {
        "limits.memory": "memory",
        "requests.memory": "memory",
        "limits.ephemeral-storage": "local ephemeral storage",
        "requests.ephemeral-storage": "local ephemeral storage",
    }
    kind = kinds.get(resource, "hugepages" if resource.startswith(_HUGEPAGES_PREFIXES) else "")
    if kind and shown not in _BYTE_DIVISORS:
        out.add(
            (*loc, "divisor"),
            f"only divisor's values {', '.join(_BYTE_DIVISORS)} are supported with the {kind} "
            "resource",
            _RULE,
        )


def _check_key_selector(out: Collector, selector: Mapping[str, Any], loc: Loc) -> None:
    out.extend((*loc, "name"), _names.dns1123_subdomain(as_str(selector.get("name")) or ""), _RULE)
    key = as_str(selector.get("key")) or ""
    if not key:
        out.add((*loc, "key"), "Required value", _RULE)
    else:
        out.extend((*loc, "key"), config_map_key(key), _RULE)


def config_map_key(value: str) -> list[str]:
    """``IsConfigMapKey``."""
    errs = [_names.max_len(253)] if len(value) > 253 else []
    if not re.fullmatch(_CONFIG_KEY, value):
        errs.append(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
            f"(e.g. 'key.name', or 'KEY_NAME', or 'key-name', regex used for validation is "
            f"'{_CONFIG_KEY}')"
        )
    if value == ".":
        errs.append("must not be '.'")
    elif value == "..":
        errs.append("must not be '..'")
    elif value.startswith(".."):
        errs.append("must not start with '..'")
    return errs


def check_env_from(out: Collector, sources: Any, loc: Loc) -> None:
    """``containers[i].envFrom``: prefixes and exactly one source each."""
    for index, raw in enumerate(as_list(sources)):
        source, sloc = as_map(raw), (*loc, index)
        prefix = as_str(source.get("prefix")) or ""
        if prefix:
            out.extend((*sloc, "prefix"), env_var_name(prefix), _RULE)
        present = [key for key in ("configMapRef", "secretRef") if source.get(key) is not None]
        for key in present:
            name = as_str(as_map(source[key]).get("name")) or ""
            if not name:
                out.add((*sloc, key, "name"), "Required value", _RULE)
            else:
                out.extend((*sloc, key, "name"), _names.dns1123_subdomain(name), _RULE)
        if not present:
            out.add(loc, "must specify one of: `configMapRef` or `secretRef`", _RULE)
        elif len(present) > 1:
            out.add(loc, "may not have more than one field specified at a time", _RULE)
