"""Talking to the API server: one async client over a pure request/decision core.

The official ``kubernetes_asyncio`` client does the HTTP and the authentication; this package
decides what to send, what an answer means, and when to try again (:mod:`._core`,
:mod:`._watch`, both pure). Names are resolved on first use, so importing the package never
imports ``kubernetes_asyncio``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from jobset_core.client._client import Client, ClientStats
    from jobset_core.client._core import ObjectList, RetryPolicy, render_selector
    from jobset_core.client._watch import EventType, WatchEvent, WatchState
    from jobset_core.client.config import ClientSettings, default_namespace

__all__ = [
    "Client",
    "ClientSettings",
    "ClientStats",
    "EventType",
    "ObjectList",
    "RetryPolicy",
    "WatchEvent",
    "WatchState",
    "default_namespace",
    "render_selector",
]

_WHERE = {
    "Client": "jobset_core.client._client",
    "ClientSettings": "jobset_core.client.config",
    "ClientStats": "jobset_core.client._client",
    "EventType": "jobset_core.client._watch",
    "render_selector": "jobset_core.client._core",
    "ObjectList": "jobset_core.client._core",
    "RetryPolicy": "jobset_core.client._core",
    "WatchEvent": "jobset_core.client._watch",
    "WatchState": "jobset_core.client._watch",
    "default_namespace": "jobset_core.client.config",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'jobset_core.client' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
