"""Go ``regexp`` (RE2) patterns evaluated with Python's ``re``, as closely as is cheap.

Upstream matches ``onJobFailureMessagePatterns`` with ``regexp.MatchString`` (a search, not a
full match) and skips a pattern that does not compile. RE2 has no look-around, no
backreferences and no atomic groups, so patterns using them are treated as invalid here too.
``\\z`` (end of text) and Go's ``(?<name>...)`` group syntax are translated; ``\\d``, ``\\w``,
``\\s`` and ``\\b`` are ASCII-only as in RE2.

Known differences (rare in Job failure messages): ``$`` without ``(?m)`` also matches before a
final newline in Python, and ``(?i)`` folds only ASCII letters.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

__all__ = ["any_match", "compile_re2"]

# Constructs Python accepts but RE2 rejects: look-around, backreferences, atomic groups,
# possessive quantifiers, conditionals, comments and Python's \Z.
_NOT_RE2 = re.compile(r"\(\?(?:=|!|<=|<!|>|P=|\(|#)|\\[1-9Z]|\\g<|[*+?}]\+")


@functools.lru_cache(maxsize=256)
def compile_re2(pattern: str) -> re.Pattern[str] | None:
    """Compile an RE2 pattern, or ``None`` when Go's ``regexp`` would reject it.

    Args:
        pattern: The Go regular expression.

    Returns:
        A compiled pattern, or ``None`` for an invalid one.
    """
    if _NOT_RE2.search(pattern):
        return None
    translated = pattern.replace(r"\z", r"\Z").replace("(?<", "(?P<")
    try:
        return re.compile(translated, re.ASCII)
    except re.error:
        return None


def any_match(patterns: Iterable[str], text: str) -> bool:
    """Mirror ``anyMatchFound``: some valid pattern matches somewhere in ``text``.

    Args:
        patterns: Go regular expressions; invalid ones are skipped, as upstream does.
        text: The text to search (a Job's ``Failed`` condition message).

    Returns:
        Whether any valid pattern matches.
    """
    for pattern in patterns:
        compiled = compile_re2(pattern)
        if compiled is not None and compiled.search(text) is not None:
            return True
    return False
