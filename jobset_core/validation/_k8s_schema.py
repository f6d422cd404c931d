"""The Kubernetes object schema, read from the official ``kubernetes`` client's generated models.

The embedded Job template of a JobSet is plain data in our models. Its schema is not written
by hand here: every generated model class of the official client carries it
(``openapi_types`` gives each attribute's type, ``attribute_map`` its JSON name, and the
generated setters refuse ``None`` for required fields when client-side validation is on).

This is the only module of the pure core that touches the ``kubernetes`` package, and it does
so lazily, inside functions, so importing the core never imports the client. Importing the
client's ~700 generated models costs a process about 0.5 s of CPU (seconds on a busy machine),
so the tables read from them are kept in a cache file keyed by the client's version
(:mod:`jobset_core.filecache`): a later process, such as
the next ``jobsetctl validate`` or DAG parse, reads that instead of importing the client. Where
the file cannot be written, the tables are read from the client every time.

Three facts the client models do not carry are kept as small tables here, and a test checks them
against the JobSet CRD (``x-kubernetes-int-or-string``, ``format`` and
``x-kubernetes-list-map-keys`` under the Job template), so they cannot drift:

* resource quantities are typed ``str`` by the client but accept numbers (``cpu: 1``), with the
  API server's own syntax (:mod:`._quantity`);
* integers are ``int32`` or ``int64``: the API server cannot decode a larger value;
* lists the CRD declares as maps must not repeat a key (e.g. two ``env`` entries ``FOO``).

Different installed client versions know different Kubernetes fields: the kfp side pins client
30 (Kubernetes 1.30), the Airflow side 36 (1.36). An unknown field says which client decided,
so a field newer than the client can be carried with ``allow_unknown_fields=True``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from jobset_core import filecache
from jobset_core.errors import CARRY_UNKNOWN, Problem, format_path
from jobset_core.validation._quantity import quantity_error

__all__ = [
    "INT64_FIELDS",
    "LIST_MAP_KEYS",
    "NOT_REQUIRED",
    "QUANTITY_FIELDS",
    "ROOTS",
    "check_object",
    "client_version",
]

Loc = tuple[str | int, ...]

#: ``(client model class, attribute)`` of resource quantities: ``str`` in the client, but the
#: API accepts a JSON number as well (``x-kubernetes-int-or-string``).
QUANTITY_FIELDS: frozenset[tuple[str, str]] = frozenset(
    {
        ("V1EmptyDirVolumeSource", "size_limit"),
        ("V1PersistentVolumeClaimStatus", "allocated_resources"),
        ("V1PersistentVolumeClaimStatus", "capacity"),
        ("V1PodSpec", "overhead"),
        ("V1ResourceFieldSelector", "divisor"),
        ("V1ResourceRequirements", "limits"),
        ("V1ResourceRequirements", "requests"),
        ("V1VolumeResourceRequirements", "limits"),
        ("V1VolumeResourceRequirements", "requests"),
    }
)

#: ``(client model class, attribute)`` of the integers the CRD declares ``format: int64``; every
#: other integer is ``int32`` (the client types both as ``int``).
INT64_FIELDS: frozenset[tuple[str, str]] = frozenset(
    {
        ("V1JobSpec", "active_deadline_seconds"),
        ("V1PodSecurityContext", "fs_group"),
        ("V1PodSecurityContext", "run_as_group"),
        ("V1PodSecurityContext", "run_as_user"),
        ("V1PodSecurityContext", "supplemental_groups"),
        ("V1PodSpec", "active_deadline_seconds"),
        ("V1PodSpec", "termination_grace_period_seconds"),
        ("V1Probe", "termination_grace_period_seconds"),
        ("V1SecurityContext", "run_as_group"),
        ("V1SecurityContext", "run_as_user"),
        ("V1ServiceAccountTokenProjection", "expiration_seconds"),
        ("V1SleepAction", "seconds"),
        ("V1Toleration", "toleration_seconds"),
    }
)

#: ``(client model class, attribute)`` that older clients mark required but the JobSet v0.12.0
#: CRD (Kubernetes 1.36 schema) does not: Kubernetes now defaults them.
NOT_REQUIRED: frozenset[tuple[str, str]] = frozenset(
    {("V1PodFailurePolicyOnPodConditionsPattern", "status")}
)

#: ``(client model class, attribute) -> key fields (JSON spelling)`` of the lists the CRD
#: declares ``x-kubernetes-list-type: map`` (``()`` for ``set``): the API server rejects
#: duplicate keys.
LIST_MAP_KEYS: Mapping[tuple[str, str], tuple[str, ...]] = {
    ("V1Container", "env"): ("name",),
    ("V1Container", "ports"): ("containerPort", "protocol"),
    ("V1Container", "volume_devices"): ("devicePath",),
    ("V1Container", "volume_mounts"): ("mountPath",),
    ("V1ContainerRestartRuleOnExitCodes", "values"): (),
    ("V1EphemeralContainer", "env"): ("name",),
    ("V1EphemeralContainer", "ports"): ("containerPort", "protocol"),
    ("V1EphemeralContainer", "volume_devices"): ("devicePath",),
    ("V1EphemeralContainer", "volume_mounts"): ("mountPath",),
    ("V1PersistentVolumeClaimStatus", "conditions"): ("type",),
    ("V1PodFailurePolicyOnExitCodesRequirement", "values"): (),
    ("V1PodSpec", "containers"): ("name",),
    ("V1PodSpec", "ephemeral_containers"): ("name",),
    ("V1PodSpec", "host_aliases"): ("ip",),
    ("V1PodSpec", "image_pull_secrets"): ("name",),
    ("V1PodSpec", "init_containers"): ("name",),
    ("V1PodSpec", "resource_claims"): ("name",),
    ("V1PodSpec", "scheduling_gates"): ("name",),
    ("V1PodSpec", "topology_spread_constraints"): ("topologyKey", "whenUnsatisfiable"),
    ("V1PodSpec", "volumes"): ("name",),
    ("V1ResourceRequirements", "claims"): ("name",),
}

_PRIMITIVE_NAMES = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "datetime": "string",
    "date": "string",
}


@dataclass(frozen=True)
class _Field:
    attr: str
    type: str
    required: bool


def client_version() -> str:
    """The installed ``kubernetes`` client's version, e.g. ``30.1.0`` (read from the package's
    metadata, without importing it).

    The name of the ``dist-info`` folder beside the package says it: found without
    ``importlib.metadata``, whose import and search of every installed distribution cost a
    ``jobsetctl validate`` start about 25 ms in an Airflow environment. Anything else (an
    egg, a zip, two folders) is asked through ``importlib.metadata``.
    """
    import importlib.util

    spec = importlib.util.find_spec("kubernetes")  # finds it; imports nothing of it
    if spec is not None and spec.origin:
        site = Path(spec.origin).parent.parent
        infos = [p.name for p in site.glob("kubernetes-*.dist-info") if p.is_dir()]
        if len(infos) == 1:
            return infos[0].removeprefix("kubernetes-").removesuffix(".dist-info")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kubernetes")
    except PackageNotFoundError:  # not installed as a distribution: ask the package itself
        import kubernetes

        return str(kubernetes.__version__)


def _kubernetes_minor() -> str:
    # Client major N is generated from Kubernetes 1.N.
    return "1." + client_version().split(".", 1)[0]


#: The client classes :func:`check_object` starts from: a Job template's spec and a volume
#: claim template. The tables hold these and the classes their fields reach (120 of the
#: client's 767 at client 36), so a process reads a sixth of the file it would otherwise.
ROOTS: tuple[str, ...] = ("V1JobSpec", "V1PersistentVolumeClaim")

#: Bumped when the cached tables change shape (2: client 37's pydantic models read; 3: only
#: the classes reached from :data:`ROOTS`).
_CACHE_FORMAT = 3


def _fields(class_name: str) -> dict[str, _Field]:
    """JSON name -> field of one generated model class."""
    return schema_tables()[class_name]


@cache
def schema_tables() -> dict[str, dict[str, _Field]]:
    """The generated model classes :data:`ROOTS` reach: JSON name -> field; from the cache
    file when it holds this client's tables, else read from the client (and cached)."""
    name = _cache_name()
    raw = filecache.read(name)
    if isinstance(raw, dict):
        try:
            return {
                name: {key: _Field(*field) for key, field in fields.items()}
                for name, fields in raw.items()
            }
        except (AttributeError, ValueError, TypeError):
            pass  # not this shape: read again
    tables = read_client_tables()
    plain = {n: {k: [f.attr, f.type, f.required] for k, f in t.items()} for n, t in tables.items()}
    filecache.write(name, plain)
    return tables


