"""``docs/concepts/validation.md`` shows the limits and the deliberate strictness exactly as
the code defines them: the tables between the markers are generated, and this test keeps them
equal."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from jobset_core.limits import limits_markdown
from jobset_core.validation.strictness import STRICTNESS, strictness_markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "concepts" / "validation.md"


@pytest.mark.parametrize(
    ("marker", "render"), [("limits", limits_markdown), ("strictness", strictness_markdown)]
)
def test_docs_show_the_table_of_the_code(marker: str, render: Callable[[], str]) -> None:
    text = DOC.read_text(encoding="utf-8")
    found = re.search(rf"<!-- BEGIN {marker}:[^\n]*-->\n(.*?)<!-- END {marker} -->", text, re.S)
    assert found, f"no {marker} table between markers in {DOC}"
    assert found.group(1) == render(), (
        f"docs/concepts/validation.md is out of date; the {marker} table is now:\n{render()}"
    )


def test_every_strictness_entry_is_documented_once() -> None:
    rules = [item.rule for item in STRICTNESS]
    assert len(rules) == len(set(rules))
    assert all(item.rejects and item.upstream for item in STRICTNESS)
