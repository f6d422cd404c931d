"""Pods that can never be created: which Jobs' pods the API server refuses, and whether that
ends the run (pure).

A Job whose pods the API server refuses never gets a pod to judge: the Job controller writes a
``FailedCreate`` Warning Event on the Job (``Error creating: pods "x" is forbidden: ...``) and
tries again with a backoff (1 s doubling up to a minute) for ever, while the JobSet (or the
native anchor) waits without a word. :func:`check_pod_creates` reads those Events of the run's
current child Jobs and decides:

* a refusal that waiting cannot lift fails the run at once: Pod Security (``violates
  PodSecurity "restricted:latest": ...``), a ResourceQuota the pod alone exceeds (``exceeded
  quota: q, requested: limits.cpu=2, ..., limited: limits.cpu=1``) or that wants limits the pod
  does not set (``failed quota``), a LimitRange (``maximum cpu usage per Container is ...``), a
  missing ServiceAccount (``error looking up service account``), a validating admission webhook
  or policy that denied the pod, a pod the API server finds invalid, and any other admission
  plugin's ``... is forbidden: ...`` (the rule of
  :attr:`jobset_core.errors.Forbidden.by_admission`);
* a ResourceQuota that the pod fits but the namespace's current use does not (``requested:
  pods=1, used: pods=1, limited: pods=1``) may pass once other pods end: it fails the run after
  :data:`QUOTA_GRACE` seconds of refusals with no pod of the Job created in between (the quota
  controller releases a finished pod's share a moment after it ends, and a run whose Jobs take
  turns through a tight quota must not fail on that moment);
* a refusal that is the cluster's trouble, not the pod's (``Internal error occurred: failed
  calling webhook``, a timeout, ``status unknown for quota``, a namespace being deleted, the
  Job controller's own permission) is never judged: the Job controller retries it, and the
  run's deadline bounds the wait.

The words are read by :func:`jobset_core.admission.read_refusal`, as the server checks read a
dry run's refusal before the submit.

A refusal is current while its Job is unfinished, not suspended, of the current attempt, wants
more pods than it has (``status.active`` below what its parallelism and completions ask), and
no pod of the Job was created after the refusal's last Event (a tie counts as created). Since
when it lasts is read from the Events' ``firstTimestamp`` (the end of its second) or, when
earlier, the first time this waiter saw it, so every waiter decides at the same moment.

Nothing here performs I/O or reads a clock: the caller passes ``now``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jobset_core import labels as L
from jobset_core.admission import Refusal, read_refusal
from jobset_core.pods import PodView
from jobset_core.policy._time import parse_time

__all__ = [
    "FAILED_CREATE",
    "PODS_REFUSED",
    "QUOTA_GRACE",
    "PodCreateCheck",
    "PodRefusal",
    "Refusal",
    "check_pod_creates",
    "describe_refusal",
    "describe_refused",
    "read_refusal",
]

#: The Job controller's Event reason for a pod it could not create.
FAILED_CREATE = "FailedCreate"
#: The verdict's (and outcome's) reason for a run whose pods the API server refuses.
PODS_REFUSED = "PodsRefused"
#: Seconds a quota refusal that may pass later (the pod fits the quota, the current use does
#: not) lasts before the run fails.
QUOTA_GRACE = 10.0
#: Other refused Jobs named in a failure message beside the first.
OTHERS_SHOWN = 3
_TEXT_LIMIT = 800
_PREFIX = "Error creating: "

#: What :attr:`PodCreateCheck.seen` is keyed by: the Job's UID (else its name).
SeenKey = str


# ------------------------------------------------------------------------------- the Jobs


@dataclass(frozen=True)
class PodRefusal:
    """One Job whose pods the API server refuses now.

    Attributes:
        job: The Job's name.
        refusal: What the newest refusal says.
        message: The server's words (the newest ``FailedCreate`` message, without the Job
            controller's ``Error creating:``).
        since: Since when the Job's pods are refused (epoch seconds).
        limit: How long that may last (0: at once; :data:`QUOTA_GRACE`).
        count: How many refusals the Events count.
        uid: The Job's UID.
    """

    job: str
    refusal: Refusal
    message: str
    since: float
    limit: float
    count: int = 1
    uid: str = ""

    @property
    def due(self) -> float:
        """When the refusal fails the run (epoch seconds)."""
        return self.since + self.limit

    @property
    def reason(self) -> str:
        """The Job controller's Event reason."""
        return FAILED_CREATE

    @property
    def key(self) -> tuple[str, str | None, str]:
        """Which Job and kind of problem (for telling new ones apart)."""
        return (self.job, None, "refused")


