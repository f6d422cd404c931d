"""The project's own error tree.

Adapters translate these into their framework's failures (an ``AirflowException``, a non-zero
exit of a KFP step); the core never exits the process and never raises framework errors.

::

    JobSetError
    ├── SpecError            bad input: every problem with its field path, before any I/O
    ├── ConfigError          the connection settings are contradictory or cannot be loaded
    ├── IdentityMismatch     an object of that name exists but is not ours (labels / UID differ)
    ├── NotAnAnchor          a ConfigMap that is not the anchor of a native run
    ├── Unreachable          no answer: the API server could not be reached, a stream broke
    ├── RunEnded             how a wait ended when it did not complete (carries the Verdict)
    │   ├── JobSetFailed     the JobSet reached ``Failed`` (FailJobSet, ReachedMaxRestarts...)
    │   │   ├── PodsCannotStart  its pods cannot start (wrong image, missing Secret, crash loop)
    │   │   │   └── PodsRefused  the API server refuses to create them (Pod Security, quota...)
    │   │   └── QueueRefused     its queue will not run it (deactivated, never fits, no queue)
    │   ├── JobSetRestarting the JobSet restarted and the caller asked to be told
    │   ├── JobSetPreempted  its queue preempted it and the caller asked to be told
    │   ├── WaitTimeout      the deadline passed before the JobSet reached a terminal state
    │   │   └── AdmissionTimeout  it waited for its queue's admission longer than allowed
    │   ├── CreationFailed   the controller cannot create a child object (JobCreationFailed...)
    │   └── JobSetGone       the JobSet was deleted, or replaced by a namesake, mid-wait
    └── ApiError             the API server said no; keeps the Kubernetes ``Status``
        ├── Unauthorized     401 (the credentials were refreshed once and still refused)
        ├── Invalid          422 (causes listed)
        ├── Forbidden        403 (with an RBAC hint)
        ├── NotFound         404
        ├── Conflict         409 (AlreadyExists / resourceVersion conflicts)
        ├── Gone             410 (a watch's resourceVersion is too old: relist)
        ├── TooManyRequests  429 (retried with backoff before it surfaces)
        └── ServerError      5xx (retried with backoff before it surfaces)

Every :class:`RunEnded` carries the :class:`~jobset_core.lifecycle.Verdict` of the wait it ended
(``verdict``: the outcome seen last, the reason, the message), so an adapter maps the class to
its framework's failure and still reports everything the core knew.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobset_core.lifecycle.verdict import Verdict

__all__ = [
    "CARRY_UNKNOWN",
    "MAX_MESSAGE_CHARS",
    "RUN_CARRIES_NONE",
    "AdmissionTimeout",
    "ApiError",
    "ConfigError",
    "Conflict",
    "CreationFailed",
    "Forbidden",
    "Gone",
    "IdentityMismatch",
    "Invalid",
    "InvalidArgument",
    "JobSetError",
    "JobSetFailed",
    "JobSetGone",
    "JobSetPreempted",
    "JobSetRestarting",
    "NotAnAnchor",
    "NotFound",
    "PodsCannotStart",
    "PodsRefused",
    "Problem",
    "QueueRefused",
    "RunEnded",
    "ServerError",
    "SpecError",
    "TooManyRequests",
    "Unauthorized",
    "Unreachable",
    "WaitTimeout",
    "format_path",
]


def format_path(loc: Iterable[str | int]) -> str:
    """Render a location tuple as a field path.

    ``("spec", "replicatedJobs", 0)`` becomes ``spec.replicatedJobs[0]``.
    """
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


#: Longest message a :class:`Problem` keeps: a message quoting a huge value is cut in the middle.
MAX_MESSAGE_CHARS = 600


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    keep = (limit - 40) // 2
    return f"{text[:keep]}...[{len(text) - 2 * keep} characters left out]...{text[-keep:]}"


#: How an ``unknown-field`` problem says a field newer than the models can be carried, in the
#: Python API's spelling; a surface with its own (``jobsetctl``'s flag) swaps it with
#: :meth:`Problem.respelled`.
CARRY_UNKNOWN = "pass allow_unknown_fields=True to carry it"
#: What every way of running (operator, trigger, KFP launcher, ``jobsetctl run``) says instead:
#: a run sends only the fields the models know, so it cannot carry a newer one.
RUN_CARRIES_NONE = "remove it to run the JobSet (a run sends only the fields the models know)"


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with a JobSet, found before anything is sent to a cluster.

    Attributes:
        path: The field path in API (camelCase) spelling, e.g. ``spec.replicatedJobs[1].name``.
        message: What is wrong, in words a user can act on (at most
            :data:`MAX_MESSAGE_CHARS`: a quoted huge value is cut in the middle).
        rule: A short stable identifier of the rule that failed (e.g. ``dns1035-label``).
    """

    path: str
    message: str
    rule: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "message", _clip(self.message, MAX_MESSAGE_CHARS))

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message

    def respelled(self, carry: str) -> Problem:
        """This problem with :data:`CARRY_UNKNOWN` said the way a surface says it."""
        if self.rule != "unknown-field" or CARRY_UNKNOWN not in self.message:
            return self
        return Problem(self.path, self.message.replace(CARRY_UNKNOWN, carry), self.rule)


