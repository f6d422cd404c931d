"""Requests per hour from a short window (pure).

A subject's steady requests are of two sorts. Polls (``get``, ``list``...) come at the rate
they come: counted over the window, they scale to an hour as they are. Watches are reopened
once per watch window, and the bench shortens that window for the subjects that keep watches
open (our observer's 600 s, 120 s for Events, and the server's 30-60 minutes for a watch
that asks for no timeout), so that two reopenings fit in a window of a minute. Their hourly
count is then each open stream reopened at its production window: what a real hour costs,
from what the window measured (how many streams, and that each reopening is one request).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Hourly", "hourly"]


@dataclass(frozen=True)
class Hourly:
    """A subject's requests per hour.

    Attributes:
        measured: At the bench's windows, as counted (requests per hour).
        production: With every watch reopened at its production window.
        polls: The part of both that is not watches (per hour).
        streams: Watch streams open, by resource.
    """

    measured: float
    production: float
    polls: float
    streams: Mapping[str, int]


def hourly(
    counts: Counter[tuple[str, str]],
    seconds: float,
    streams: Mapping[str, int],
    production_window: Mapping[str, float] | None,
) -> Hourly:
    """Requests per hour from ``counts`` (by verb and resource) over ``seconds``.

    Args:
        counts: Requests in the window, by (verb, resource).
        seconds: The window's length.
        streams: Watches open during the window, by resource.
        production_window: Seconds each resource's watch stays open in production (``"*"``
            for every other resource), when the bench shortened it; ``None``: the windows
            were not shortened, the watches count as measured.
    """
    per_hour = 3600.0 / seconds
    watches = sum(n for (verb, _), n in counts.items() if verb == "watch")
    polls = (sum(counts.values()) - watches) * per_hour
    measured = sum(counts.values()) * per_hour
    if production_window is None:
        production = measured
    else:
        reopened = sum(
            n * 3600.0 / production_window.get(resource, production_window["*"])
            for resource, n in streams.items()
        )
        production = polls + reopened
    return Hourly(measured, production, polls, dict(streams))
