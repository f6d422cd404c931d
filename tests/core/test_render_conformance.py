"""Conformance: our rendering equals what the real JobSet controller creates, field by field.

For every upstream example JobSet (``tests/core/conftest.py``), in a fresh namespace of the
devcluster (real kube-apiserver + JobSet controller v0.12.0, no alpha feature gates), the test
creates the example exactly as written, reads back the headless Service and the child Jobs the
controller created, and compares them with ``render(example, namespace, uid=<the JobSet's uid>)``
over labels, annotations, owner references, the whole Job spec (pod template included) and the
Service spec.

Normalisation is limited to what the API server itself adds (:data:`SERVER_GENERATED`,
:data:`SERVER_DEFAULTS`); a defaulted field is dropped from the server's object only when our
rendering does not carry it *and* its value is the documented default, so a value the
controller set on purpose still shows up as a difference. The list is also in
``docs/rendering.md``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from jobset_core import labels
from jobset_core.models import load_jobset
from jobset_core.render import render

pytestmark = pytest.mark.cluster

#: How long the controller gets to create every Job of an example (dependsOn chains included).
CREATE_TIMEOUT = 60.0
ANY = object()

#: Metadata the API server generates on every object.
SERVER_GENERATED = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields")

Check = Callable[[Any, dict[str, Any]], bool]


@dataclass(frozen=True)
class Default:
    """A field the API server defaults: its path (``*`` = every list item) and allowed values."""

    path: tuple[str, ...]
    allowed: tuple[Any, ...] | Check

    def accepts(self, value: Any, server: dict[str, Any], holder: dict[str, Any]) -> bool:
        """Whether ``value`` (held by ``holder`` in the server's object) is this default."""
        if callable(self.allowed):
            return self.allowed(value, {"object": server, "holder": holder})
        return ANY in self.allowed or value in self.allowed


def _own_uid(value: Any, ctx: dict[str, Any]) -> bool:
    return bool(value == ctx["object"]["metadata"]["uid"])


def _own_name(value: Any, ctx: dict[str, Any]) -> bool:
    return bool(value == ctx["object"]["metadata"]["name"])


def _own_selector(value: Any, ctx: dict[str, Any]) -> bool:
    uid = ctx["object"]["metadata"]["uid"]
    return bool(value == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})


def _pull_policy(value: Any, ctx: dict[str, Any]) -> bool:
    # core/v1 SetDefaults_Container: Always for ":latest" or an untagged image, else IfNotPresent.
    image = ctx["holder"].get("image", "")
    last = image.rsplit("/", 1)[-1]
    untagged_or_latest = "@" not in last and (":" not in last or last.endswith(":latest"))
    return bool(value == ("Always" if untagged_or_latest else "IfNotPresent"))


_POD = ("spec", "template", "spec")
_CONTAINER_DEFAULTS = (
    ("terminationMessagePath", ("/dev/termination-log",)),
    ("terminationMessagePolicy", ("File",)),
    ("resources", ({},)),
    ("imagePullPolicy", _pull_policy),
)
_PROBE_DEFAULTS = (
    ("timeoutSeconds", (1,)),
    ("periodSeconds", (10,)),
    ("successThreshold", (1,)),
    ("failureThreshold", (3,)),
)

#: Fields the API server defaults on a created Job (``pkg/apis/batch/v1/defaults.go``,
#: ``pkg/apis/core/v1/defaults.go``, the Job registry strategy) and on a Service.
SERVER_DEFAULTS: dict[str, tuple[Default, ...]] = {
    "Job": (
        Default(("spec", "parallelism"), (1,)),
        Default(("spec", "completions"), (1,)),
        Default(("spec", "backoffLimit"), (6, 2147483647)),
        Default(("spec", "completionMode"), ("NonIndexed",)),
        Default(("spec", "podReplacementPolicy"), ("TerminatingOrFailed", "Failed")),
        Default(("spec", "manualSelector"), (False,)),
        Default(("spec", "selector"), _own_selector),
        Default(
            ("spec", "podFailurePolicy", "rules", "*", "onPodConditions", "*", "status"), ("True",)
        ),
        *(
            Default(("spec", "template", "metadata", "labels", key), check)
            for key, check in (
                ("batch.kubernetes.io/controller-uid", _own_uid),
                ("controller-uid", _own_uid),
                ("batch.kubernetes.io/job-name", _own_name),
                ("job-name", _own_name),
            )
        ),
        Default((*_POD, "terminationGracePeriodSeconds"), (30,)),
        Default((*_POD, "dnsPolicy"), ("ClusterFirst",)),
        Default((*_POD, "securityContext"), ({},)),
        Default((*_POD, "schedulerName"), ("default-scheduler",)),
        *(
            Default((*_POD, kind, "*", field), allowed)
            for kind in ("containers", "initContainers")
            for field, allowed in _CONTAINER_DEFAULTS
        ),
        *(
            Default((*_POD, kind, "*", "ports", "*", "protocol"), ("TCP",))
            for kind in ("containers", "initContainers")
        ),
        *(
            Default((*_POD, kind, "*", "env", "*", "valueFrom", "fieldRef", "apiVersion"), ("v1",))
            for kind in ("containers", "initContainers")
        ),
        *(
            Default((*_POD, kind, "*", probe, field), allowed)
            for kind in ("containers", "initContainers")
            for probe in ("livenessProbe", "readinessProbe", "startupProbe")
            for field, allowed in _PROBE_DEFAULTS
        ),
        *(
            Default((*_POD, "volumes", "*", source, "defaultMode"), (420,))
            for source in ("secret", "configMap", "downwardAPI", "projected")
        ),
    ),
    "Service": (
        Default(("spec", "clusterIPs"), (["None"],)),
        Default(("spec", "type"), ("ClusterIP",)),
        Default(("spec", "sessionAffinity"), ("None",)),
        Default(("spec", "ipFamilies"), (["IPv4"], ["IPv6"], ["IPv4", "IPv6"], ["IPv6", "IPv4"])),
        Default(("spec", "ipFamilyPolicy"), ("SingleStack", "PreferDualStack")),
        Default(("spec", "internalTrafficPolicy"), ("Cluster",)),
    ),
}