def cache_file() -> Path:
    """Where this client version's tables are cached (see the module's docstring)."""
    return filecache.folder() / _cache_name()


def _cache_name() -> str:
    version = client_version()
    key = f"{version}|{_CACHE_FORMAT}|{sorted(NOT_REQUIRED)}|{ROOTS}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return f"k8s-schema-{version}-{digest}.json"


def read_client_tables() -> dict[str, dict[str, _Field]]:
    """The tables of the generated model classes :data:`ROOTS` reach, read from the installed
    client.

    Two generations of generated models are read: up to client 36 plain classes whose setters
    refuse ``None`` for a required field when client-side validation is on (a probe instance
    tells which ones), from client 37 pydantic models whose ``model_fields`` say it, with type
    names spelled the ``typing`` way (``List[str]``, ``Dict[str, str]``), read here in the older
    spelling (``list[str]``, ``dict[str, str]``) so the tables mean the same for both.
    """
    import kubernetes.client

    config = kubernetes.client.Configuration.get_default_copy()
    config.client_side_validation = True
    tables: dict[str, dict[str, _Field]] = {}
    for class_name in dir(kubernetes.client):
        cls = getattr(kubernetes.client, class_name)
        if not (isinstance(cls, type) and hasattr(cls, "openapi_types")):
            continue
        if not hasattr(cls, "attribute_map"):
            continue
        required_attrs = _required_attrs(cls, config)
        tables[class_name] = {
            cls.attribute_map[attr]: _Field(
                attr,
                _type_name(type_),
                attr in required_attrs and (class_name, attr) not in NOT_REQUIRED,
            )
            for attr, type_ in cls.openapi_types.items()
        }
    return reached(tables, ROOTS)


