"""The one base class of every model, and the conversion of foreign objects to plain data.

Models are pure data in the API's own spelling (camelCase aliases, ``populate_by_name`` so
Python code may use snake_case). Every model *carries* unknown fields (``extra="allow"``) so a
dump never loses what a newer controller or API server wrote; whether an unknown field is an
error is decided when loading user input (:func:`unknown_fields`), not by the model.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, model_validator
from pydantic.alias_generators import to_camel

__all__ = [
    "Bool",
    "Int32",
    "Int64",
    "K8sModel",
    "NonNegInt32",
    "Str",
    "to_plain",
    "unknown_fields",
]

Int32 = Annotated[StrictInt, Field(ge=-(2**31), le=2**31 - 1)]
#: Server-written int64 fields (``metadata.generation``): lax, as the API sends them.
Int64 = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]
NonNegInt32 = Annotated[StrictInt, Field(ge=0, le=2**31 - 1)]
Str = StrictStr
Bool = StrictBool


def _rfc3339(value: _dt.datetime) -> str:
    if value.tzinfo is not None:
        value = value.astimezone(_dt.UTC).replace(tzinfo=None)
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


def to_plain(value: Any, *, keep_none: bool = False) -> Any:
    """Turn objects of the official ``kubernetes`` client (or ``kubernetes_asyncio``) into the
    plain JSON-shaped data the API server would send, recursively.

    Objects are recognised by shape (``openapi_types`` + ``attribute_map``), so this module does
    not import either client. Timestamps become RFC 3339 strings; ``None`` attributes of client
    objects are dropped (they are unset), and so are ``null`` mapping values unless
    ``keep_none``: the API server treats a null field as absent but keeps a null map entry as
    the empty string, and rejects a null unknown field, so user input keeps its nulls until
    the schema says which they are.
    """
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, exclude_none=True, mode="json")
    if hasattr(value, "openapi_types") and hasattr(value, "attribute_map"):
        out: dict[str, Any] = {}
        for attr, key in value.attribute_map.items():
            item = getattr(value, attr, None)
            if item is not None:
                out[key] = to_plain(item, keep_none=keep_none)
        return out
    if isinstance(value, Mapping):
        return {
            str(k): to_plain(v, keep_none=keep_none)
            for k, v in value.items()
            if keep_none or v is not None
        }
    if isinstance(value, (list, tuple)):
        return [to_plain(v, keep_none=keep_none) for v in value]
    if isinstance(value, _dt.datetime):
        return _rfc3339(value)
    if isinstance(value, _dt.date):
        return value.isoformat()
    return value


class K8sModel(BaseModel):
    """Base of all models: API spelling, unknown fields carried, lossless dumps."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        validate_assignment=True,
        protected_namespaces=(),
    )

    @model_validator(mode="before")
    @classmethod
    def _accept_client_objects(cls, data: Any) -> Any:
        # Official client objects (V1ObjectMeta, ...) are accepted wherever a model is.
        if hasattr(data, "openapi_types") and hasattr(data, "attribute_map"):
            return to_plain(data)
        if isinstance(data, Mapping):
            # As for the API server: a null field of an object is an absent field, and a null
            # list item is the zero value of the item type ("" for a string, {} for an object).
            required, zeros = _not_nullable(cls), _list_zeros(cls)
            out = {k: v for k, v in data.items() if v is not None or k not in required}
            for key, zero in zeros.items():
                items = out.get(key)
                if isinstance(items, list) and None in items:
                    out[key] = [zero() if item is None else item for item in items]
            return out
        return data

    def to_dict(self) -> dict[str, Any]:
        """The object as the API server accepts it (camelCase keys, no ``None`` values)."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


@cache
def _not_nullable(model: type[BaseModel]) -> frozenset[str]:
    """Names and aliases of the fields whose type does not admit ``None``."""
    out: set[str] = set()
    for name, info in model.model_fields.items():
        if type(None) not in get_args(info.annotation) and info.annotation is not Any:
            out.update({name, info.alias or name})
    return frozenset(out)


@cache
def _list_zeros(model: type[BaseModel]) -> dict[str, Callable[[], Any]]:
    """Names and aliases of the list fields, with the zero value of their item type."""
    out: dict[str, Callable[[], Any]] = {}
    for name, info in model.model_fields.items():
        item = _list_item(info.annotation)
        if item is None:
            continue
        zero = _zero(item)
        if zero is not None:
            out[name] = out[info.alias or name] = zero
    return out


def _list_item(annotation: Any) -> Any:
    if get_origin(annotation) is list:
        return get_args(annotation)[0]
    for arg in get_args(annotation):
        if get_origin(arg) is list:
            return get_args(arg)[0]
    return None


def _zero(item: Any) -> Callable[[], Any] | None:
    base = get_args(item)[0] if get_origin(item) is Annotated else item
    if base is str or get_origin(base) is Literal:
        return str
    if base is int:
        return int
    if base is bool:
        return bool
    # get_origin: on Python 3.10 a parametrized generic such as list[int] passes isinstance(type).
    if isinstance(base, type) and get_origin(base) is None and issubclass(base, BaseModel):
        return dict
    return None


def unknown_fields(
    model: type[BaseModel], data: Any, loc: tuple[str | int, ...] = ()
) -> Iterator[tuple[str | int, ...]]:
    """Yield the location of every key of raw ``data`` that the model ``model`` does not declare.

    Works on the raw input (before validation), so unknown fields are reported together with
    type errors. Free-form fields (``dict[str, Any]`` such as the embedded Job spec) are not
    looked into: validation checks them against the Kubernetes schema.
    """
    if not isinstance(data, Mapping):
        return
    by_alias = {(info.alias or name): info for name, info in model.model_fields.items()}
    by_name = model.model_fields
    for key, value in data.items():
        info = by_alias.get(key) or by_name.get(key)
        if info is None:
            yield (*loc, key)
            continue
        inner = _model_in(info.annotation)
        if inner is None:
            continue
        model_cls, is_list = inner
        if is_list and isinstance(value, list):
            for i, item in enumerate(value):
                yield from unknown_fields(model_cls, item, (*loc, key, i))
        elif not is_list:
            yield from unknown_fields(model_cls, value, (*loc, key))


def _model_in(annotation: Any) -> tuple[type[BaseModel], bool] | None:
    """The model class inside ``M``, ``M | None``, ``list[M]`` or ``list[M] | None``."""
    origin = get_origin(annotation)
    if isinstance(annotation, type) and origin is None and issubclass(annotation, BaseModel):
        return annotation, False
    args = [a for a in get_args(annotation) if a is not type(None)]
    if origin is list and args:
        found = _model_in(args[0])
        return (found[0], True) if found and not found[1] else None
    if len(args) == 1 and origin is not list:
        return _model_in(args[0])
    return None
