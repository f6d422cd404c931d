"""Values as KFP delivers them in ``dict``/``list`` parameters (pure).

KFP carries them as protobuf ``Struct``/``ListValue``, whose numbers are all doubles: a
JobSet's ``replicas: 2`` or a toleration's ``tolerationSeconds: 300`` arrive as ``2.0`` and
``300.0``, which the Kubernetes schema (int32/int64) rejects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["from_struct"]


def from_struct(value: Any) -> Any:
    """A copy of ``value`` with whole floats turned back into integers (fractions, strings and
    booleans unchanged)."""
    if isinstance(value, Mapping):
        return {key: from_struct(item) for key, item in value.items()}
    if isinstance(value, list):
        return [from_struct(item) for item in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
