"""jobset_core: the framework-free heart of airflow-provider-jobset.

Typed models of ``jobset.x-k8s.io/v1alpha2``, validation with field paths, the upstream
defaults, a pure renderer of the child objects, pure policy decisions, and (in
:mod:`jobset_core.backends`) the engine that runs a JobSet on a cluster. Importing this package
never imports a Kubernetes client; the backends and the client layer are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobset_core._version import __version__

if TYPE_CHECKING:  # pragma: no cover
    from jobset_core.backends._base import Handle, Submission
    from jobset_core.builders import jax_multislice, leader_workers, pytorch_ddp
    from jobset_core.defaults import with_defaults
    from jobset_core.errors import (
        ApiError,
        CreationFailed,
        IdentityMismatch,
        JobSetError,
        Problem,
        SpecError,
        WaitTimeout,
    )
    from jobset_core.models import JobSet, dump_yaml, load_jobset, load_jobsets
    from jobset_core.outcome import Outcome, Phase, Progress, ReplicatedJobCounts
    from jobset_core.render import RenderedJobSet, render
    from jobset_core.validation import ensure_valid, validate

__all__ = [
    "ApiError",
    "CreationFailed",
    "Handle",
    "IdentityMismatch",
    "JobSet",
    "JobSetError",
    "Outcome",
    "Phase",
    "Problem",
    "Progress",
    "RenderedJobSet",
    "ReplicatedJobCounts",
    "SpecError",
    "Submission",
    "WaitTimeout",
    "__version__",
    "dump_yaml",
    "ensure_valid",
    "jax_multislice",
    "leader_workers",
    "load_jobset",
    "load_jobsets",
    "pytorch_ddp",
    "render",
    "validate",
    "with_defaults",
]

#: Where each public name lives: imported on first use, so that importing the package (or a
#: subpackage of it, such as the CLI) costs nothing until a name is asked for.
_LAZY = {
    "ApiError": "jobset_core.errors",
    "CreationFailed": "jobset_core.errors",
    "IdentityMismatch": "jobset_core.errors",
    "JobSetError": "jobset_core.errors",
    "Problem": "jobset_core.errors",
    "SpecError": "jobset_core.errors",
    "WaitTimeout": "jobset_core.errors",
    "Handle": "jobset_core.backends._base",
    "Submission": "jobset_core.backends._base",
    "JobSet": "jobset_core.models",
    "dump_yaml": "jobset_core.models",
    "load_jobset": "jobset_core.models",
    "load_jobsets": "jobset_core.models",
    "Outcome": "jobset_core.outcome",
    "Phase": "jobset_core.outcome",
    "Progress": "jobset_core.outcome",
    "ReplicatedJobCounts": "jobset_core.outcome",
    "RenderedJobSet": "jobset_core.render",
    "render": "jobset_core.render",
    "ensure_valid": "jobset_core.validation",
    "validate": "jobset_core.validation",
    "with_defaults": "jobset_core.defaults",
    "jax_multislice": "jobset_core.builders",
    "leader_workers": "jobset_core.builders",
    "pytorch_ddp": "jobset_core.builders",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'jobset_core' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # asked once
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