def reached(
    tables: Mapping[str, dict[str, _Field]], roots: tuple[str, ...]
) -> dict[str, dict[str, _Field]]:
    """The tables of ``roots`` and of every class their fields name, directly or inside lists
    and maps, in the order they are first reached."""
    out: dict[str, dict[str, _Field]] = {}
    todo = [name for name in roots if name in tables]
    while todo:
        name = todo.pop(0)
        if name in out:
            continue
        out[name] = tables[name]
        todo.extend(
            inner for field in out[name].values() if (inner := _named(field.type)) in tables
        )
    return out


def _named(type_: str) -> str:
    """The class or primitive a field's type names, inside any ``list[...]`` and maps."""
    while True:
        if type_.startswith("list["):
            type_ = type_[5:-1]
        elif type_.startswith(("dict(", "dict[")):
            type_ = type_[type_.index(",") + 1 : -1].strip()
        else:
            return type_


def _required_attrs(cls: Any, config: Any) -> set[str]:
    """The attributes of one generated model class that the API requires."""
    model_fields = getattr(cls, "model_fields", None)
    if isinstance(model_fields, Mapping):  # client 37+: a pydantic model
        return {attr for attr, info in model_fields.items() if info.is_required()}
    probe: Any = object.__new__(cls)
    probe.local_vars_configuration = config
    required: set[str] = set()
    for attr in cls.openapi_types:
        try:
            setattr(probe, attr, None)
        except ValueError:
            required.add(attr)
    return required


def _type_name(type_: str) -> str:
    """A generated type name in the spelling of clients up to 36: ``List[X]`` -> ``list[X]``,
    ``Dict[str, X]`` -> ``dict[str, X]``, ``bytes`` (base64 in JSON) -> ``str``."""
    type_ = type_.strip()
    if type_.startswith("List[") and type_.endswith("]"):
        return f"list[{_type_name(type_[5:-1])}]"
    if type_.startswith("Dict[") and type_.endswith("]"):
        key, _, value = type_[5:-1].partition(",")
        return f"dict[{key.strip()}, {_type_name(value)}]"
    if type_ == "bytes":
        return "str"
    return type_


def check_object(
    data: Any, class_name: str, loc: Loc, *, allow_unknown_fields: bool = False
) -> list[Problem]:
    """Check plain data against a model of the official client (e.g. ``V1JobSpec``).

    Reports unknown fields, wrong JSON types, missing required fields, malformed quantities
    and duplicate keys in lists the API treats as maps, each with its full field path.
    """
    walker = _Walker(allow_unknown_fields)
    walker.model(data, class_name, loc)
    return walker.problems


