"""Talking to the API server: twin sync/async clients over one pure request/decision core.

The official ``kubernetes`` (sync) and ``kubernetes_asyncio`` (async) clients do the HTTP and
the authentication; this package decides what to send, what an answer means, and when to try
again. Names are resolved on first use, so a sync caller never pays for importing the async
client (and the other way round).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from jobset_core.client._core import ObjectList, RetryPolicy, Unreachable
    from jobset_core.client._watch import EventType, WatchEvent, WatchState
    from jobset_core.client.aio import AsyncJobSetClient
    from jobset_core.client.config import ClientSettings, ConfigError
    from jobset_core.client.sync import JobSetClient

__all__ = [
    "AsyncJobSetClient",
    "ClientSettings",
    "ConfigError",
    "EventType",
    "JobSetClient",
    "ObjectList",
    "RetryPolicy",
    "Unreachable",
    "WatchEvent",
    "WatchState",
]

_WHERE = {
    "AsyncJobSetClient": "jobset_core.client.aio",
    "ClientSettings": "jobset_core.client.config",
    "ConfigError": "jobset_core.client.config",
    "EventType": "jobset_core.client._watch",
    "JobSetClient": "jobset_core.client.sync",
    "ObjectList": "jobset_core.client._core",
    "RetryPolicy": "jobset_core.client._core",
    "Unreachable": "jobset_core.client._core",
    "WatchEvent": "jobset_core.client._watch",
    "WatchState": "jobset_core.client._watch",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'jobset_core.client' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
