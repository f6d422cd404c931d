"""Kubeflow Pipelines components that run Kubernetes JobSets.

* :data:`launch_jobset`: run a JobSet as a pipeline step (resumes on retry, deletes on cancel).
* :data:`cleanup_jobsets`: delete every JobSet a run launched (for ``dsl.ExitHandler``).

Both run in the launcher image :data:`LAUNCHER_IMAGE`; ``launch_jobset.yaml`` next to this file
is the compiled form of ``launch_jobset``.

The components are loaded on first access: inside a running step, KFP's executor exposes only
the runtime half of ``kfp.dsl``, and the step imports just :mod:`kfp_components.launcher`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from kfp_components.components import LAUNCHER_IMAGE, cleanup_jobsets, launch_jobset

__all__ = ["LAUNCHER_IMAGE", "cleanup_jobsets", "launch_jobset"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module("kfp_components.components"), name)