class JobSetError(Exception):
    """Base class of every error this project raises on purpose."""


class SpecError(JobSetError, ValueError):
    """A JobSet (or its source) is not acceptable. Lists every problem at once."""

    def __init__(self, problems: Iterable[Problem], source: str | None = None) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        self.source = source
        prefix = f"{source}: " if source else ""
        lines = [f"{prefix}{p}" for p in self.problems] or [f"{prefix}invalid JobSet"]
        super().__init__("\n".join(lines))

    def for_a_run(self, source: str | None = None) -> SpecError:
        """These problems as a run reports them: from ``source`` unless one is named, and
        saying that a field newer than the models must go (:data:`RUN_CARRIES_NONE`)."""
        problems = [problem.respelled(RUN_CARRIES_NONE) for problem in self.problems]
        return SpecError(problems, source=self.source or source)


class ConfigError(JobSetError, ValueError):
    """The connection settings are contradictory, or the official loader rejected them."""


class InvalidArgument(JobSetError, ValueError):
    """A way in was given an argument the run cannot take (checked where the request is
    built, before anything is sent to a cluster).

    Every way in checks a shared argument with the same code
    (:mod:`jobset_core.lifecycle.request`), so the words after the argument's name are the
    same whichever way was given it; each way puts its own name on the argument
    (``JobSetOperator(start_grace=...)``, the KFP input ``start_grace_seconds``, the flag
    ``--start-grace``).

    Attributes:
        argument: The argument, by the request's own name for it (``start_grace``).
        problem: What is wrong with it, in words (``must be 0 or more, not -1``).
    """

    def __init__(self, argument: str, problem: str) -> None:
        self.argument, self.problem = argument, problem
        super().__init__(f"{argument}: {problem}")


class IdentityMismatch(JobSetError):
    """An object with the wanted name exists but belongs to someone else: never adopted."""

    def __init__(self, kind: str, namespace: str, name: str, why: str) -> None:
        self.kind, self.namespace, self.name, self.why = kind, namespace, name, why
        super().__init__(f"{kind} {namespace}/{name} exists but is not ours: {why}")


class NotAnAnchor(JobSetError, ValueError):
    """A ConfigMap that is not (or no longer readable as) the anchor of a native run."""


class Unreachable(JobSetError):
    """The API server could not be reached, or a connection broke mid-answer.

    Not an :class:`ApiError`: no server answered. Reads are retried with backoff before this
    surfaces; a watch that drops raises it so the caller reconnects.
    """


class RunEnded(JobSetError):
    """A wait ended without the JobSet completing; ``verdict`` tells how (see the subclasses).

    Attributes:
        verdict: The wait's verdict: kind, the outcome seen last, reason and message.
    """

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict
        super().__init__(verdict.message)

    @property
    def namespace(self) -> str:
        """The JobSet's namespace."""
        return self.verdict.namespace

    @property
    def name(self) -> str:
        """The JobSet's name."""
        return self.verdict.name


class JobSetFailed(RunEnded):
    """The JobSet reached ``Failed`` (a ``FailJobSet`` rule, ``ReachedMaxRestarts``...)."""


class PodsCannotStart(JobSetFailed):
    """The run's pods cannot start, and the pod start rules say the run has failed: a waiting
    reason such as ``ErrImagePull`` or ``CreateContainerConfigError`` lasted past its grace
    period, a pod stayed unschedulable past its pending timeout, or a container kept
    crash-looping (:mod:`jobset_core.policy.pod_start`).

    A :class:`JobSetFailed` (never retried), although the JobSet itself is not ``Failed``:
    its outcome reason is :data:`~jobset_core.outcome.PODS_CANNOT_START`, and the message
    names the pod, the container, the reason and message, and the pod's last Events.
    """


class PodsRefused(PodsCannotStart):
    """The API server refuses to create the run's pods: the Job controller's ``FailedCreate``
    Events on a child Job say that an admission step refused them (Pod Security, a
    ResourceQuota or LimitRange, a missing ServiceAccount, a webhook or admission policy, a
    pod the server finds invalid), so no pod will ever start
    (:mod:`jobset_core.policy.pod_create`). Fails at once, except a quota the pod fits but the
    namespace's current use does not, which may pass within a short grace period.

    A :class:`PodsCannotStart` (so a :class:`JobSetFailed`: never retried, the same input meets
    the same policy); the verdict's reason is
    :data:`~jobset_core.policy.pod_create.PODS_REFUSED`, and its message names the Job, who
    refused its pods, and the server's words.
    """


class QueueRefused(JobSetFailed):
    """The run's queue (Kueue) will not run it: its Workload was deactivated (requeuing limit,
    maximum execution time, by hand), its request exceeds what the ClusterQueue can ever
    admit, its LocalQueue does not exist, or it was preempted and the caller asked to fail
    then (``on_preemption="fail"``). A :class:`JobSetFailed` (never retried); the verdict's
    reason is Kueue's, and its message names the queue and Kueue's words."""


