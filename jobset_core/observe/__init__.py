"""The one observer of the cluster: shared list+watch of JobSets, anchors, Jobs, pods and
Events, and the runs waiters track (see :mod:`._observer`).

Every waiter of the project (the worker's wait, the deferrable trigger, the sensor, the KFP
step, ``jobsetctl run``, the native backend's reconcile) reads the cluster through here.
Importing this package imports no API client.
"""

from __future__ import annotations

from jobset_core.observe._informer import backoff
from jobset_core.observe._observer import Observer, Scope, Target, Tracked
from jobset_core.observe._shared import (
    SharedObserver,
    linger,
    settings_key,
    shared_observer,
    shared_stats,
)
from jobset_core.observe._store import Observation
from jobset_core.observe._views import Kind, RunKey

__all__ = [
    "Kind",
    "Observation",
    "Observer",
    "RunKey",
    "Scope",
    "SharedObserver",
    "Target",
    "Tracked",
    "backoff",
    "linger",
    "settings_key",
    "shared_observer",
    "shared_stats",
]
