"""No raw Sphinx role on a rendered page: the docs hook turns each role the Python handler
leaves (``:class:<code>...</code>``) into linked code, and fails the build on any other; nor
an unformatted signature."""

from __future__ import annotations

import pytest

from tests.docs._docs_gen import docs_gen


@pytest.mark.parametrize(
    ("html", "expected"),
    [
        (
            "a :class:<code>~jobset_core.models.JobSet</code>.",
            'a <autoref identifier="jobset_core.models.JobSet" optional>'
            "<code>JobSet</code></autoref>.",
        ),
        (
            ":func:<code>jobset_core.cli._parser</code>",
            '<autoref identifier="jobset_core.cli._parser" optional>'
            "<code>jobset_core.cli._parser</code></autoref>",
        ),
        (
            "(:mod:<code>._anchor</code>)",
            '(<autoref identifier="_anchor" optional><code>_anchor</code></autoref>)',
        ),
        (
            ":meth:<code>A.b</code> and :exc:<code>E</code>",
            '<autoref identifier="A.b" optional><code>A.b</code></autoref> and '
            '<autoref identifier="E" optional><code>E</code></autoref>',
        ),
        ("a <code>:class:</code> in prose stays", "a <code>:class:</code> in prose stays"),
    ],
    ids=["tilde", "full", "relative", "two", "not-a-role"],
)
def test_roles_become_cross_references(html: str, expected: str) -> None:
    assert docs_gen().cross_references(html) == expected


@pytest.mark.parametrize(
    ("html", "left"),
    [
        ("see :class:`Foo` here", True),
        ("see :py:func:<code>f</code>", False),  # read: becomes a cross-reference
        ("<p>ok</p>", False),
    ],
)
def test_a_role_the_hook_cannot_read_is_found(html: str, left: bool) -> None:
    gen = docs_gen()
    found = gen.raw_role_left(gen.cross_references(html))
    assert (found is not None) == left, found


def _signature(*lines: str) -> str:
    body = "\n".join(f'<span class="n">{line}</span>' for line in lines)
    return f'<div class="doc-signature highlight"><pre><code>{body}</code></pre></div>'


@pytest.mark.parametrize(
    ("html", "wide"),
    [
        (_signature("f(", "    a: int = 1,", "    b: str | None = None,", ")"), False),
        (_signature("f(" + ", ".join(f"arg{i}: str | None = None" for i in range(8)) + ")"), True),
        ("<p>" + "x" * 300 + "</p>", False),  # prose is not a signature
    ],
    ids=["formatted", "one-line", "prose"],
)
def test_an_unformatted_signature_is_found(html: str, wide: bool) -> None:
    assert (docs_gen().unformatted_signature(html) is not None) == wide