@dataclass(frozen=True)
class PodCreateCheck:
    """What the Jobs of the current attempt say of their pods' creation.

    Attributes:
        refusals: Every Job whose pods are refused now, earliest due first.
        failed: The refusals past their limit: the run has failed when there is one.
        recheck_at: When a refusal falls due without anything changing (epoch seconds).
        seen: When this waiter first saw each current refusal (pass it to the next check).
    """

    refusals: tuple[PodRefusal, ...] = ()
    failed: tuple[PodRefusal, ...] = ()
    recheck_at: float | None = None
    seen: Mapping[SeenKey, float] = field(default_factory=dict)


def _epoch(value: Any) -> float | None:
    parsed = parse_time(value) if isinstance(value, str) else None
    return parsed.timestamp() if parsed is not None else None


def _began(event: Mapping[str, Any]) -> float | None:
    """When an Event first happened: a whole-second time counts from the end of its second."""
    for key in ("firstTimestamp", "eventTime"):
        value, found = event.get(key), _epoch(event.get(key))
        if found is not None:
            return found if "." in str(value) else found + 1.0
    return None


def _ended(event: Mapping[str, Any]) -> float:
    for key in ("lastTimestamp", "eventTime", "firstTimestamp"):
        found = _epoch(event.get(key))
        if found is not None:
            return found
    return 0.0


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _waits_for_pods(job: Mapping[str, Any], attempt: int | None) -> bool:
    """Whether the Job is current and has fewer pods than it asks for."""
    meta, spec = job.get("metadata") or {}, job.get("spec") or {}
    status = job.get("status") or {}
    if meta.get("deletionTimestamp") or spec.get("suspend"):
        return False
    ended = ("Complete", "Failed", "SuccessCriteriaMet", "FailureTarget")
    if any(
        c.get("type") in ended and c.get("status") == "True" for c in status.get("conditions") or []
    ):
        return False
    label = (meta.get("labels") or {}).get(L.RESTART_ATTEMPT)
    if attempt is not None and label is not None and str(label) != str(attempt):
        return False
    parallelism, succeeded = _int(spec.get("parallelism"), 1), _int(status.get("succeeded"))
    completions = spec.get("completions")
    if completions is None:  # a work queue: no pod is added once one succeeded
        wanted = 0 if succeeded else parallelism
    else:
        wanted = min(parallelism, _int(completions) - succeeded)
    return _int(status.get("active")) < wanted


def _newest_pod(pods: list[PodView], name: str, uid: str) -> float | None:
    """When the Job's newest pod was created (whatever became of it)."""
    created = [
        t
        for pod in pods
        if pod.owner_job == name and _owned_by(pod, uid)
        for t in [_epoch(pod.created)]
        if t is not None
    ]
    return max(created) if created else None


def _owned_by(pod: PodView, uid: str) -> bool:
    refs = (pod.raw.get("metadata") or {}).get("ownerReferences") or []
    uids = {r.get("uid") for r in refs if isinstance(r, Mapping) and r.get("kind") == "Job"}
    return not uid or not (uids - {None, ""}) or uid in uids


def _refusal_events(events: list[Mapping[str, Any]], name: str, uid: str) -> list[Any]:
    """The Job's ``FailedCreate`` Warning Events that refuse its pods, oldest first."""
    out = []
    for event in events:
        about = event.get("involvedObject") or {}
        if about.get("kind") != "Job" or about.get("name") != name:
            continue
        if uid and about.get("uid") not in (None, "", uid):
            continue  # about an earlier Job of the same name
        refused = event.get("reason") == FAILED_CREATE and event.get("type") in (None, "Warning")
        if refused and read_refusal(str(event.get("message") or "")) is not None:
            out.append(event)
    return sorted(out, key=_ended)


