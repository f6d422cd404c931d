"""KFP task configuration copied onto a JobSet's pod templates (pure).

With ``task_config_passthroughs`` on a component, the KFP backend's driver does not apply what
the pipeline author set on the task (``set_cpu_limit``, ``set_env_variable``,
``kubernetes.add_toleration``, ``add_node_selector``, ``mount_pvc`` ...) to the launcher's own
pod; it hands the settings to the component as a ``dsl.TaskConfig`` value (Kubernetes JSON
fragments). :func:`apply_task_config` puts them where the work runs: every replicated job's
pod template (or the ones named).

Merge rules (the task's value wins where both set the same thing):

* ``resources``: limits and requests, key by key, on the pod's first container (the main one;
  sidecars keep theirs);
* ``env``: on every container, replacing a variable of the same name;
* ``volume_mounts``: on every container, replacing a mount at the same ``mountPath``;
* ``volumes``: replacing a volume of the same name;
* ``node_selector``: key by key; ``tolerations``: appended unless already present;
* ``affinity``: each of ``nodeAffinity``, ``podAffinity``, ``podAntiAffinity`` given by the
  task replaces the template's.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobset_core.errors import Problem, SpecError
from jobset_core.models import JobSet
from kfp_components._struct import from_struct

__all__ = ["PodOverrides", "apply_task_config", "overrides_from"]

Obj = dict[str, Any]


@dataclass(frozen=True)
class PodOverrides:
    """The pod settings of a KFP ``TaskConfig``, in Kubernetes JSON form."""

    resources: Obj = field(default_factory=dict)
    env: list[Obj] = field(default_factory=list)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[Obj] = field(default_factory=list)
    affinity: Obj = field(default_factory=dict)
    volumes: list[Obj] = field(default_factory=list)
    volume_mounts: list[Obj] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """Nothing to apply (no field set, or resources without any quantity)."""
        quantities = any((self.resources.get(k) or {}) for k in ("limits", "requests"))
        others = (
            self.env,
            self.node_selector,
            self.tolerations,
            self.affinity,
            self.volumes,
            self.volume_mounts,
        )
        return not quantities and not any(others)


_FIELDS = {
    "resources": ("resources", "resources"),
    "env": ("env", "env"),
    "node_selector": ("node_selector", "nodeSelector"),
    "tolerations": ("tolerations", "tolerations"),
    "affinity": ("affinity", "affinity"),
    "volumes": ("volumes", "volumes"),
    "volume_mounts": ("volume_mounts", "volumeMounts"),
}


def overrides_from(task_config: Any) -> PodOverrides:
    """Read a ``dsl.TaskConfig`` (attributes), or a mapping in either spelling, as overrides
    (whole numbers made integers again: see :mod:`kfp_components._struct`).

    ``None`` (no passthrough, e.g. a local run) gives empty overrides.
    """
    if task_config is None:
        return PodOverrides()
    values: dict[str, Any] = {}
    for name, (attribute, json_key) in _FIELDS.items():
        if isinstance(task_config, Mapping):
            value = task_config.get(json_key, task_config.get(attribute))
        else:
            value = getattr(task_config, attribute, None)
        if value:
            values[name] = from_struct(copy.deepcopy(value))
    return PodOverrides(**values)


def _merge_named(items: Iterable[Obj], extra: Iterable[Obj], key: str) -> list[Obj]:
    out = [dict(item) for item in items]
    for item in extra:
        out = [existing for existing in out if existing.get(key) != item.get(key)]
        out.append(copy.deepcopy(item))
    return out


def _apply_to_container(container: Obj, overrides: PodOverrides, main: bool) -> None:
    if overrides.env:
        container["env"] = _merge_named(container.get("env") or [], overrides.env, "name")
    if overrides.volume_mounts:
        mounts = container.get("volumeMounts") or []
        container["volumeMounts"] = _merge_named(mounts, overrides.volume_mounts, "mountPath")
    if main and overrides.resources:
        resources = dict(container.get("resources") or {})
        for kind in ("limits", "requests"):
            given = overrides.resources.get(kind) or {}
            if given:
                resources[kind] = {**(resources.get(kind) or {}), **given}
        if resources:
            container["resources"] = resources


def _apply_to_pod(pod_spec: Obj, overrides: PodOverrides) -> None:
    for index, container in enumerate(pod_spec.get("containers") or []):
        _apply_to_container(container, overrides, main=index == 0)
    if overrides.volumes:
        pod_spec["volumes"] = _merge_named(pod_spec.get("volumes") or [], overrides.volumes, "name")
    if overrides.node_selector:
        pod_spec["nodeSelector"] = {
            **(pod_spec.get("nodeSelector") or {}),
            **overrides.node_selector,
        }
    if overrides.tolerations:
        tolerations = list(pod_spec.get("tolerations") or [])
        tolerations += [t for t in overrides.tolerations if t not in tolerations]
        pod_spec["tolerations"] = tolerations
    if overrides.affinity:
        pod_spec["affinity"] = {**(pod_spec.get("affinity") or {}), **overrides.affinity}


def apply_task_config(
    jobset: JobSet, overrides: PodOverrides, replicated_jobs: Sequence[str] = ()
) -> JobSet:
    """A copy of ``jobset`` with ``overrides`` on the pod templates of ``replicated_jobs``
    (every replicated job when empty).

    Raises:
        SpecError: ``replicated_jobs`` names a replicated job the JobSet does not have.
    """
    names = [rjob.name for rjob in jobset.replicated_jobs]
    unknown = [name for name in replicated_jobs if name not in names]
    if unknown:
        problems = [
            Problem(
                "task_config_replicated_jobs",
                f"no replicated job {name!r} (the JobSet has {', '.join(names) or 'none'})",
                "unknown-replicated-job",
            )
            for name in unknown
        ]
        raise SpecError(problems, "launch_jobset")
    if overrides.empty:
        return jobset
    targets = set(replicated_jobs or names)
    updated = []
    for rjob in jobset.replicated_jobs:
        if rjob.name not in targets:
            updated.append(rjob)
            continue
        spec = copy.deepcopy(rjob.template.spec)
        pod_template = spec.setdefault("template", {})
        _apply_to_pod(pod_template.setdefault("spec", {}), overrides)
        template = rjob.template.model_copy(update={"spec": spec})
        updated.append(rjob.model_copy(update={"template": template}))
    return jobset.model_copy(
        update={"spec": jobset.spec.model_copy(update={"replicated_jobs": updated})}
    )
