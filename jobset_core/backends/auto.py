"""``auto``: the controller backend where the JobSet API is served, else the native one.

The choice is one discovery request (``GET /apis/jobset.x-k8s.io/v1alpha2``); the native
backend is imported only when it is chosen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from jobset_core.backends._base import AsyncBackendProtocol, BackendProtocol
from jobset_core.outcome import Backend

if TYPE_CHECKING:  # the caller already holds a client; importing one here is not needed
    from jobset_core.client import AsyncJobSetClient, JobSetClient

__all__ = ["BackendChoice", "choose_async_backend", "choose_backend", "resolve_kind"]

#: What a caller may ask for.
BackendChoice = Literal["auto", "controller", "native"]


def resolve_kind(choice: BackendChoice, jobset_api_served: bool) -> Backend:
    """The backend a choice stands for: ``auto`` is ``controller`` when the
    ``jobset.x-k8s.io/v1alpha2`` API is served, else ``native``.

    Raises:
        ValueError: an unknown choice.
    """
    if choice == "auto":
        return "controller" if jobset_api_served else "native"
    if choice in ("controller", "native"):
        return choice
    raise ValueError(f"unknown backend {choice!r}; use auto, controller or native")


def choose_backend(
    client: JobSetClient, choice: BackendChoice = "auto", **options: Any
) -> BackendProtocol:
    """A synchronous backend over ``client`` (``options`` go to its constructor).

    Example:
        >>> backend = choose_backend(JobSetClient())  # doctest: +SKIP
        >>> backend.kind  # doctest: +SKIP
        'controller'
    """
    served = client.jobset_api_served() if choice == "auto" else False
    if resolve_kind(choice, served) == "controller":
        from jobset_core.backends.controller import ControllerBackend

        return ControllerBackend(client, **options)
    from jobset_core.backends.native import NativeBackend

    backend: BackendProtocol = NativeBackend(client, **options)
    return backend


async def choose_async_backend(
    client: AsyncJobSetClient, choice: BackendChoice = "auto", **options: Any
) -> AsyncBackendProtocol:
    """The asynchronous twin of :func:`choose_backend`."""
    served = await client.jobset_api_served() if choice == "auto" else False
    if resolve_kind(choice, served) == "controller":
        from jobset_core.backends.controller import AsyncControllerBackend

        return AsyncControllerBackend(client, **options)
    from jobset_core.backends.native import AsyncNativeBackend

    backend: AsyncBackendProtocol = AsyncNativeBackend(client, **options)
    return backend