def _clip(text: str, limit: int = _TEXT_LIMIT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _job_refusal(
    job: Mapping[str, Any],
    pods: list[PodView],
    events: list[Mapping[str, Any]],
    now: float,
    seen: Mapping[SeenKey, float],
) -> PodRefusal | None:
    meta = job.get("metadata") or {}
    name, uid = str(meta.get("name") or ""), str(meta.get("uid") or "")
    created = _newest_pod(pods, name, uid)
    current = [
        e for e in _refusal_events(events, name, uid) if created is None or _ended(e) > created
    ]
    if not current:
        return None
    newest = current[-1]
    message = str(newest.get("message") or "")
    refusal = read_refusal(message)
    assert refusal is not None
    began = [t for t in map(_began, current) if t is not None]
    since = min([seen.get(uid or name, now), now, *began])
    return PodRefusal(
        job=name,
        refusal=refusal,
        message=_clip(message.removeprefix(_PREFIX)),
        since=since,
        limit=0.0 if refusal.final else QUOTA_GRACE,
        count=sum(max(_int(e.get("count"), 1), 1) for e in current),
        uid=uid,
    )


def check_pod_creates(
    jobs: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    events: Iterable[Mapping[str, Any]],
    *,
    now: float,
    attempt: int | None = None,
    seen: Mapping[SeenKey, float] | None = None,
) -> PodCreateCheck:
    """Which Jobs of the current attempt cannot create their pods, and whether the run failed.

    Args:
        jobs: The run's child Jobs (the observer's trimmed ones are enough).
        pods: The run's pods.
        events: The run's Warning Events (those about its Jobs among them).
        now: The time of the check (epoch seconds).
        attempt: The current restart attempt (``status.restarts``): Jobs of earlier attempts
            do not count. ``None``: every Job counts.
        seen: When this waiter first saw each refusal (from the previous check).
    """
    events = [e for e in events if isinstance(e, Mapping)]
    refusals: list[PodRefusal] = []
    if any(e.get("reason") == FAILED_CREATE for e in events):
        views = [PodView.of(p) for p in pods]  # read only when a Job was refused (rare)
        for job in jobs:
            if not _waits_for_pods(job, attempt):
                continue
            found = _job_refusal(job, views, events, now, seen or {})
            if found is not None:
                refusals.append(found)
    refusals.sort(key=lambda r: (r.due, r.job))
    waiting_on = [r.due for r in refusals if r.due > now]
    return PodCreateCheck(
        refusals=tuple(refusals),
        failed=tuple(r for r in refusals if r.due <= now),
        recheck_at=min(waiting_on) if waiting_on else None,
        seen={r.uid or r.job: r.since for r in refusals},
    )


def _seconds_text(value: float) -> str:
    return f"{round(value):d}s" if value >= 10 else f"{round(value, 1):g}s"


def describe_refusal(refusal: PodRefusal, *, now: float) -> str:
    """One refused Job in words: the Job, who refused its pods, and the server's words."""
    times = f"{refusal.count} times" if refusal.count > 1 else "once"
    lasted = _seconds_text(max(0.0, now - refusal.since))
    if refusal.limit:
        rule = f"refused {times} over {lasted}, grace {_seconds_text(refusal.limit)}"
    else:
        rule = f"refused {times}; waiting cannot lift it"
    return (
        f"job {refusal.job} cannot create its pods: {refusal.refusal.plugin} refuses them: "
        f"{refusal.message} ({rule})"
    )


def describe_refused(check: PodCreateCheck, *, now: float) -> str:
    """The message of a run that failed because its pods cannot be created: the first Job in
    full, how many more, and who they are."""
    if not check.failed:
        return ""
    first = check.failed[0]
    others = [r for r in check.refusals if r.job != first.job]
    text = describe_refusal(first, now=now)
    if others:
        named = ", ".join(f"{r.job} ({r.refusal.plugin})" for r in others[:OTHERS_SHOWN])
        more = len(others) - OTHERS_SHOWN
        text += f"; {len(others)} more Jobs cannot create pods: {named}" + (
            f" and {more} more" if more > 0 else ""
        )
    return text
