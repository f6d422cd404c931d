"""The pure half of the client layer, retries: which failed calls are tried again, and
after how long (re-exported by :mod:`jobset_core.client._core`). Nothing here performs I/O,
sleeps or reads a clock: the shell passes the random draw."""

from __future__ import annotations

from dataclasses import dataclass

from jobset_core.errors import (
    ApiError,
    Forbidden,
    JobSetError,
    ServerError,
    TooManyRequests,
    Unreachable,
)

__all__ = ["DEFAULT_RETRY", "FORBIDDEN_ATTEMPTS", "RetryPolicy", "retry_delay"]


@dataclass(frozen=True)
class RetryPolicy:
    """How throttling (429), server errors (5xx) and lost answers to reads, deletes and
    creates of fixed names are retried. The default (seven attempts, 0.5 s doubling up to
    10 s) keeps trying for about 25 s: long enough for an API server that restarts on a
    loaded machine (the soak saw one refuse connections, then answer 503 while it installed
    its paths, for 19 s).

    Attributes:
        max_attempts: Attempts in total, the first one included (1 disables retries).
        base_delay: Backoff before the second attempt, in seconds.
        multiplier: Growth of the backoff per attempt.
        max_delay: Cap of the backoff (a ``Retry-After`` is capped by ``max_retry_after``).
        jitter: Fraction of the backoff randomised (0.5 → between 50 % and 150 %).
        max_retry_after: The longest ``Retry-After`` honoured; longer ones surface the error.
    """

    max_attempts: int = 7
    base_delay: float = 0.5
    multiplier: float = 2.0
    max_delay: float = 10.0
    jitter: float = 0.5
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError("jitter must be between 0 and 1")


DEFAULT_RETRY = RetryPolicy()
#: Attempts in total for a 403 that is not known to be transient (see :func:`retry_delay`).
FORBIDDEN_ATTEMPTS = 4


def retry_delay(
    policy: RetryPolicy,
    attempt: int,
    error: JobSetError,
    *,
    idempotent: bool,
    rand: float,
    forbidden_may_pass: bool = False,
    forbidden_attempts: int = FORBIDDEN_ATTEMPTS,
) -> float | None:
    """Decide whether to try again after ``attempt`` (1-based) failed with ``error``.

    Args:
        policy: The retry policy.
        attempt: The number of the attempt that just failed.
        error: What it failed with.
        idempotent: Whether the request may be repeated after a lost answer (a read, a delete,
            a create of a fixed name: see :attr:`Request.idempotent`; only those are retried
            on :class:`Unreachable`: a lost answer to a patch may hide a success).
        rand: A number in ``[0, 1)`` that drives the jitter (the shell passes ``random.random()``).
        forbidden_may_pass: Whether a 403 is likely a restarted API server's: the same
            identity was allowed the same call (verb, resource, namespace) before, or the
            server could not be reached moments ago. An API server that has just started
            refuses everything until its authorizer's caches are filled (a second or two, more
            on a loaded machine), so a 403 is retried: for :data:`FORBIDDEN_ATTEMPTS` attempts
            (about 3.5 s by default; a missing permission surfaces that much later), or like
            a server error when it is likely transient (a Role is rarely taken away in the
            middle of a wait). A 403 that outlasts the retries surfaces. A 403 of an
            admission plugin (:attr:`Forbidden.by_admission`: a quota) is never retried.
        forbidden_attempts: Attempts in total for a 403 that is not likely transient (1 for a
            dry run: a 403 there leaves the object unchecked, which a retry seldom changes,
            and a submit would wait for the retries every time).

    Returns:
        Seconds to wait before the next attempt, or ``None`` to give up and raise ``error``.
    """
    if attempt >= policy.max_attempts:
        return None
    if isinstance(error, Forbidden) and error.by_admission:
        return None  # a quota, a LimitRange: the same request gets the same answer
    if isinstance(error, Forbidden) and not forbidden_may_pass and attempt >= forbidden_attempts:
        return None
    retryable = (
        isinstance(error, (TooManyRequests, ServerError))
        or (idempotent and isinstance(error, Unreachable))
        or isinstance(error, Forbidden)
    )
    if not retryable:
        return None
    backoff = min(policy.max_delay, policy.base_delay * policy.multiplier ** (attempt - 1))
    backoff *= 1.0 - policy.jitter + 2.0 * policy.jitter * rand
    retry_after = error.retry_after if isinstance(error, ApiError) else None
    if retry_after is None:
        return backoff
    if retry_after > policy.max_retry_after:
        return None
    return max(retry_after, backoff)
