"""One reconcile pass of the native backend, as ordered calls described by a value.

:func:`plan_pass` runs the core planner (:func:`jobset_core.policy.next_step`) on an anchor and
the Jobs it owns, and turns the :class:`~jobset_core.policy.ReconcilePlan` into a
:class:`NativePass`: what to delete, the rendered Service and Jobs to create, the Jobs to
suspend or resume, the status patch and whether the anchor itself goes (TTL), in the order the
upstream controller acts. The sync and async backends only send it.

Two things the controller reads from its own JobSet object come from the anchor here: the
owner of the child Jobs (a controller reference to the anchor ConfigMap, where upstream has the
JobSet) and the JobSet's UID (the anchor's).
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from jobset_core.backends._anchor import ANCHOR_KIND, Anchor, owner_reference, status_patch
from jobset_core.models import JobSet
from jobset_core.policy import ChildJob, FailureDecision, JobDeletion, ReconcilePlan, next_step
from jobset_core.policy.child_jobs import bucket_child_jobs
from jobset_core.render import Placement, headless_service, render

__all__ = [
    "NativePass",
    "child_views",
    "controller_owner_uid",
    "foreign_job",
    "going",
    "plan_pass",
    "service_going",
    "settled",
]


def _controlling_anchor(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The owner reference of the anchor ConfigMap that controls ``obj`` (``None``: not owned
    by an anchor)."""
    for owner in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if owner.get("controller") is True:
            if owner.get("kind") == ANCHOR_KIND and owner.get("apiVersion") == "v1":
                return owner  # type: ignore[no-any-return]
            return None
    return None


def controller_owner_uid(obj: Mapping[str, Any]) -> str | None:
    """UID of the anchor ConfigMap that controls ``obj`` (``None``: not owned by an anchor)."""
    owner = _controlling_anchor(obj)
    return None if owner is None else str(owner.get("uid"))


def child_views(anchor: Anchor, jobs: Iterable[Mapping[str, Any]]) -> list[ChildJob]:
    """The Jobs the anchor controls, as the planner's views (owner = the anchor's UID).

    Jobs controlled by anything else (another anchor of an older run of the same name, a
    JobSet) are left out, like upstream ignores Jobs it does not own.
    """
    views = []
    for job in jobs:
        if controller_owner_uid(job) == anchor.uid:
            views.append(dataclasses.replace(ChildJob.from_api(job), owner_uid=anchor.uid))
    return views


def foreign_job(anchor: Anchor, existing: Mapping[str, Any]) -> str | None:
    """Why a Job that blocks the creation of one of ours (same name) will never go away by
    itself; ``None`` when it is ours, being deleted, or left from an older anchor of the same
    name (garbage collection removes it).

    Upstream keeps emitting ``JobCreationFailed`` for such a Job and never fails the JobSet;
    the native backend reports it instead of re-planning the same creation forever.
    """
    meta = existing.get("metadata") or {}
    if meta.get("deletionTimestamp") or controller_owner_uid(existing) is not None:
        return None
    return f"Job {meta.get('name')} already exists and is not owned by this run"


def going(anchor: Anchor, existing: Mapping[str, Any]) -> bool:
    """Whether a child object that blocks the creation of one of ours (same name) is on its
    way out: being deleted, or controlled by an older anchor of the same name, which garbage
    collection removes. The creation is tried again once it is gone, not at once: upstream's
    create fails and its reconcile is queued again with a backoff."""
    meta = existing.get("metadata") or {}
    owner = controller_owner_uid(existing)
    return bool(meta.get("deletionTimestamp")) or (owner is not None and owner != anchor.uid)


def service_going(anchor: Anchor, existing: Mapping[str, Any]) -> bool:
    """Whether the Service that blocks the creation of the run's headless Service (same name)
    is an older run's on its way out: being deleted, or controlled by an older anchor of the
    run's own name, which garbage collection removes. The creation is tried again once it is
    gone; taking it would leave the run without one once it is collected.

    Any other Service of that name is used as it is, as upstream uses one: a user's, or that
    of another run sharing the subdomain (which selects that run's pods only, upstream too).
    """
    meta = existing.get("metadata") or {}
    owner = _controlling_anchor(existing)
    older = (
        owner is not None and owner.get("name") == anchor.name and owner.get("uid") != anchor.uid
    )
    return bool(meta.get("deletionTimestamp")) or older


