"""A subset of Kubernetes' pod-template validation (``pkg/apis/core/validation``, v1.36).

What a Job's pod template most often gets wrong: no containers, container names, images,
pull policies, ports, environment variables (:mod:`._env`), container resources
(:mod:`._resources`), probes and hooks (:mod:`._probes`), volume names, sources and mounts,
``emptyDir.sizeLimit``, tolerations, label and annotation syntax and the annotations' total
size. Mounts may name a ``volumeClaimPolicies`` template: the JobSet controller adds that
volume. Not mirrored: security contexts, affinity, topology spread, DNS config, other volume
source details, resource claims, scheduling gates, pod-level resources, sidecar
``restartPolicy`` rules.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from jobset_core.validation import _names
from jobset_core.validation._common import (
    Collector,
    Loc,
    as_int,
    as_list,
    as_map,
    as_str,
    unsupported,
)
from jobset_core.validation._env import check_env, check_env_from
from jobset_core.validation._probes import check_probes
from jobset_core.validation._quantity import parse_quantity
from jobset_core.validation._resources import check_container_resources

__all__ = ["ANNOTATIONS_MAX_BYTES", "check_metadata", "check_pod_spec"]

_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_PORT_PROTOCOLS = ("SCTP", "TCP", "UDP")
# The order in which ``validateVolumeSource`` looks at the sources: the second one found is
# the one reported.
_VOLUME_SOURCES = (
    "emptyDir",
    "hostPath",
    "gitRepo",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "flocker",
    "persistentVolumeClaim",
    "rbd",
    "cinder",
    "cephfs",
    "quobyte",
    "downwardAPI",
    "fc",
    "flexVolume",
    "configMap",
    "azureFile",
    "vsphereVolume",
    "photonPersistentDisk",
    "portworxVolume",
    "azureDisk",
    "storageos",
    "projected",
    "scaleIO",
    "csi",
    "ephemeral",
    "image",
)
_TOLERATION_OPERATORS = ("Equal", "Exists")
_TAINT_EFFECTS = ("NoExecute", "NoSchedule", "PreferNoSchedule")
_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")  # server order


#: ``TotalAnnotationSizeLimitB``: the bytes of every annotation key and value together.
ANNOTATIONS_MAX_BYTES = 256 * 1024


def check_metadata(
    out: Collector, metadata: Mapping[str, Any], loc: Loc, added: Mapping[str, str] | None = None
) -> None:
    """Label keys and values, annotation keys and the annotations' total size
    (``ValidateObjectMeta``); ``added``: annotations the controller adds to the object."""
    for key, value in as_map(metadata.get("labels")).items():
        out.extend((*loc, "labels", key), _names.qualified_name(str(key)), "label-key")
        if isinstance(value, str):
            out.extend((*loc, "labels", key), _names.label_value(value), "label-value")
    annotations = as_map(metadata.get("annotations"))
    for key in annotations:
        # Annotation keys are checked in lower case: only the label key syntax counts.
        errors = _names.qualified_name(str(key).lower())
        out.extend((*loc, "annotations", key), errors, "annotation-key")
    total = sum(
        len(str(key).encode()) + len(value.encode() if isinstance(value, str) else b"")
        for key, value in {**annotations, **(added or {})}.items()
    )
    if total > ANNOTATIONS_MAX_BYTES:
        extra = " with the ones the JobSet controller adds" if added else ""
        out.add(
            (*loc, "annotations"),
            f"Too long: may not be more than {ANNOTATIONS_MAX_BYTES} bytes (keys and values "
            f"together are {total} bytes{extra})",
            "annotations-size",
        )


def check_pod_spec(
    out: Collector, pod: Mapping[str, Any], loc: Loc, claim_names: Collection[str]
) -> None:
    if (
        "containers" in pod
        and not as_list(pod.get("containers"))
        and isinstance(pod.get("containers"), list)
    ):
        out.add(
            (*loc, "containers"),
            "Required value: a Job's pod needs at least one container",
            "pod-containers",
        )
    # Duplicates inside one list (volumes, containers) are reported by the schema check: the
    # CRD declares those lists as maps keyed by name.
    volumes = set(claim_names)
    for index, raw in enumerate(as_list(pod.get("volumes"))):
        _check_volume(out, as_map(raw), (*loc, "volumes", index))
        name = as_str(as_map(raw).get("name"))
        if name:
            # The server also answers "Not found" for a mount of a volume it found invalid
            # (e.g. with two sources), which sends the user looking for a missing volume: the
            # volume is reported once, where it is wrong, and its mounts stand.
            volumes.add(name)
    earlier: set[str] = set()
    for key in _CONTAINER_LISTS:
        current: set[str] = set()
        for index, raw in enumerate(as_list(pod.get(key))):
            _check_container(out, as_map(raw), (*loc, key, index), earlier, volumes)
            current.add(str(as_map(raw).get("name")))
        earlier |= current
    _check_tolerations(out, as_list(pod.get("tolerations")), (*loc, "tolerations"))
    for key, value in as_map(pod.get("nodeSelector")).items():
        out.extend((*loc, "nodeSelector", key), _names.qualified_name(str(key)), "label-key")
        if isinstance(value, str):
            out.extend((*loc, "nodeSelector", key), _names.label_value(value), "label-value")


def _check_container(
    out: Collector, ctr: Mapping[str, Any], loc: Loc, names: set[str], volumes: set[str]
) -> None:
    name = as_str(ctr.get("name"))
    if name:
        out.extend((*loc, "name"), _names.dns1123_label(name), "container-name")
        if name in names:
            out.add(
                (*loc, "name"),
                f"Duplicate value: {name!r} (container names are unique across containers, "
                "initContainers and ephemeralContainers)",
                "container-name",
            )
    elif name == "":
        out.add((*loc, "name"), "Required value", "container-name")
    if not ctr.get("image"):
        out.add((*loc, "image"), "Required value", "container-image")
    pull = ctr.get("imagePullPolicy")
    if pull is not None and pull not in _PULL_POLICIES:
        out.add(
            (*loc, "imagePullPolicy"),
            unsupported(pull, _PULL_POLICIES),
            "container-image-pull-policy",
        )
    _check_ports(out, as_list(ctr.get("ports")), (*loc, "ports"))
    check_container_resources(out, as_map(ctr.get("resources")), (*loc, "resources"))
    check_probes(out, ctr, loc, init=loc[-2] == "initContainers")
    check_env(out, ctr.get("env"), (*loc, "env"))
    check_env_from(out, ctr.get("envFrom"), (*loc, "envFrom"))
    for index, raw in enumerate(as_list(ctr.get("volumeMounts"))):
        mount = as_map(raw)
        mount_name = as_str(mount.get("name"))
        if mount_name is not None and mount_name not in volumes:
            out.add(
                (*loc, "volumeMounts", index, "name"),
                f"Not found: {mount_name!r} "
                "(no volume or volumeClaimPolicies template of that name)",
                "container-volume-mount",
            )
        if mount.get("mountPath") == "":
            out.add(
                (*loc, "volumeMounts", index, "mountPath"),
                "Required value",
                "container-volume-mount",
            )


def _check_ports(out: Collector, ports: list[Any], loc: Loc) -> None:
    names: set[str] = set()
    for index, raw in enumerate(ports):
        port, port_loc = as_map(raw), (*loc, index)
        name = as_str(port.get("name"))
        if name:
            errors = _names.port_name(name)
            out.extend((*port_loc, "name"), errors, "container-port")
            if not errors and name in names:
                out.add((*port_loc, "name"), f"Duplicate value: {name!r}", "container-port")
            names.add(name)
        for key in ("containerPort", "hostPort"):
            number = as_int(port.get(key))
            if (
                number is not None
                and not (key == "hostPort" and number == 0)
                and not 1 <= number <= 65535
            ):
                out.add(
                    (*port_loc, key), "must be between 1 and 65535, inclusive", "container-port"
                )
        protocol = port.get("protocol")
        if protocol is not None and protocol not in _PORT_PROTOCOLS:
            out.add(
                (*port_loc, "protocol"), unsupported(protocol, _PORT_PROTOCOLS), "container-port"
            )


def _check_tolerations(out: Collector, tolerations: list[Any], loc: Loc) -> None:
    for index, raw in enumerate(tolerations):
        toleration, tloc = as_map(raw), (*loc, index)
        key, operator = as_str(toleration.get("key")) or "", toleration.get("operator") or ""
        value = as_str(toleration.get("value")) or ""
        if key:
            out.extend((*tloc, "key"), _names.qualified_name(key), "pod-toleration")
        elif operator != "Exists":
            out.add(
                (*tloc, "operator"),
                "operator must be Exists when `key` is empty, "
                'which means "match all values and all keys"',
                "pod-toleration",
            )
        effect = toleration.get("effect")
        if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
            out.add(
                (*tloc, "effect"),
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
                "pod-toleration",
            )
        if operator in ("", "Equal"):
            errors = _names.label_value(value)
            if errors:
                out.add((*tloc, "operator"), ";".join(errors), "pod-toleration")
        elif operator == "Exists":
            if value:
                out.add(
                    (*tloc, "operator"),
                    "value must be empty when `operator` is 'Exists'",
                    "pod-toleration",
                )
        else:
            out.add(
                (*tloc, "operator"), unsupported(operator, _TOLERATION_OPERATORS), "pod-toleration"
            )
        if effect and effect not in _TAINT_EFFECTS:
            out.add((*tloc, "effect"), unsupported(effect, _TAINT_EFFECTS), "pod-toleration")


def _check_volume(out: Collector, volume: Mapping[str, Any], loc: Loc) -> None:
    name = volume.get("name")
    if name == "":
        out.add((*loc, "name"), "Required value", "pod-volume-name")
    elif isinstance(name, str):
        out.extend((*loc, "name"), _names.dns1123_label(name), "pod-volume-name")
    # No source at all is fine: Kubernetes defaults it to emptyDir (SetDefaults_Volume).
    sources = [key for key in _VOLUME_SOURCES if volume.get(key) is not None]
    size = as_map(volume.get("emptyDir")).get("sizeLimit")
    quantity = parse_quantity(size) if size is not None else None
    if quantity is not None and quantity < 0:
        out.add(
            (*loc, "emptyDir", "sizeLimit"),
            "Forbidden: SizeLimit field must be a valid resource quantity (not negative)",
            "pod-volume-source",
        )
    for extra in sources[1:]:
        out.add(
            (*loc, extra),
            "Forbidden: may not specify more than 1 volume type",
            "pod-volume-source",
        )
