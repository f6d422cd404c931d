"""Backends that run a JobSet on a cluster (see :mod:`._base` for the contract).

* ``controller`` (:mod:`.controller`): submit the JobSet resource; the upstream controller
  runs it.
* ``native`` (:mod:`.native`): keep the JobSet in an anchor ConfigMap and create the Service
  and Jobs ourselves (clusters without the controller).
* :func:`choose_backend` / :func:`locate` (:mod:`.auto`): ``auto`` is ``controller`` when
  ``jobset.x-k8s.io/v1alpha2`` is served, else ``native``.

Identity helpers (:func:`identity_labels`, :func:`resolve_name`, :func:`stamp_identity`,
:func:`spec_fingerprint`) are pure and public. Importing this package imports no API client;
the backend classes are loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from jobset_core.backends._base import BackendChoice, BackendProtocol, Handle, Pass, Submission
from jobset_core.backends._common import (
    IDENTITY_PREFIX,
    build_outcome,
    identity_labels,
    resolve_name,
    spec_fingerprint,
    stamp_identity,
    status_document,
)
from jobset_core.labels import ANCHOR_LABEL, ANCHOR_VALUE

if TYPE_CHECKING:
    from jobset_core.backends.auto import (
        BACKEND_CHOICES,
        choose_backend,
        locate,
        make_backend,
        resolve_kind,
    )
    from jobset_core.backends.controller import ControllerBackend
    from jobset_core.backends.native import NativeBackend

__all__ = [
    "ANCHOR_LABEL",
    "ANCHOR_VALUE",
    "BACKEND_CHOICES",
    "IDENTITY_PREFIX",
    "BackendChoice",
    "BackendProtocol",
    "ControllerBackend",
    "Handle",
    "NativeBackend",
    "Pass",
    "Submission",
    "build_outcome",
    "choose_backend",
    "identity_labels",
    "locate",
    "make_backend",
    "resolve_kind",
    "resolve_name",
    "spec_fingerprint",
    "stamp_identity",
    "status_document",
]

_LAZY = {
    "BACKEND_CHOICES": "jobset_core.backends.auto",
    "ControllerBackend": "jobset_core.backends.controller",
    "NativeBackend": "jobset_core.backends.native",
    "choose_backend": "jobset_core.backends.auto",
    "locate": "jobset_core.backends.auto",
    "make_backend": "jobset_core.backends.auto",
    "resolve_kind": "jobset_core.backends.auto",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
