"""Where validation is deliberately stricter than the API server, in one table.

:func:`jobset_core.validation.validate` mirrors what the API server, the upstream JobSet webhook
and Kubernetes' Job validation reject, at create time and when the controller creates the child
Jobs. A few rules reject more: what the server accepts but then never runs, or runs wrong,
without failing the JobSet. Each is listed here with the rule id (and, where the id is shared
with faithful checks, the field path) of the problems it gives; nothing else may reject what
the server accepts. The differential fuzz test (``tests/core/test_fuzz_differential.py``)
holds validation to that against the devcluster, and ``docs/concepts/validation.md`` shows this
table (a test keeps the two equal).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from jobset_core.errors import Problem

__all__ = ["STRICTNESS", "Strictness", "is_deliberate", "strictness_markdown"]


@dataclass(frozen=True)
class Strictness:
    """One deliberate difference.

    Attributes:
        rule: The rule id of the problems it gives.
        rejects: What we reject that the server accepts.
        upstream: What happens upstream instead.
        path: A regular expression the problem's field path matches, when ``rule`` is shared
            with checks that are not stricter (empty: any path).
    """

    rule: str
    rejects: str
    upstream: str
    path: str = ""

    def covers(self, problem: Problem) -> bool:
        """Whether ``problem`` is one of this difference's."""
        return problem.rule == self.rule and (
            not self.path or re.fullmatch(self.path, problem.path) is not None
        )


_RJOB = r"spec\.replicatedJobs\[\d+\]"

STRICTNESS: tuple[Strictness, ...] = (
    Strictness(
        "jobset-name",
        "a JobSet name that is not an RFC 1035 label, also when it has no child object to name",
        "the API server takes any RFC 1123 subdomain; the webhook checks only the names of the "
        "Jobs derived from it",
        path=r"metadata\.(name|generateName)",
    ),
    Strictness(
        "depends-on-self",
        "a replicated job whose `dependsOn` names itself",
        "accepted; the replicated job waits for itself and never starts",
    ),
    Strictness(
        "greater_than_equal",
        "`replicas` below 0",
        "accepted (a CRD minimum only after v0.12.0); no Job is created for it",
        path=rf"{_RJOB}\.replicas",
    ),
    Strictness(
        "missing",
        "a replicated job without a `name` (and a `coordinator` or `dependsOn` naming none)",
        "the webhook writes the empty string, which names the unnamed replicated job; its Jobs "
        "are named `<jobset>--<index>`",
        path=rf"{_RJOB}\.name|spec\.coordinator\.replicatedJob|{_RJOB}\.dependsOn\[\d+\]\.name",
    ),
    Strictness(
        "exclusive-topology",
        "an `alpha.jobset.sigs.k8s.io/exclusive-topology` annotation that is not a valid "
        "node label key",
        "accepted; it becomes a pod affinity `topologyKey` and every pod creation fails",
    ),
    Strictness(
        "extended-resource-size",
        "an extended resource (`nvidia.com/gpu`, ...) of more than 9223372036854775",
        "its integer check overflows: some spellings are accepted, others rejected as not an "
        "integer",
    ),
    Strictness(
        "kind",
        "a document whose `kind` is not `JobSet`",
        "a create at the JobSet URL ignores `kind`; `kubectl` would send the document to the "
        "API of that kind instead",
    ),
    Strictness(
        "*",
        "the Job template of a replicated job with `replicas: 0` (or below) is checked like "
        "any other",
        "its Jobs are never created, so the API server never checks the template; it fails "
        "when the JobSet is scaled up",
    ),
)


def is_deliberate(problem: Problem) -> bool:
    """Whether ``problem`` is a listed deliberate strictness (the ``*`` entry is about which
    Jobs are checked, not about a rule, so it covers no problem by itself)."""
    return any(item.covers(problem) for item in STRICTNESS if item.rule != "*")


def strictness_markdown() -> str:
    """:data:`STRICTNESS` as the Markdown table of ``docs/concepts/validation.md``."""
    lines = ["| rule (path) | we reject | upstream |", "|---|---|---|"]
    for item in STRICTNESS:
        rule = "any" if item.rule == "*" else f"`{item.rule}`"
        where = " at `{}`".format(item.path.replace("|", "\\|")) if item.path else ""
        lines.append(f"| {rule}{where} | {item.rejects} | {item.upstream} |")
    return "\n".join(lines) + "\n"