_MISSING = object()


def _matches(
    node: Any, ours: Any, path: tuple[str, ...]
) -> Iterator[tuple[dict[str, Any], str, Any]]:
    """(holder, key, our value or ``_MISSING``) for every match of ``path`` in ``node``.

    ``*`` stands for every item of a list, or (last in the path) every key of a map.
    """
    head, rest = path[0], path[1:]
    if head == "*" and isinstance(node, dict) and not rest:  # every key of a map
        for key in list(node):
            yield node, key, ours.get(key, _MISSING) if isinstance(ours, dict) else _MISSING
        return
    if head == "*":
        for i, item in enumerate(node if isinstance(node, list) else []):
            mine = ours[i] if isinstance(ours, list) and i < len(ours) else None
            yield from _matches(item, mine, rest)
        return
    if not isinstance(node, dict) or head not in node:
        return
    mine = ours.get(head, _MISSING) if isinstance(ours, dict) else _MISSING
    if rest:
        yield from _matches(node[head], None if mine is _MISSING else mine, rest)
    else:
        yield node, head, mine


#: Resource quantities: the API server rewrites every Quantity into its canonical string
#: (``4`` → ``"4"``, ``"1000m"`` → ``"1"``), so they are compared by value.
QUANTITY_PATHS = tuple(
    (*_POD, *where, "resources", bound, "*")
    for where in (("containers", "*"), ("initContainers", "*"), ())
    for bound in ("limits", "requests")
)