@dataclass(frozen=True)
class NativePass:
    """What one native reconcile pass sends, in this order.

    Attributes:
        plan: The core plan the pass was made from.
        delete_jobs: Jobs to delete (Foreground, UID precondition; not found is fine).
        service: The headless Service to create when missing.
        create_jobs: Rendered Jobs to create (at most 50 at a time).
        suspend_jobs: Jobs to patch ``spec.suspend: true``.
        resume_jobs: Jobs to patch ``spec.suspend: false``.
        status_patch: The compare-and-swap merge patch of the anchor's status, if it changed.
        delete_anchor: ``ttlSecondsAfterFinished`` expired: delete the anchor (Foreground).
        ttl_remaining: Seconds until the TTL expires (finished, TTL set, not expired yet).
        settled: The status patch ends the run as every waiter's pass ends it, whatever it
            saw first (:func:`settled`): the verdict need not wait for the write.
    """

    plan: ReconcilePlan
    delete_jobs: tuple[JobDeletion, ...] = ()
    service: dict[str, Any] | None = None
    create_jobs: tuple[dict[str, Any], ...] = ()
    suspend_jobs: tuple[str, ...] = ()
    resume_jobs: tuple[str, ...] = ()
    status_patch: dict[str, Any] | None = None
    delete_anchor: bool = False
    ttl_remaining: float | None = None
    settled: bool = False

    @property
    def restart(self) -> FailureDecision | None:
        """The failure policy's restart decision made in this pass, if any."""
        failure = self.plan.failure
        return failure if failure is not None and failure.outcome == "Restart" else None

    @property
    def acted(self) -> bool:
        """Whether the pass changes anything on the cluster (then another pass follows)."""
        return bool(
            self.delete_jobs
            or self.create_jobs
            or self.suspend_jobs
            or self.resume_jobs
            or self.status_patch is not None
            or self.delete_anchor
        )


def _created_jobs(
    anchor: Anchor, plan: ReconcilePlan, placement: Placement
) -> tuple[dict[str, Any], ...]:
    if not plan.create_jobs:
        return ()
    wanted = {creation.name for creation in plan.create_jobs}
    rendered = render(
        anchor.jobset,
        anchor.namespace,
        plan.create_jobs[0].restart_attempt,
        uid=anchor.uid,
        owner=owner_reference(anchor),
        placement=placement,
    )
    return tuple(job for job in rendered.jobs if job["metadata"]["name"] in wanted)


def settled(jobset: JobSet, plan: ReconcilePlan, views: Iterable[ChildJob]) -> bool:
    """Whether the plan ends the run with the status any waiter's pass would write, in any
    order it saw the Jobs: the run completes, and every Job of the current attempt has, one
    per index of every replicated job, none failed or running, none of a later attempt than
    the anchor records.

    ``Complete`` is a Job's last condition, so a waiter that saw fewer of them saw no failure
    of this attempt either (there is none): no waiter restarts or fails it, and one that
    decided earlier (a success policy met by some of them) decided ``Completed`` too. A run
    that completes with Jobs still running, or after a failure, is order-dependent (a waiter
    that saw the failure first may have restarted it): its status is written before the
    verdict, with the anchor's ``resourceVersion`` as the judge of who was first.
    """
    if plan.stage != "Completed" or plan.status.terminal_state != "Completed":
        return False
    restarts = (jobset.status.restarts if jobset.status is not None else None) or 0
    buckets = bucket_child_jobs(views, restarts)
    if buckets.active or buckets.failed or buckets.invalid:
        return False
    wanted = {
        (replicated.name, index)
        for replicated in jobset.spec.replicated_jobs or ()
        for index in range(replicated.replicas if replicated.replicas is not None else 1)
    }
    done = buckets.successful
    if any(job.restart_attempt != restarts or job.deleting for job in done):
        return False  # a later attempt's Jobs, or this attempt's going: the anchor is behind
    indexes = [(job.replicated_job, job.job_index) for job in done]
    return len(indexes) == len(wanted) and set(indexes) == wanted


def plan_pass(
    anchor: Anchor,
    jobs: Iterable[Mapping[str, Any]],
    now: _dt.datetime,
    *,
    create: bool = True,
    placement: Placement = "affinity",
) -> NativePass:
    """Plan one reconcile pass of a native run; mirrors the controller's ``reconcile``.

    Args:
        anchor: The anchor as just read (its status is the current one).
        jobs: The Jobs listed by the run's selector (API dicts; others are filtered out).
        now: The current time (aware).
        create: Create the headless Service and missing Jobs. ``False`` stops after the
            deletions and the status write (a restart handed back to the caller).
        placement: How exclusive placement is rendered; ``"affinity"`` (default) needs no
            pod webhook.

    Returns:
        The pass to send.
    """
    views = child_views(anchor, jobs)
    plan = next_step(
        anchor.jobset,
        views,
        now,
        controller_name=anchor.jobset.spec.managed_by or "",
    )
    patch = None
    if plan.status_changed:
        kept = None
        if plan.events:  # upstream emits them on the JobSet; a native run keeps them
            stamp = now.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            said = [
                {"type": e.type, "reason": e.reason, "message": e.message, "time": stamp}
                for e in plan.events
            ]
            kept = [*anchor.events, *said]
        patch = status_patch(plan.status, anchor.resource_version, events=kept)
    ttl = plan.ttl
    service = None
    if create and plan.headless_service is not None:
        service = headless_service(anchor.jobset, anchor.namespace, owner=owner_reference(anchor))
    return NativePass(
        plan=plan,
        delete_jobs=plan.delete_jobs,
        service=service,
        create_jobs=_created_jobs(anchor, plan, placement) if create else (),
        suspend_jobs=plan.suspend_jobs if create else (),
        resume_jobs=tuple(r.name for r in plan.resume_jobs) if create else (),
        status_patch=patch,
        delete_anchor=ttl is not None and ttl.delete_jobset,
        ttl_remaining=None if ttl is None else ttl.requeue_after_seconds,
        settled=patch is not None and settled(anchor.jobset, plan, views),
    )