class _Walker:
    def __init__(self, allow_unknown: bool) -> None:
        self.allow_unknown = allow_unknown
        self.problems: list[Problem] = []

    def add(self, loc: Loc, message: str, rule: str) -> None:
        self.problems.append(Problem(format_path(loc), message, rule))

    def model(self, data: Any, class_name: str, loc: Loc) -> None:
        if not isinstance(data, Mapping):
            self.add(loc, f"must be of type object; got {_json_type(data)}", "type")
            return
        fields = _fields(class_name)
        for key, value in data.items():
            known = fields.get(key) if isinstance(key, str) else None
            if known is None:
                if not self.allow_unknown:
                    self.add((*loc, str(key)), self._unknown(str(key), fields), "unknown-field")
                continue
            if value is None:
                continue
            pair = (class_name, known.attr)
            kind = (
                "quantity" if pair in QUANTITY_FIELDS else "int64" if pair in INT64_FIELDS else ""
            )
            self.value(value, known.type, (*loc, key), kind)
            list_keys = LIST_MAP_KEYS.get((class_name, known.attr))
            if list_keys is not None and isinstance(value, list):
                self.unique(value, list_keys, (*loc, key))
        for key, known in fields.items():
            if known.required and data.get(key) is None:
                self.add((*loc, key), "required field is missing", "required")

    def value(self, value: Any, type_: str, loc: Loc, kind: str = "") -> None:
        if type_.startswith("list["):
            if not isinstance(value, list):
                self.add(loc, f"must be of type array; got {_json_type(value)}", "type")
                return
            inner = type_[5:-1]
            for index, item in enumerate(value):
                if item is not None:
                    self.value(item, inner, (*loc, index), kind)
                elif _is_model(inner):
                    # The API server decodes a null item as a zero-valued object.
                    self.model({}, inner, (*loc, index))
        elif type_.startswith(("dict(", "dict[")):
            if not isinstance(value, Mapping):
                self.add(loc, f"must be of type object; got {_json_type(value)}", "type")
                return
            inner = type_[type_.index(",") + 1 : -1].strip()
            for key, item in value.items():
                if item is not None:
                    self.value(item, inner, (*loc, str(key)), kind)
        elif type_ == "object":
            return
        elif type_ in _PRIMITIVE_NAMES:
            self.primitive(value, type_, loc, kind)
        else:
            self.model(value, type_, loc)

    def primitive(self, value: Any, type_: str, loc: Loc, kind: str) -> None:
        if kind == "quantity":
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                self.add(
                    loc, f"must be a quantity (string or number); got {_json_type(value)}", "type"
                )
            elif quantity_error(value):
                self.add(loc, quantity_error(value), "quantity")
            return
        ok = {
            "str": isinstance(value, str),
            "datetime": isinstance(value, str),
            "date": isinstance(value, str),
            "bool": isinstance(value, bool),
            # The API server decodes integral JSON numbers (1.0) as integers.
            "int": _is_int(value),
            "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        }[type_]
        if not ok:
            expected = _PRIMITIVE_NAMES[type_]
            self.add(loc, f"must be of type {expected}; got {_json_type(value)}", "type")
        elif type_ == "int":
            bits = 64 if kind == "int64" else 32
            if not -(2 ** (bits - 1)) <= int(value) < 2 ** (bits - 1):
                self.add(
                    loc,
                    f"must be an int{bits} (from {-(2 ** (bits - 1))} to {2 ** (bits - 1) - 1}); "
                    f"the API server cannot decode {int(value)}",
                    "int-range",
                )

    def unique(self, items: list[Any], keys: tuple[str, ...], loc: Loc) -> None:
        seen: dict[Any, int] = {}
        for index, item in enumerate(items):
            if keys:
                if not isinstance(item, Mapping):
                    continue
                key: Any = tuple(_hashable(item.get(k)) for k in keys)
                shown = ", ".join(f"{k}={item.get(k)!r}" for k in keys)
            else:
                key, shown = _hashable(item), repr(item)
            if key in seen:
                self.add(
                    (*loc, index), f"Duplicate value: {shown} (same as [{seen[key]}])", "duplicate"
                )
            else:
                seen[key] = index

    def _unknown(self, key: str, fields: Mapping[str, _Field]) -> str:
        import difflib  # only for a key that is wrong

        close = difflib.get_close_matches(key, list(fields), n=1)
        guess = f"did you mean {close[0]!r}? If not, it " if close else "it "
        return (
            f"unknown field ({guess}may be newer than the installed kubernetes client "
            f"{client_version()}, which knows Kubernetes {_kubernetes_minor()}: "
            f"{CARRY_UNKNOWN})"
        )


def _is_model(type_: str) -> bool:
    return not type_.startswith(("list[", "dict(", "dict[")) and type_ not in (
        *_PRIMITIVE_NAMES,
        "object",
    )


def _is_int(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _hashable(value: Any) -> Any:
    return value if isinstance(value, (str, int, float, bool, type(None))) else repr(value)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"
