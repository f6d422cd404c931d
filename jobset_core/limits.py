"""Hard limits on input, refused early with a clear message (``docs/concepts/validation.md``).

Each limit is far above any real JobSet (the upstream examples and the builders' output stay
below a tenth of each) and exists so that hostile or careless input fails fast instead of
hanging or eating memory: a YAML alias bomb, ``/dev/zero``, a template nested thousands of levels
deep, ``replicas: 1000000`` rendered into a million Jobs. None of them truncates: past a limit
the input is refused as a whole, with the limit's number in the message.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "LIMITS",
    "MAX_ALIAS_NODES",
    "MAX_DEPTH",
    "MAX_DOCUMENTS",
    "MAX_FILE_BYTES",
    "MAX_NODES",
    "MAX_OBJECT_BYTES",
    "MAX_RENDERED_JOBS",
    "Limit",
    "limits_markdown",
]

#: Largest file (or string, or standard input) read as JobSets. The API server refuses request
#: bodies above 3 MiB, so one JobSet can never be larger; the rest is room for multi-document
#: files. At most this many bytes plus one are ever read.
MAX_FILE_BYTES = 8 * 1024 * 1024

#: Deepest nesting of mappings and lists in a document. The JobSet CRD's schema is 19 levels
#: deep at its deepest field (no field below ``spec`` preserves unknown fields), so a valid
#: JobSet is never deeper.
MAX_DEPTH = 64

#: Nodes that YAML aliases may add to one file when they are expanded (an alias of a 100-node
#: container spec adds 100). Enough to reuse anchors freely; an alias bomb ("billion laughs")
#: is refused at the alias that crosses it, before anything is expanded.
MAX_ALIAS_NODES = 10_000

#: Nodes (mappings, lists and scalars, shared references counted at each use) of a JobSet given
#: as Python data rather than text.
MAX_NODES = 1_000_000

#: JobSet documents one file (or string, or standard input) may hold. A bound of this tool, not
#: of Kubernetes (``kubectl`` reads any number): far above any real file (a sweep of a thousand
#: JobSets is ten times below it), so that a generated file with a runaway loop fails at once.
MAX_DOCUMENTS = 10_000

#: The largest request body the API server reads (``MaxRequestBodyBytes`` of kube-apiserver,
#: 3 MiB): a JobSet whose JSON is larger is answered ``413 Request Entity Too Large`` before any
#: check. Measured as compact JSON, the smallest body ``kubectl``, client-go, the Python clients
#: and this project send (a raw ``application/yaml`` body can be smaller; no client of note
#: sends one).
MAX_OBJECT_BYTES = 3 * 1024 * 1024

#: Child Jobs ``jobsetctl render`` builds at most (``render(..., max_jobs=...)``,
#: :func:`jobset_core.render.check_job_count`); a JobSet with more is refused before any is
#: built (a rendered Job takes about 2 KB of memory).
MAX_RENDERED_JOBS = 10_000


@dataclass(frozen=True)
class Limit:
    """One limit as documented."""

    name: str
    value: int
    unit: str
    what: str


LIMITS: tuple[Limit, ...] = (
    Limit("MAX_FILE_BYTES", MAX_FILE_BYTES, "bytes", "size of a file, string or stdin"),
    Limit("MAX_DEPTH", MAX_DEPTH, "levels", "nesting of mappings and lists in a document"),
    Limit("MAX_ALIAS_NODES", MAX_ALIAS_NODES, "nodes", "nodes YAML aliases add to a file"),
    Limit("MAX_NODES", MAX_NODES, "nodes", "nodes of a JobSet given as Python data"),
    Limit("MAX_DOCUMENTS", MAX_DOCUMENTS, "documents", "JobSet documents in a file"),
    Limit("MAX_OBJECT_BYTES", MAX_OBJECT_BYTES, "bytes", "one JobSet, as compact JSON"),
    Limit("MAX_RENDERED_JOBS", MAX_RENDERED_JOBS, "Jobs", "child Jobs `jobsetctl render` builds"),
)


def limits_markdown() -> str:
    """:data:`LIMITS` as the Markdown table of ``docs/concepts/validation.md``."""
    lines = ["| limit | value | of |", "|---|---|---|"]
    lines += [f"| `{item.name}` | {item.value:,} {item.unit} | {item.what} |" for item in LIMITS]
    return "\n".join(lines) + "\n"
