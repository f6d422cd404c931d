"""The value :func:`jobset_core.render.render` returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jobset_core import labels

__all__ = ["RenderedJobSet"]


@dataclass(frozen=True)
class RenderedJobSet:
    """The objects the upstream controller would create for one JobSet, as API-shaped dicts.

    Attributes:
        service: The headless Service (``None`` when DNS hostnames are disabled).
        jobs: Every child Job, in spec order: replicated jobs as listed, then job index.
    """

    service: dict[str, Any] | None
    jobs: tuple[dict[str, Any], ...]

    def objects(self) -> tuple[dict[str, Any], ...]:
        """Every object in creation order: the Service first, then the Jobs in spec order."""
        head = (self.service,) if self.service is not None else ()
        return (*head, *self.jobs)

    @property
    def job_names(self) -> tuple[str, ...]:
        """The child Job names, in spec order."""
        return tuple(job["metadata"]["name"] for job in self.jobs)

    def job(self, name: str) -> dict[str, Any]:
        """The child Job of that name.

        Raises:
            KeyError: No rendered Job has that name.
        """
        for job in self.jobs:
            if job["metadata"]["name"] == name:
                return job
        raise KeyError(name)

    def jobs_for(self, replicated_job: str) -> tuple[dict[str, Any], ...]:
        """The child Jobs of one replicated job, by job index (empty for an unknown name)."""
        return tuple(
            job
            for job in self.jobs
            if job["metadata"]["labels"].get(labels.REPLICATED_JOB_NAME) == replicated_job
        )
