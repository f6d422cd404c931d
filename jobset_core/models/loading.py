"""Loading JobSets from what users have at hand, and dumping them back.

Accepted sources: a :class:`JobSet`, a mapping, a YAML/JSON string (one or many documents),
a path to a ``.yaml``/``.yml``/``.json`` file, or objects of the official ``kubernetes`` client
anywhere inside a mapping. Every problem is reported at once, with its field path; unknown
fields are errors unless ``allow_unknown_fields=True`` (to carry fields newer than the models).

Input is read within the hard limits of :mod:`jobset_core.limits` (file size, nesting depth,
YAML alias expansion; see :mod:`._input`): past one, the source is refused as a whole. A key
written twice in a mapping and more than :data:`._input.MAX_DOCUMENTS` documents refuse the
file too, and a document larger than :data:`MAX_OBJECT_BYTES` as JSON (what the API server
reads in one request) is refused before its fields are read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import IO, Any

import yaml
from pydantic import ValidationError

from jobset_core.errors import CARRY_UNKNOWN, Problem, SpecError, format_path
from jobset_core.limits import MAX_FILE_BYTES, MAX_OBJECT_BYTES
from jobset_core.models._base import to_plain, unknown_fields
from jobset_core.models._input import (
    check_plain,
    check_text_size,
    decode,
    load_yaml_documents,
    read_bounded,
)
from jobset_core.models.jobset import JobSet
from jobset_core.resources import JOBSET

__all__ = [
    "MAX_OBJECT_BYTES",
    "JobSetSource",
    "dump_yaml",
    "load_jobset",
    "load_jobsets",
    "read_stream",
    "source_label",
]

JobSetSource = JobSet | Mapping[str, Any] | str | os.PathLike[str]

_FILE_SUFFIXES = (".yaml", ".yml", ".json")


def load_jobset(source: JobSetSource, *, allow_unknown_fields: bool = False) -> JobSet:
    """Load exactly one JobSet; see :func:`load_jobsets` for the accepted sources.

    Raises:
        SpecError: the source holds no JobSet, several, or an invalid one.
    """
    jobsets = load_jobsets(source, allow_unknown_fields=allow_unknown_fields)
    if len(jobsets) != 1:
        raise SpecError(
            [Problem("", f"expected exactly one JobSet, found {len(jobsets)}", "one-document")],
            _describe(source),
        )
    return jobsets[0]


def load_jobsets(source: JobSetSource, *, allow_unknown_fields: bool = False) -> list[JobSet]:
    """Load every JobSet of a source (all documents of a multi-document YAML).

    Raises:
        SpecError: with one :class:`Problem` per wrong field of every document.
    """
    label = _describe(source)
    if isinstance(source, JobSet):
        documents: list[Any] = [source.to_dict()]
    elif isinstance(source, Mapping):
        check_plain(source, label)
        documents = [source]
    elif isinstance(source, (str, os.PathLike)):
        documents = _read_documents(source)
    else:
        raise TypeError(
            "a JobSet source is a JobSet, a mapping, YAML/JSON text or a path to a "
            f".yaml/.yml/.json file, not {type(source).__name__}"
        )
    jobsets: list[JobSet] = []
    problems: list[Problem] = []
    multi = len(documents) > 1
    for index, document in enumerate(documents):
        prefix: tuple[str | int, ...] = (f"<document {index}>",) if multi else ()
        try:
            jobsets.append(_parse(document, allow_unknown_fields, prefix))
        except SpecError as err:
            problems.extend(err.problems)
    if problems:
        raise SpecError(problems, label)
    return jobsets


def read_stream(stream: IO[Any]) -> str:
    """The text of a stream (standard input), read within
    :data:`~jobset_core.limits.MAX_FILE_BYTES`: binary when the stream has a ``buffer``, so an
    endless or huge input costs at most that many bytes.

    Raises:
        SpecError: too large, or not UTF-8.
    """
    binary = getattr(stream, "buffer", None)
    if binary is not None:
        return read_bounded(binary, None)
    data = stream.read(MAX_FILE_BYTES + 1)
    if isinstance(data, bytes):
        return decode(data, None)
    check_text_size(data, None)
    return str(data)


def dump_yaml(objects: JobSet | Iterable[JobSet | Mapping[str, Any]]) -> str:
    """Dump one or many objects as (multi-document) YAML in API spelling, keys in given order."""
    items = [objects] if isinstance(objects, JobSet) else list(objects)
    plain = [item.to_dict() if isinstance(item, JobSet) else to_plain(item) for item in items]
    return yaml.safe_dump_all(plain, sort_keys=False, default_flow_style=False)


def source_label(source: Any) -> str | None:
    """The file a JobSet source names (a path), as errors name it; ``None`` for text, a
    mapping or a model."""
    return _describe(source)


def _describe(source: Any) -> str | None:
    if isinstance(source, os.PathLike):
        return str(os.fspath(source))
    if isinstance(source, str) and _looks_like_path(source):
        return source
    return None


def _looks_like_path(text: str) -> bool:
    return "\n" not in text and text.strip().lower().endswith(_FILE_SUFFIXES)


def _read_documents(source: str | os.PathLike[str]) -> list[Any]:
    label = _describe(source)
    if isinstance(source, os.PathLike) or _looks_like_path(source):
        text = read_bounded(source, label)
    else:
        text = source
    return load_yaml_documents(text, label)


def _parse(document: Any, allow_unknown: bool, prefix: tuple[str | int, ...]) -> JobSet:
    data = to_plain(document, keep_none=True)
    if not isinstance(data, dict):
        raise SpecError(
            [Problem(format_path(prefix), "expected a mapping (a JobSet object)", "type")]
        )
    too_big = object_size_problem(data, prefix)
    if too_big is not None:
        raise SpecError([too_big])
    kind, api_version = data.get("kind"), data.get("apiVersion")
    if kind != JOBSET.kind or api_version != JOBSET.api_version:
        raise SpecError(
            [
                Problem(
                    format_path(prefix),
                    f"expected kind JobSet, apiVersion {JOBSET.api_version}; "
                    f"got kind {kind!r}, apiVersion {api_version!r}",
                    "kind",
                )
            ]
        )
    problems: list[Problem] = []
    if not allow_unknown:
        problems = [
            Problem(
                format_path((*prefix, *loc)),
                f"unknown field (not part of jobset.x-k8s.io/v1alpha2 v0.12.0; {CARRY_UNKNOWN})",
                "unknown-field",
            )
            for loc in unknown_fields(JobSet, data)
        ]
    try:
        jobset = JobSet.model_validate(data)
    except ValidationError as err:
        raise SpecError(sorted([*problems, *_problems_from_pydantic(err, prefix)])) from err
    if problems:
        raise SpecError(problems)
    return jobset


def object_size_problem(data: Mapping[str, Any], prefix: tuple[str | int, ...]) -> Problem | None:
    """The problem of a document larger than :data:`MAX_OBJECT_BYTES` as compact JSON, if it is
    (a lower bound of any JSON body: values JSON cannot carry count as an empty string)."""
    size = _json_bytes(data)
    if size > MAX_OBJECT_BYTES:
        size = _json_bytes(_integral_floats_as_ints(data))  # Go writes 1.0 as 1
    if size <= MAX_OBJECT_BYTES:
        return None
    return Problem(
        format_path(prefix),
        f"{size} bytes as JSON: larger than the {MAX_OBJECT_BYTES} bytes (3 MiB) the API server "
        "reads in one request (it answers 413 Request Entity Too Large); split it into several "
        "JobSets",
        "object-size",
    )


def _json_bytes(data: Any) -> int:
    text = json.dumps(
        data, separators=(",", ":"), ensure_ascii=False, skipkeys=True, default=lambda _: ""
    )
    return len(text.encode("utf-8", "surrogatepass"))


def _integral_floats_as_ints(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {key: _integral_floats_as_ints(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral_floats_as_ints(item) for item in value]
    return value


def _problems_from_pydantic(err: ValidationError, prefix: tuple[str | int, ...]) -> list[Problem]:
    problems = []
    for item in err.errors(include_url=False):
        loc = tuple(part for part in item["loc"] if not _is_pydantic_tag(part))
        message = item["msg"]
        if item["type"] == "literal_error":
            message = (
                f"must be one of {item.get('ctx', {}).get('expected', '')}; got {item['input']!r}"
            )
        elif item["type"] == "missing":
            message = "required field is missing"
        problems.append(Problem(format_path((*prefix, *loc)), message, item["type"]))
    return problems


def _is_pydantic_tag(part: Any) -> bool:
    # pydantic inserts validator tags such as "function-after[...]" into locations.
    return isinstance(part, str) and ("[" in part or part.startswith("function-"))
