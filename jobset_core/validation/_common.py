"""Small shared pieces of the validation rules: the problem collector and safe readers.

The rules read the embedded Job template, which is plain user data: a value of the wrong
type is reported once by the schema check, and the readers here simply return ``None`` (or
an empty container) for it, so no rule crashes on malformed input.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from jobset_core.errors import Problem, format_path
from jobset_core.models import JobSet

__all__ = [
    "Collector",
    "Loc",
    "as_int",
    "as_list",
    "as_map",
    "as_str",
    "effective_name",
    "sort_problems",
    "unsupported",
]

Loc = tuple[str | int, ...]

_GENERATED_SUFFIX = "abcde"  # the API server appends 5 random characters to generateName


class Collector:
    """Accumulates problems; rules never stop at the first one."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, loc: Loc, message: str, rule: str) -> None:
        """Record one problem at a location given as a tuple of keys and indexes."""
        self.problems.append(Problem(format_path(loc), message, rule))

    def extend(self, loc: Loc, messages: Iterable[str], rule: str) -> None:
        """Record one problem per message, all at the same location."""
        for message in messages:
            self.add(loc, message, rule)


def as_int(value: Any) -> int | None:
    """An integer (integral floats count, as the API server decodes them), else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def as_str(value: Any) -> str | None:
    """A string, else ``None``."""
    return value if isinstance(value, str) else None


def as_map(value: Any) -> Mapping[str, Any]:
    """A mapping, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def as_list(value: Any) -> list[Any]:
    """A list, else an empty one."""
    return value if isinstance(value, list) else []


def _path_key(problem: Problem) -> tuple[Any, ...]:
    # Natural order: spec.replicatedJobs[2] before spec.replicatedJobs[10].
    parts = re.split(r"\[(\d+)\]", problem.path)
    key = tuple((0, int(part), "") if i % 2 else (1, 0, part) for i, part in enumerate(parts))
    return (key, problem.message, problem.rule)


def sort_problems(problems: Iterable[Problem]) -> list[Problem]:
    """Deduplicated problems in field-path order (indexes compared as numbers)."""
    unique = {(p.path, p.message, p.rule): p for p in problems}
    return sorted(unique.values(), key=_path_key)


def unsupported(value: Any, supported: Collection[str]) -> str:
    """The API server's ``NotSupported`` message."""
    shown = ", ".join(f'"{item}"' for item in sorted(supported))
    return f"Unsupported value: {value!r}: supported values: {shown}"


def effective_name(jobset: JobSet) -> str:
    """The name the webhook sees: ``metadata.name``, or ``generateName`` plus 5 characters."""
    if jobset.metadata.name:
        return jobset.metadata.name
    prefix = jobset.metadata.generate_name or ""
    return prefix[: 63 - len(_GENERATED_SUFFIX)] + _GENERATED_SUFFIX if prefix else ""
