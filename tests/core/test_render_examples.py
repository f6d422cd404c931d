"""Every upstream example JobSet renders, and each rendering keeps what the example wrote.

The examples come from the upstream JobSet module (``tests/core/conftest.py``); the checks
below are derived from each example document itself, not from our own output.
"""

from __future__ import annotations

from typing import Any

from jobset_core import labels
from jobset_core.models import load_jobset
from jobset_core.render import render

NS = "examples"
JOBSET_KEYS = {
    labels.JOBSET_NAME,
    labels.JOBSET_UID,
    labels.REPLICATED_JOB_NAME,
    labels.RESTART_ATTEMPT,
    labels.REPLICATED_JOB_REPLICAS,
    labels.GLOBAL_REPLICAS,
    labels.JOB_INDEX,
    labels.JOB_KEY,
    labels.JOB_GLOBAL_INDEX,
    labels.GROUP_NAME,
    labels.GROUP_REPLICAS,
    labels.JOB_GROUP_INDEX,
}
#: Job spec keys the controller (or the webhook defaults) may set or change.
CONTROLLED_JOB_KEYS = {"template", "suspend", "completionMode"}
CONTROLLED_POD_KEYS = {
    "subdomain",
    "restartPolicy",
    "nodeSelector",
    "tolerations",
    "volumes",
    "affinity",
}


def _spec(document: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = document.get("spec") or {}  # an upstream sample has ``spec: null``
    return spec


def _expected_names(document: dict[str, Any]) -> list[str]:
    name = document["metadata"]["name"]
    return [
        f"{name}-{rjob['name']}-{index}"
        for rjob in _spec(document).get("replicatedJobs") or []
        for index in range(rjob.get("replicas", 1))
    ]


def test_example_renders_as_written(upstream_example: Any) -> None:
    document: dict[str, Any] = upstream_example.document
    js = load_jobset(document)
    for placement in ("webhook", "affinity"):
        out = render(js, NS, uid="example-uid", placement=placement)
        assert list(out.job_names) == _expected_names(document)

        spec = _spec(document)
        network = spec.get("network") or {}
        dns = network.get("enableDNSHostnames", True)
        assert (out.service is not None) == dns
        if out.service is not None:
            assert out.service["metadata"]["name"] == (network.get("subdomain") or js.name)

        rjobs = spec.get("replicatedJobs") or []
        total = sum(r.get("replicas", 1) for r in rjobs)
        for rjob in rjobs:
            template = rjob["template"]
            jobs = out.jobs_for(rjob["name"])
            assert len(jobs) == rjob.get("replicas", 1)
            for index, job in enumerate(jobs):
                _check_job(job, template, index, total, suspended=spec.get("suspend"))


def _check_job(
    job: dict[str, Any],
    template: dict[str, Any],
    index: int,
    total: int,
    *,
    suspended: bool | None,
) -> None:
    meta = job["metadata"]
    user_labels = (template.get("metadata") or {}).get("labels") or {}
    assert set(meta["labels"]) >= JOBSET_KEYS
    assert meta["labels"][labels.JOB_INDEX] == str(index)
    assert meta["labels"][labels.GLOBAL_REPLICAS] == str(total)
    assert meta["labels"][labels.JOBSET_UID] == "example-uid"
    for key, value in user_labels.items():
        if key not in JOBSET_KEYS:
            assert meta["labels"][key] == value
    assert meta["ownerReferences"][0]["uid"] == "example-uid"

    spec, written = job["spec"], template["spec"]
    assert spec["suspend"] is bool(suspended)
    assert spec["completionMode"] == written.get("completionMode", "Indexed")
    for key, value in written.items():
        if key not in CONTROLLED_JOB_KEYS:
            assert spec[key] == value, key

    pod_meta = spec["template"]["metadata"]
    assert {k: pod_meta["labels"][k] for k in JOBSET_KEYS} == {
        k: meta["labels"][k] for k in JOBSET_KEYS
    }
    pod_spec, written_pod = spec["template"]["spec"], written["template"]["spec"]
    for key, value in written_pod.items():
        if key not in CONTROLLED_POD_KEYS:
            assert pod_spec[key] == _with_port_protocols(key, value), key
    assert pod_spec["restartPolicy"] == written_pod.get("restartPolicy", "OnFailure")


def _with_port_protocols(key: str, value: Any) -> Any:
    # The CRD defaults ``ports[].protocol`` to TCP inside the template (jobset-api.md §2.4).
    if key not in ("containers", "initContainers") or not isinstance(value, list):
        return value
    return [
        {**c, "ports": [{"protocol": "TCP", **p} for p in c["ports"]]} if c.get("ports") else c
        for c in value
    ]