class JobSetPreempted(RunEnded):
    """The run's queue (Kueue) preempted it (suspended it and requeued it) and the caller
    asked to be told (``on_preemption="retry"``): the caller ends its try; the next one
    reattaches to the same JobSet, which runs again once readmitted. Not a JobSet restart:
    ``status.restarts`` and ``JOBSET_RESTART_ATTEMPT`` stay as they were."""


class JobSetRestarting(RunEnded):
    """The JobSet restarted (its failure policy recreated it) and the wait was asked to hand
    the restart back: the caller ends its try; the next one continues with the same JobSet."""


class WaitTimeout(RunEnded):
    """The deadline passed before the JobSet reached a terminal state."""

    @property
    def seconds(self) -> float:
        """How long the wait lasted."""
        return self.verdict.waited_seconds


class AdmissionTimeout(WaitTimeout):
    """The run waited for its queue's admission longer than ``admission_timeout`` (counted
    from its submission, or from the eviction that requeued it); the message names the
    queue, Kueue's reason for the wait, and how long it lasted."""


class CreationFailed(RunEnded):
    """A child object cannot be created (``JobCreationFailed``, ``HeadlessServiceCreationFailed``,
    ``PVCCreationFailed``). Upstream never fails the JobSet for this; the wait ends instead of
    hanging until its timeout."""

    @property
    def reason(self) -> str:
        """The controller's event reason (or the native backend's equivalent)."""
        return self.verdict.reason


class JobSetGone(RunEnded):
    """The JobSet was deleted, or replaced by a namesake with another UID, before it ended."""


class ApiError(JobSetError):
    """The Kubernetes API answered with an error status.

    Attributes:
        status: HTTP status code.
        reason: ``Status.reason`` (``NotFound``, ``AlreadyExists``, ``Invalid``, ...).
        message: ``Status.message`` or a truncated text body.
        details: ``Status.details`` when the body was a ``Status`` object.
        retry_after: seconds from a ``Retry-After`` header, when present.
    """

    def __init__(
        self,
        status: int,
        reason: str = "",
        message: str = "",
        details: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.details: dict[str, Any] = dict(details or {})
        self.retry_after = retry_after
        super().__init__(self._text())

    def _text(self) -> str:
        head = f"{self.status} {self.reason}".strip()
        return f"{head}: {self.message}" if self.message else head


class Unauthorized(ApiError):
    """401: the API server did not accept the credentials. The client refreshes refreshable
    credentials (an exec plugin's token, a token file) and tries once more before this
    surfaces, so it means the identity has no valid credentials (expired, revoked, or a
    plugin that keeps handing out refused tokens)."""


class Invalid(ApiError):
    """422: the server rejected the object; ``causes`` names each bad field."""

    @property
    def causes(self) -> list[Problem]:
        """The server's causes as problems (field path and message)."""
        out = []
        for cause in self.details.get("causes") or []:
            field_path = str(cause.get("field") or "")
            out.append(
                Problem(
                    # The JobSet webhook reports causes without a field ("<nil>").
                    path="" if field_path == "<nil>" else field_path,
                    message=str(cause.get("message", "")),
                    rule=str(cause.get("reason", "")),
                )
            )
        return out


class Forbidden(ApiError):
    """403: the identity lacks a permission (see ``rbac_hint``), or an admission plugin
    refused the object (see :attr:`by_admission`)."""

    @property
    def by_admission(self) -> bool:
        """Whether an admission plugin refused the object (a ResourceQuota's "exceeded quota",
        a LimitRange, Pod Security) rather than the authorizer the identity (``... is
        forbidden: User "x" cannot create resource ...``). Such a refusal is about the object
        and the namespace, not a permission: no Role grants it, and it is not transient (a
        restarted API server's empty authorizer caches give the other kind)."""
        _, said, rest = self.message.partition(" is forbidden: ")
        return bool(said) and not rest.startswith("User ")

    @property
    def rbac_hint(self) -> str:
        """Which verb on which resource is missing, as far as the Status tells."""
        kind = self.details.get("kind", "")
        group = self.details.get("group", "")
        resource = f"{kind}.{group}" if group else str(kind)
        return (
            f"the client's identity may not perform this request on {resource or 'this resource'}; "
            "grant it with a Role/RoleBinding (see kfp_components/rbac/ for the rules we need)"
        )

    def _text(self) -> str:
        if self.by_admission:  # the message says what (the quota, its use and its limit)
            return super()._text()
        return f"{super()._text()} ({self.rbac_hint})"


class NotFound(ApiError):
    """404: the object (or the API) does not exist."""


class Conflict(ApiError):
    """409: the object already exists or was changed meanwhile."""


class Gone(ApiError):
    """410: the requested resourceVersion is too old; the watcher must relist."""


class TooManyRequests(ApiError):
    """429: throttled; retried with backoff that honours ``Retry-After``."""


class ServerError(ApiError):
    """5xx: the server failed; retried with backoff."""
