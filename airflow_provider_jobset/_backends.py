"""Choosing and building a backend over a client (imports the client layer: call lazily)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from jobset_core.backends._base import AsyncBackendProtocol, BackendProtocol
    from jobset_core.client import AsyncJobSetClient, JobSetClient

__all__ = ["async_backend", "sync_backend"]

Kind = Literal["controller", "native"]


def _checked(kind: str) -> str:
    if kind not in ("auto", "controller", "native"):
        raise ValueError(f"backend must be 'auto', 'controller' or 'native', not {kind!r}")
    return kind


def _native(poll_interval: float | None) -> dict[str, Any]:
    return {} if poll_interval is None else {"poll_interval": poll_interval}


def sync_backend(
    client: JobSetClient, kind: str = "auto", *, poll_interval: float | None = None
) -> BackendProtocol:
    """The backend ``kind`` over ``client`` (``auto``: controller when the API is served);
    ``poll_interval`` applies to the native backend."""
    if _checked(kind) == "auto":
        kind = "controller" if client.jobset_api_served() else "native"
    if kind == "controller":
        from jobset_core.backends.controller import ControllerBackend

        backend: BackendProtocol = ControllerBackend(client)
        return backend
    from jobset_core.backends.native import NativeBackend

    return NativeBackend(client, **_native(poll_interval))


async def async_backend(
    client: AsyncJobSetClient, kind: str = "auto", *, poll_interval: float | None = None
) -> AsyncBackendProtocol:
    """The asynchronous twin of :func:`sync_backend`."""
    if _checked(kind) == "auto":
        kind = "controller" if await client.jobset_api_served() else "native"
    if kind == "controller":
        from jobset_core.backends.controller import AsyncControllerBackend

        backend: AsyncBackendProtocol = AsyncControllerBackend(client)
        return backend
    from jobset_core.backends.native import AsyncNativeBackend

    return AsyncNativeBackend(client, **_native(poll_interval))
