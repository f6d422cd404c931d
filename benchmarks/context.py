"""What every family gets: the cluster, the profile, the sampler, the floor, and identities."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.audit import Entry
from benchmarks.cluster import BenchCluster, Identity, progress
from benchmarks.proc import Sampler, Subject
from benchmarks.profiles import Profile

__all__ = ["Context", "Floor"]


@dataclass
class Floor:
    """The raw-watch subject (see :mod:`benchmarks.floor`) and what it saw."""

    subject: Subject
    identity: Identity

    def seen(self) -> dict[tuple[str, str, str], float]:
        """When each object was first seen ended, by (resource, namespace, name)."""
        return self._moments("seen")

    def recorded(self) -> dict[tuple[str, str, str], float]:
        """When the floor's own write after seeing a native run's Job ended came back, by
        (resource, namespace, name)."""
        return self._moments("recorded")

    def _moments(self, event: str) -> dict[tuple[str, str, str], float]:
        return {(m["resource"], m["ns"], m["name"]): float(m["at"]) for m in self.subject.of(event)}


@dataclass
class Context:
    """A benchmark run's shared state."""

    cluster: BenchCluster
    profile: Profile
    sampler: Sampler
    identities: dict[str, Identity] = field(default_factory=dict)
    subjects: list[Subject] = field(default_factory=list)

    @property
    def work(self) -> Path:
        return self.cluster.work

    @property
    def audited(self) -> bool:
        """Whether requests are counted at the API server."""
        return self.cluster.audit is not None

    def identity(self, name: str, *, cluster_wide: bool = True) -> Identity:
        """A service account of this name (made once per run)."""
        if name not in self.identities:
            self.identities[name] = self.cluster.identity(name, cluster_wide=cluster_wide)
        return self.identities[name]

    def subject(self, name: str, module: str, spec: dict[str, Any], identity: Identity) -> Subject:
        """Start a subject process (stopped by :meth:`close` at the latest)."""
        spec = {"port": self.cluster.port, "kubeconfig": str(identity.kubeconfig), **spec}
        found = Subject(name, module, spec, identity.airflow_env(), self.work)
        self.subjects.append(found)
        return found

    @contextmanager
    def floor(
        self,
        prefix: str,
        *,
        resources: Sequence[str] | None = None,
        identity: Identity | None = None,
        record: bool = False,
    ) -> Iterator[Floor]:
        """The raw watches over the namespaces named ``prefix...``, for the block (of JobSets,
        Jobs and pods, unless ``resources`` names others; as the ``floor`` identity unless
        another is given; ``record``: with one write after each native Job seen ended)."""
        identity = identity or self.identity("floor")
        spec: dict[str, Any] = {"prefix": prefix}
        if resources is not None:
            spec["resources"] = list(resources)
        if record:
            spec["record"] = True
        subject = self.subject(f"floor-{prefix}", "benchmarks.floor", spec, identity)
        subject.wait_for("ready", 120)
        try:
            yield Floor(subject, identity)
        finally:
            subject.stop()

    def read_audit(self) -> list[Entry]:
        """Audit entries since the last mark (none without an audit log)."""
        if self.cluster.audit is None:
            return []
        started = time.monotonic()
        entries = self.cluster.audit.read()
        progress(f"read {len(entries)} audit entries in {time.monotonic() - started:.1f}s")
        return entries

    def mark_audit(self) -> None:
        if self.cluster.audit is not None:
            self.cluster.audit.mark()

    def close(self) -> None:
        """Stop every subject still running."""
        for subject in self.subjects:
            if subject.proc.poll() is None:
                subject.kill()
        self.sampler.stop()
