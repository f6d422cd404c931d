"""Backends that run a JobSet on a cluster and report its :class:`~jobset_core.outcome.Outcome`.

* ``controller`` (:mod:`.controller`): submit the JobSet resource; the upstream controller
  runs it.
* ``native`` (:mod:`.native`): create the Service and Jobs ourselves (clusters without the
  controller).
* :func:`choose_backend` / :func:`choose_async_backend` (:mod:`.auto`): ``controller`` when
  ``jobset.x-k8s.io/v1alpha2`` is served, else ``native``.

Importing this package imports no API client; the backend classes are loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from jobset_core.backends._anchor import ANCHOR_LABEL, ANCHOR_VALUE
from jobset_core.backends._base import (
    AsyncBackendProtocol,
    BackendProtocol,
    Handle,
    OnRestart,
    ProgressCallback,
    Submission,
)
from jobset_core.backends._common import (
    IDENTITY_PREFIX,
    WaitTracker,
    build_outcome,
    identity_labels,
    resolve_name,
    restart_details,
    stamp_identity,
)

if TYPE_CHECKING:
    from jobset_core.backends.auto import BackendChoice, choose_async_backend, choose_backend
    from jobset_core.backends.controller import AsyncControllerBackend, ControllerBackend
    from jobset_core.backends.native import AsyncNativeBackend, NativeBackend

__all__ = [
    "ANCHOR_LABEL",
    "ANCHOR_VALUE",
    "IDENTITY_PREFIX",
    "AsyncBackendProtocol",
    "AsyncControllerBackend",
    "AsyncNativeBackend",
    "BackendChoice",
    "BackendProtocol",
    "ControllerBackend",
    "Handle",
    "NativeBackend",
    "OnRestart",
    "ProgressCallback",
    "Submission",
    "WaitTracker",
    "build_outcome",
    "choose_async_backend",
    "choose_backend",
    "identity_labels",
    "resolve_name",
    "restart_details",
    "stamp_identity",
]

_LAZY = {
    "AsyncControllerBackend": "jobset_core.backends.controller",
    "ControllerBackend": "jobset_core.backends.controller",
    "AsyncNativeBackend": "jobset_core.backends.native",
    "NativeBackend": "jobset_core.backends.native",
    "BackendChoice": "jobset_core.backends.auto",
    "choose_async_backend": "jobset_core.backends.auto",
    "choose_backend": "jobset_core.backends.auto",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
