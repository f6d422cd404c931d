"""Container probes and lifecycle hooks, as Kubernetes validates them (``pkg/apis/core``, v1.36).

Mirrors ``validateProbe``, ``validateLivenessProbe``/``Readiness``/``Startup``,
``validateHandler`` and the init-container rule (probes and hooks only on sidecars,
``restartPolicy: Always``), after Kubernetes' probe defaults (``successThreshold`` 0 means 1,
``httpGet.scheme`` empty means HTTP), and an ``exec`` handler's required ``command``. Not
mirrored: HTTP header names, the ``sleep`` action's bounds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobset_core.validation import _names
from jobset_core.validation._common import Collector, Loc, as_int, as_list, as_map, unsupported

__all__ = ["check_probes"]

_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
_PROBE_HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")  # validateHandler's order
_HOOK_HANDLERS = ("exec", "httpGet", "tcpSocket", "sleep")
_COUNTS = (
    "initialDelaySeconds",
    "timeoutSeconds",
    "periodSeconds",
    "successThreshold",
    "failureThreshold",
)
_SIDECAR_ONLY = "may not be set for init containers without restartPolicy=Always"


def check_probes(out: Collector, ctr: Mapping[str, Any], loc: Loc, *, init: bool) -> None:
    """Probes and lifecycle hooks of one container (``init``: of an init container)."""
    plain_init = init and ctr.get("restartPolicy") != "Always"
    for kind in _PROBES:
        probe = ctr.get(kind)
        if probe is None:
            continue
        if plain_init:
            out.add((*loc, kind), _SIDECAR_ONLY, "container-probe")
        else:
            _check_probe(out, as_map(probe), (*loc, kind), kind)
    lifecycle = ctr.get("lifecycle")
    if lifecycle is not None and plain_init:
        out.add((*loc, "lifecycle"), _SIDECAR_ONLY, "container-probe")
    elif lifecycle is not None:
        for hook in ("postStart", "preStop"):
            handler = as_map(lifecycle).get(hook) if isinstance(lifecycle, Mapping) else None
            if handler is not None:
                _check_handler(out, as_map(handler), (*loc, "lifecycle", hook), _HOOK_HANDLERS)


def _check_probe(out: Collector, probe: Mapping[str, Any], loc: Loc, kind: str) -> None:
    _check_handler(out, probe, loc, _PROBE_HANDLERS)
    for key in _COUNTS:
        value = as_int(probe.get(key))
        if value is not None and value < 0:
            out.add((*loc, key), "must be greater than or equal to 0", "container-probe")
    grace = as_int(probe.get("terminationGracePeriodSeconds"))
    if grace is not None and grace <= 0:
        out.add(
            (*loc, "terminationGracePeriodSeconds"), "must be greater than 0", "container-probe"
        )
    if kind == "readinessProbe" and probe.get("terminationGracePeriodSeconds") is not None:
        out.add(
            (*loc, "terminationGracePeriodSeconds"),
            "must not be set for readinessProbes",
            "container-probe",
        )
    success = as_int(probe.get("successThreshold"))
    if kind != "readinessProbe" and success not in (None, 0, 1):
        out.add((*loc, "successThreshold"), "must be 1", "container-probe")


def _check_handler(
    out: Collector, handler: Mapping[str, Any], loc: Loc, kinds: tuple[str, ...]
) -> None:
    present = [kind for kind in kinds if handler.get(kind) is not None]
    if not present:
        out.add(loc, "Required value: must specify a handler type", "container-probe")
    for extra in present[1:]:
        out.add((*loc, extra), "may not specify more than 1 handler type", "container-probe")
    if not present:
        return
    first, action = present[0], as_map(handler.get(present[0]))
    if first == "exec" and not as_list(action.get("command")):
        out.add((*loc, first, "command"), "Required value", "container-probe")
    if first in ("httpGet", "tcpSocket", "grpc"):
        # A missing or null port is decoded as 0 by the API server.
        _check_port(out, action.get("port") or 0, (*loc, first, "port"))
    scheme = action.get("scheme") or "HTTP"
    if first == "httpGet" and scheme not in ("HTTP", "HTTPS"):
        out.add((*loc, first, "scheme"), unsupported(scheme, ("HTTP", "HTTPS")), "container-probe")


def _check_port(out: Collector, port: Any, loc: Loc) -> None:
    number = as_int(port)
    if number is not None:
        if not 1 <= number <= 65535:
            out.add(loc, "must be between 1 and 65535, inclusive", "container-probe")
    elif isinstance(port, str):
        out.extend(loc, _names.port_name(port), "container-probe")
