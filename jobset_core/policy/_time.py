"""RFC 3339 timestamps as the API server writes them (``metav1.Time``), parsed and formatted.

Kept apart so every policy module compares times the same way: absent or unparsable
timestamps count as Go's zero time (the earliest instant), exactly like an unset
``metav1.Time`` does upstream.
"""

from __future__ import annotations

import datetime as _dt
import re

__all__ = ["ZERO_TIME", "format_time", "parse_time"]

#: Go's zero ``time.Time`` (what an unset ``metav1.Time`` compares as).
ZERO_TIME = _dt.datetime(1, 1, 1, tzinfo=_dt.UTC)

_RFC3339 = re.compile(
    r"^(?P<base>\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2})"
    r"(?:\.(?P<frac>\d+))?"
    r"(?P<tz>[Zz]|[+-]\d{2}:\d{2})$"
)


def parse_time(value: str | None) -> _dt.datetime | None:
    """Parse an RFC 3339 timestamp (``2024-01-02T03:04:05Z``, fractions and offsets allowed).

    Args:
        value: The timestamp, or ``None``.

    Returns:
        An aware UTC datetime, or ``None`` when absent or not RFC 3339.
    """
    if not value:
        return None
    match = _RFC3339.match(value.strip())
    if match is None:
        return None
    frac = (match.group("frac") or "")[:6].ljust(6, "0")
    tz = match.group("tz")
    offset = "+00:00" if tz in ("Z", "z") else tz
    text = f"{match.group('base').replace(' ', 'T').replace('t', 'T')}.{frac}{offset}"
    try:
        parsed = _dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed.astimezone(_dt.UTC)


def format_time(value: _dt.datetime) -> str:
    """Format a datetime the way ``metav1.Time`` serializes (UTC, second precision, ``Z``).

    Args:
        value: An aware datetime (a naive one is taken as UTC).

    Returns:
        The RFC 3339 string, e.g. ``2024-01-02T03:04:05Z``.
    """
    if value.tzinfo is not None:
        value = value.astimezone(_dt.UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")
