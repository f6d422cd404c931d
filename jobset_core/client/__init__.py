"""Talking to the API server: twin sync/async clients over one pure request/decision core.

The official ``kubernetes`` (sync) and ``kubernetes_asyncio`` (async) clients do the HTTP and
the authentication; this package decides what to send, what an answer means, and when to try
again. Importing it imports those clients; the rest of :mod:`jobset_core` never does.
"""

from jobset_core.client._core import ObjectList, RetryPolicy, Unreachable
from jobset_core.client._watch import EventType, WatchEvent, WatchState
from jobset_core.client.aio import AsyncJobSetClient
from jobset_core.client.config import ClientSettings, ConfigError, default_namespace
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
    "default_namespace",
]
