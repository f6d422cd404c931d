"""The target cluster's own verdict before a run is created: server-side dry runs.

Before the first create, :func:`server_check` sends, all at once, dry runs (``dryRun=All``,
strict field validation) of the run object (the JobSet, or the native anchor), of the native
backend's Service and of the first child Job and first pod of each replicated job, all as they
will be created (:mod:`jobset_core.render`'s probes), in the target namespace, as the run's own
identity. A few requests a submit (one, and two a replicated job), never one a replica.

What the server refuses becomes problems on the JobSet's field paths; what the identity may
not create (a 403 from the authorizer, not an admission plugin) or a webhook that cannot take
a dry run is *unchecked*, said once, and not a refusal. A run object that exists already (a
retried try's, adopted by the submit) voids the check: it was checked when it was created.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobset_core.admission import cluster_trouble
from jobset_core.backends import BackendProtocol
from jobset_core.errors import ApiError, Conflict, Forbidden, NotFound, Problem
from jobset_core.models import JobSet
from jobset_core.render import Probe, cause_of, refusal_problems, unsupported_dry_run

if TYPE_CHECKING:
    from jobset_core.client import Client

__all__ = ["ServerCheck", "server_check"]

#: Dry runs in flight at once (a JobSet of many replicated jobs).
CONCURRENCY = 8


@dataclass(frozen=True)
class ServerCheck:
    """What the cluster said of a run before it was created.

    Attributes:
        problems: Every refusal, on the JobSet's field paths (empty: accepted).
        unchecked: What the server could not judge, and why (the identity may not create
            pods; a webhook that cannot take a dry run), one line each.
        exists: The run object exists already (a retried or resumed try's): nothing else
            was checked.
        requests: Dry runs sent.
        seconds: How long the check took.
    """

    problems: tuple[Problem, ...] = ()
    unchecked: tuple[str, ...] = ()
    exists: bool = False
    requests: int = 0
    seconds: float = 0.0


@dataclass
class _Answers:
    problems: list[Problem]
    unchecked: dict[str, str]
    requests: int = 0


async def server_check(
    client: Client, backend: BackendProtocol, prepared: JobSet, marks: Mapping[str, str]
) -> ServerCheck:
    """Dry-run the run's objects on the cluster (see the module docs).

    Raises:
        SpecError: the backend cannot run this JobSet (as its submit would say).
    """
    began = time.monotonic()
    probes = [backend.probes(prepared, marks=marks), *backend.child_probes(prepared)]
    namespace = prepared.metadata.namespace or ""
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(probe: Probe) -> tuple[Any, _Answers]:
        found = _Answers([], {})
        async with gate:
            return await _send(client, probe, namespace, found), found

    # All at once: the children are rendered from the prepared JobSet, its CRD and webhook
    # defaults applied as the renderer always does, so none waits for the JobSet's answer.
    results = await asyncio.gather(*(one(p) for p in probes))  # in the probes' order
    answers = _Answers([], {}, requests=len(probes))
    if results[0][0] is _EXISTS:  # a retried try's run: it was checked when it was created
        return ServerCheck(exists=True, requests=len(probes), seconds=time.monotonic() - began)
    for _, found in results:
        answers.problems.extend(found.problems)
        for key, line in found.unchecked.items():
            answers.unchecked.setdefault(key, line)
    return ServerCheck(
        problems=_once(answers.problems),
        unchecked=tuple(answers.unchecked.values()),
        requests=answers.requests,
        seconds=time.monotonic() - began,
    )


_EXISTS = object()


def _once(problems: list[Problem]) -> tuple[Problem, ...]:
    """Each refusal once: a rule of the pod spec refuses the child Job and its pod alike,
    on the same JobSet path (the first one said is kept)."""
    seen: set[tuple[str, str]] = set()
    out = []
    for problem in problems:
        key = (problem.path, cause_of(problem))
        if key not in seen:
            seen.add(key)
            out.append(problem)
    return tuple(out)


async def _send(client: Client, probe: Probe, namespace: str, answers: _Answers) -> Any:
    """One dry run: the server's answer, :data:`_EXISTS`, or ``None`` (refused or not
    judged: written to ``answers``)."""
    try:
        return await client.create(probe.resource, probe.body, namespace=namespace, dry_run=True)
    except Conflict:
        return _EXISTS if not probe.path else None  # a child of that name: the run's own
    except Forbidden as error:
        if not error.by_admission:  # the authorizer: this identity may not create them
            plural = probe.resource.plural
            answers.unchecked.setdefault(
                plural,
                f"{plural} not checked by the server: this identity may not create them (a "
                "dry run needs the create verb: the optional server-checks Role grants it)",
            )
        elif cluster_trouble(error.message):
            _trouble(probe, error, answers)
        else:
            answers.problems.extend(refusal_problems(probe, error))
        return None
    except NotFound as error:
        where = "metadata.namespace" if not probe.path else probe.path
        message = f"the API server cannot create {probe.what}: {error.message or error}"
        answers.problems.append(Problem(where, message, "server"))
        return None
    except ApiError as error:
        if cluster_trouble(error.message):  # a webhook that cannot be called: not a refusal
            _trouble(probe, error, answers)
            return None
        webhook = unsupported_dry_run(error)
        if webhook is not None:
            answers.unchecked.setdefault(
                webhook,
                f'{probe.what} not fully checked: admission webhook "{webhook}" cannot '
                "take a dry run (its sideEffects)",
            )
            return None
        if error.status >= 500 or error.status == 429:
            raise
        answers.problems.extend(refusal_problems(probe, error))
        return None


def _trouble(probe: Probe, error: ApiError, answers: _Answers) -> None:
    """The cluster's own trouble (a webhook that cannot be called, a namespace being deleted):
    the object is not judged, and that is said once."""
    answers.unchecked.setdefault(
        f"trouble:{probe.resource.plural}",
        f"{probe.what} not judged by the server: {error.message or error}",
    )
