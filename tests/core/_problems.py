"""The one check of the validation tables: the problems found are exactly the expected
``(path, rule)`` pairs, and each carries its expected message fragment."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from jobset_core.errors import Problem


def assert_problems(problems: Sequence[Problem], expected: Iterable[tuple[str, str, str]]) -> None:
    """``expected``: ``(path, rule, message fragment)`` triples."""
    expected = list(expected)
    assert sorted((p.path, p.rule) for p in problems) == sorted(
        (path, rule) for path, rule, _ in expected
    )
    for path, rule, fragment in expected:
        messages = [p.message for p in problems if (p.path, p.rule) == (path, rule)]
        assert any(fragment in m for m in messages), (path, rule, fragment, messages)