def normalise(server: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    """``server`` without what the API server generated or defaulted and ``ours`` lacks."""
    out = json.loads(json.dumps(server))
    out.pop("status", None)
    for key in SERVER_GENERATED:
        out["metadata"].pop(key, None)
    for default in SERVER_DEFAULTS[out["kind"]]:
        for holder, key, mine in list(_matches(out, ours, default.path)):
            if mine is _MISSING and default.accepts(holder[key], server, holder):
                del holder[key]
    if out["kind"] == "Job":
        for path in QUANTITY_PATHS:
            for holder, key, mine in list(_matches(out, ours, path)):
                if mine is not _MISSING and _same_quantity(mine, holder[key]):
                    holder[key] = mine
    return out


def _same_quantity(ours: Any, theirs: Any) -> bool:
    from kubernetes.utils import parse_quantity

    try:
        return bool(parse_quantity(ours) == parse_quantity(theirs))
    except ValueError:
        return False


def differences(ours: Any, theirs: Any, path: str = "") -> Iterator[str]:
    """One line per field where ``ours`` and ``theirs`` differ."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in sorted(set(ours) | set(theirs)):
            sub = f"{path}.{key}" if path else key
            if key not in theirs:
                # The API server decodes into typed structs: an empty ``omitempty`` list or map
                # we send is dropped, so it is the same object as one without the field.
                if ours[key] not in ([], {}):
                    yield f"{sub}: rendered {ours[key]!r}, controller has nothing"
            elif key not in ours:
                yield f"{sub}: controller has {theirs[key]!r}, not rendered"
            else:
                yield from differences(ours[key], theirs[key], sub)
    elif isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            yield from differences(a, b, f"{path}[{i}]")
    elif ours != theirs:
        yield f"{path}: rendered {ours!r}, controller has {theirs!r}"


def _raw(response: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(response.data)
    return data


def _created_jobs(devcluster: Any, namespace: str, restart_attempt: int) -> set[str]:
    """Names of the Jobs of that restart attempt (earlier attempts may still be terminating)."""
    listed = _raw(
        devcluster.batch.list_namespaced_job(
            namespace,
            label_selector=f"{labels.RESTART_ATTEMPT}={restart_attempt}",
            _preload_content=False,
        )
    )
    return {job["metadata"]["name"] for job in listed["items"]}


def _create(devcluster: Any, namespace: str, document: dict[str, Any]) -> dict[str, Any]:
    from kubernetes.client.rest import ApiException

    try:
        created: dict[str, Any] = devcluster.create_jobset(namespace, document)
    except ApiException as err:
        if err.status == 422 and "feature gate" in (err.body or "").lower():
            pytest.fail(f"the devcluster controller runs without alpha gates: {err.body}")
        raise
    return created


def _container(name: str = "main", **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox:1.36", "command": ["sleep", "1"], **extra}


def _rjob(name: str, replicas: int = 1, group: str | None = None, **template: Any) -> Any:
    pod_spec = template.pop("pod_spec", None) or {"containers": [_container()]}
    pod_meta = template.pop("pod_meta", None)
    job_spec = {"parallelism": 2, "completions": 2, **template.pop("job_spec", {})}
    job_spec["template"] = {"spec": pod_spec, **({"metadata": pod_meta} if pod_meta else {})}
    rjob = {"name": name, "replicas": replicas, "template": {"spec": job_spec, **template}}
    return {**rjob, "groupName": group} if group else rjob


def _jobset(name: str, *rjobs: dict[str, Any], annotations: Any = None, **spec: Any) -> Any:
    meta: dict[str, Any] = {"name": name, **({"annotations": annotations} if annotations else {})}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": meta,
        "spec": {"replicatedJobs": list(rjobs), **spec},
    }


EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
NODE_SELECTOR = "alpha.jobset.sigs.k8s.io/node-selector"

#: Our own JobSets for what the upstream examples leave out: groups, a coordinator with indexes,
#: exclusive placement at both levels, the node-selector strategy, suspend, DNS off, claims.
OWN_CASES = {
    "groups-coordinator-subdomain": _jobset(
        "grp",
        _rjob("driver", 1, group="ctl"),
        _rjob("workers", 3, group="train"),
        _rjob("evaluators", 2, group="train"),
        coordinator={"replicatedJob": "workers", "jobIndex": 1, "podIndex": 1},
        network={"subdomain": "grp-net", "publishNotReadyAddresses": False},
    ),
    "user-metadata-and-pod-defaults": _jobset(
        "meta",
        _rjob(
            "w",
            2,
            metadata={"labels": {"team": "ml"}, "annotations": {"note": "job-level"}},
            pod_meta={"labels": {"app": "trainer"}, "annotations": {"note": "pod-level"}},
            job_spec={"backoffLimit": 2, "completionMode": "Indexed"},
            pod_spec={
                "restartPolicy": "Never",
                "initContainers": [_container("init")],
                "containers": [
                    _container(
                        ports=[{"containerPort": 8080}],
                        env=[
                            {
                                "name": "RANK",
                                "valueFrom": {
                                    "fieldRef": {
                                        "fieldPath": "metadata.annotations['batch.kubernetes.io/"
                                        "job-completion-index']"
                                    }
                                },
                            }
                        ],
                        readinessProbe={"exec": {"command": ["true"]}},
                        resources={"requests": {"cpu": "100m", "memory": "64Mi"}},
                    )
                ],
                "volumes": [{"name": "cfg", "configMap": {"name": "cfg"}}],
            },
        ),
    ),
    "exclusive-jobset-and-rjob-level": _jobset(
        "excl",
        _rjob("a", 2),
        _rjob("b", 1, metadata={"annotations": {EXCLUSIVE: "topology.kubernetes.io/zone"}}),
        annotations={EXCLUSIVE: "devcluster/slice"},
    ),
    "node-selector-strategy": _jobset(
        "nss",
        _rjob("a", 2, pod_spec={"containers": [_container()], "nodeSelector": {"x": "y"}}),
        annotations={EXCLUSIVE: "devcluster/slice", NODE_SELECTOR: "true"},
    ),
    "suspended-no-dns": _jobset(
        "susp", _rjob("a", 2), suspend=True, network={"enableDNSHostnames": False}
    ),
    "volume-claims": _jobset(
        "vcp",
        _rjob(
            "a",
            1,
            pod_spec={
                "containers": [_container(volumeMounts=[{"name": "data", "mountPath": "/data"}])]
            },
        ),
        _rjob("b", 1),
        volumeClaimPolicies=[
            {
                "templates": [
                    {
                        "metadata": {"name": "data"},
                        "spec": {
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}},
                        },
                    }
                ]
            }
        ],
    ),
}


def test_controller_creates_what_we_render(
    upstream_example: Any, devcluster: Any, cluster_namespace: str
) -> None:
    """Each upstream example, as written."""
    _compare(devcluster, cluster_namespace, upstream_example.document)


@pytest.mark.parametrize("document", list(OWN_CASES.values()), ids=list(OWN_CASES))
def test_controller_creates_what_we_render_own_cases(
    document: dict[str, Any], devcluster: Any, cluster_namespace: str
) -> None:
    """Features no upstream example exercises: groups, coordinator, exclusive placement, ..."""
    _compare(devcluster, cluster_namespace, document)


def test_recreated_jobs_carry_the_restart_attempt(devcluster: Any, cluster_namespace: str) -> None:
    """After a restart the controller recreates every Job with ``restart-attempt: 1``."""
    document = _jobset(
        "restarts",
        _rjob(
            "w",
            2,
            job_spec={"backoffLimit": 0},
            pod_meta={"annotations": {"devcluster/fail-until-attempt": "1"}},
        ),
        _rjob("d", 1),
        failurePolicy={"maxRestarts": 2},
    )
    _compare(devcluster, cluster_namespace, document, restart_attempt=1)


def test_controller_jobs_carry_the_workload_env(devcluster: Any, cluster_namespace: str) -> None:
    """The JobSet as every way of running submits it (``inject_env``, the default): the
    controller's Jobs carry the Downward API variables exactly as we render them, a user's own
    variable of the same name included, after a restart too."""
    from jobset_core.workload import inject_workload_env

    own = {"name": "JOBSET_POD_INDEX", "value": "mine"}
    document = _jobset(
        "wlenv",
        _rjob(
            "w",
            2,
            job_spec={"backoffLimit": 0, "completionMode": "Indexed"},
            pod_meta={"annotations": {"devcluster/fail-until-attempt": "1"}},
            pod_spec={
                "initContainers": [_container("init")],
                "containers": [_container(env=[own]), _container("side")],
            },
        ),
        failurePolicy={"maxRestarts": 2},
    )
    injected = inject_workload_env(load_jobset(document)).to_dict()
    containers = injected["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert [len(c["env"]) for c in containers["containers"]] == [5, 5]
    assert own in containers["containers"][0]["env"]
    _compare(devcluster, cluster_namespace, injected, restart_attempt=1)


def _compare(devcluster: Any, ns: str, document: dict[str, Any], restart_attempt: int = 0) -> None:
    created = _create(devcluster, ns, document)
    uid = created["metadata"]["uid"]
    ours = render(load_jobset(document), ns, restart_attempt, uid=uid)

    deadline = time.monotonic() + CREATE_TIMEOUT
    jobs = _created_jobs(devcluster, ns, restart_attempt)
    while set(ours.job_names) - jobs and time.monotonic() < deadline:
        time.sleep(0.5)
        jobs = _created_jobs(devcluster, ns, restart_attempt)

    problems: list[str] = []
    assert jobs <= set(ours.job_names), "the controller created Jobs we did not render"
    for name in ours.job_names:
        if name in jobs:
            # Read each Job on its own: items of a list answer carry no apiVersion/kind.
            job = _raw(devcluster.batch.read_namespaced_job(name, ns, _preload_content=False))
            theirs = normalise(job, ours.job(name))
            problems += [f"Job {name}: {d}" for d in differences(ours.job(name), theirs)]

    if ours.service is None:
        services = _raw(devcluster.core.list_namespaced_service(ns, _preload_content=False))
        assert services["items"] == [], "the controller created a Service we did not render"
    else:
        svc_name = ours.service["metadata"]["name"]
        svc = devcluster.wait_for(
            lambda: _service(devcluster, ns, svc_name), timeout=30, desc="Service"
        )
        theirs = normalise(svc, ours.service)
        problems += [f"Service {svc_name}: {d}" for d in differences(ours.service, theirs)]

    assert not problems, "\n".join(problems)
    missing = [name for name in ours.job_names if name not in jobs]
    if ours.job_names and not jobs:
        pytest.fail(
            f"the controller created none of {list(ours.job_names)} (attempt {restart_attempt})"
        )
    if missing:  # a case that cannot finish is a failure with its reason, never a skip
        pytest.fail(
            f"compared {len(jobs)} of {len(ours.job_names)} Jobs; the devcluster did not let the "
            f"controller create {missing} within {CREATE_TIMEOUT:.0f}s (e.g. an unbound claim)"
        )


def _service(devcluster: Any, namespace: str, name: str) -> dict[str, Any] | None:
    from kubernetes.client.rest import ApiException

    try:
        return _raw(
            devcluster.core.read_namespaced_service(name, namespace, _preload_content=False)
        )
    except ApiException as err:
        if err.status == 404:
            return None
        raise
