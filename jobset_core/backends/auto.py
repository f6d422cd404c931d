"""Which backend runs a JobSet: ``auto``, ``controller`` or ``native``.

``auto`` is ``controller`` where the cluster serves ``jobset.x-k8s.io/v1alpha2`` (one
discovery request), else ``native``. To reattach to a run whose backend is not known,
:func:`locate` looks for the JobSet, then for a native anchor of that name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jobset_core.backends._base import BACKEND_CHOICES, BackendProtocol, Submission
from jobset_core.errors import IdentityMismatch, NotFound
from jobset_core.outcome import Backend

if TYPE_CHECKING:  # the caller already holds a client; importing one here is not needed
    from jobset_core.client import Client

__all__ = ["BACKEND_CHOICES", "kinds_for", "locate", "make_backend", "resolve_kind"]


def resolve_kind(choice: str, jobset_api_served: bool) -> Backend:
    """The backend a choice stands for: ``auto`` is ``controller`` when the
    ``jobset.x-k8s.io/v1alpha2`` API is served, else ``native``.

    Raises:
        ValueError: an unknown choice.
    """
    if choice == "auto":
        return "controller" if jobset_api_served else "native"
    if choice in ("controller", "native"):
        return choice  # type: ignore[return-value]
    raise ValueError(f"unknown backend {choice!r}; use auto, controller or native")


def make_backend(client: Client, kind: Backend, **options: Any) -> BackendProtocol:
    """The backend ``kind`` over ``client`` (``options`` go to its constructor)."""
    if kind == "controller":
        from jobset_core.backends.controller import ControllerBackend

        return ControllerBackend(client, **options)
    from jobset_core.backends.native import NativeBackend

    return NativeBackend(client, **options)


async def kinds_for(client: Client, choice: str = "auto") -> list[Backend]:
    """The backends a choice stands for, in the order to try them: the one chosen, or for
    ``auto`` ``controller`` then ``native`` where the JobSet API is served (one discovery
    request), else ``native``. The one place ``auto`` is decided.

    Raises:
        ValueError: an unknown choice (before any request).
    """
    resolve_kind(choice, False)
    if choice != "auto":
        return [resolve_kind(choice, False)]
    return ["controller", "native"] if await client.jobset_api_served() else ["native"]


async def locate(
    client: Client,
    name: str,
    *,
    namespace: str,
    choice: str = "auto",
    uid: str | None = None,
    identity: Mapping[str, str] | None = None,
    **options: Any,
) -> tuple[BackendProtocol, Submission]:
    """Find an existing run by name: with ``auto``, the JobSet when the API is served and one
    exists, else the native anchor of that name.

    Raises:
        NotFound: neither exists.
        IdentityMismatch: it exists but does not match ``uid`` / ``identity``.
    """
    kinds = await kinds_for(client, choice)
    missing: list[str] = []
    for kind in kinds:
        backend = make_backend(client, kind, **options)
        try:
            found = await backend.attach(name, namespace=namespace, uid=uid, identity=identity)
        except NotFound:
            missing.append("JobSet" if kind == "controller" else "native anchor ConfigMap")
            continue
        except IdentityMismatch:
            if kind == "native" and len(kinds) > 1:  # a ConfigMap of that name, not an anchor
                missing.append("native anchor ConfigMap")
                continue
            raise
        return backend, found
    looked = " nor a ".join(missing)
    raise NotFound(
        404, "NotFound", f"{name!r} not found in namespace {namespace!r}: no {looked} of that name"
    )
