"""Backends that run a JobSet on a cluster (see :mod:`._base` for the contract).

* ``controller`` (:mod:`.controller`): submit the JobSet resource; the upstream controller
  runs it.
* ``native`` (:mod:`.native`): keep the JobSet in an anchor ConfigMap and create the Service
  and Jobs ourselves (clusters without the controller).
* :func:`kinds_for` / :func:`locate` (:mod:`.auto`): ``auto`` is ``controller`` when
  ``jobset.x-k8s.io/v1alpha2`` is served, else ``native`` (decided there, once).

This package is the lifecycle's: adapters never import it (an import contract says so). The
run identity rules are :mod:`jobset_core.identity`, the outcome rules
:mod:`jobset_core.policy.outcome`. Importing this package imports no API client; the backend
classes are loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from jobset_core.backends._anchor import anchor_events, parse_anchor, read_anchor, read_jobset
from jobset_core.backends._base import (
    BACKEND_CHOICES,
    BackendChoice,
    BackendProtocol,
    Handle,
    Pass,
    Submission,
)

if TYPE_CHECKING:
    from jobset_core.backends.auto import (
        kinds_for,
        locate,
        make_backend,
        resolve_kind,
    )
    from jobset_core.backends.controller import ControllerBackend
    from jobset_core.backends.native import NativeBackend

__all__ = [
    "BACKEND_CHOICES",
    "BackendChoice",
    "BackendProtocol",
    "ControllerBackend",
    "Handle",
    "NativeBackend",
    "Pass",
    "Submission",
    "anchor_events",
    "kinds_for",
    "locate",
    "make_backend",
    "parse_anchor",
    "read_anchor",
    "read_jobset",
    "resolve_kind",
]

_LAZY = {
    "ControllerBackend": "jobset_core.backends.controller",
    "NativeBackend": "jobset_core.backends.native",
    "kinds_for": "jobset_core.backends.auto",
    "locate": "jobset_core.backends.auto",
    "make_backend": "jobset_core.backends.auto",
    "resolve_kind": "jobset_core.backends.auto",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
