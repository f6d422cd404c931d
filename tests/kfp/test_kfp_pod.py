"""The KFP components in real pods, as the KFP backend runs them, on the devcluster's real node.

What a KFP (v2, Argo) step's pod is made of, from the KFP backend's code (``kubeflow/pipelines``,
read at 7b70c7b, 2026-08-21), and how these pods stand in for it:

* **The command and arguments** are the compiled component's own
  (``deploymentSpec.executors.<exec>.container`` of ``launch_jobset.yaml``), with ``{{$}}``
  replaced by the executor input, as the driver does once per task
  (``backend/src/v2/driver/driver.go``, ``initPodSpecPatch``: ``resolveContainerArgs``).
* **The identity inputs** are resolved by that same driver run
  (``backend/src/v2/driver/resolve.go``): ``{{$.pipeline_job_uuid}}`` is the run's ID,
  ``{{$.pipeline_task_name}}`` the task's name, ``{{$.pipeline_task_uuid}}`` the ID of the
  DAG execution the task runs in.
* **A retry** (``set_retry``) is Argo's ``retryStrategy`` on the executor template
  (``backend/src/v2/compiler/argocompiler/container.go``, ``addContainerExecutorTemplate``): the
  driver is not run again, so a retried pod has the same command, arguments and executor input;
  only the pod (its name and UID, ``KFP_POD_NAME`` / ``KFP_POD_UID``) and ``KFP_RETRY_INDEX``
  change. So do these pods.
* **PID 1** is Argo's emissary, which starts the command in its own process group and sends
  the signals it gets to that group (``argo-workflows``: ``cmd/argoexec/commands/emissary.go``,
  ``workflow/executor/osspecific``). Here it is Debian's ``tini -g``, which does the same, but
  reaps its child at once where the emissary looks once a second: on a SIGTERM, KFP's launcher
  binary (the emissary's child) dies at once, and the step's Python process is killed with the
  pod's other processes up to a second later. The launcher's DELETE on SIGTERM is therefore a
  best effort in KFP (see docs/kfp.md). Tested here with a PID 1 that gives the step the
  emissary's second at its most (:data:`EMISSARY`): the kubelet's SIGTERM to a deleted pod
  reaches the handler through the compiled command's shell, and the handler deletes the JobSet
  with the pod's own credentials within it. (Under ``tini`` the shell dies at the signal, tini
  ends the container at once, and the DELETE never leaves: the emissary's least.)
  ``cleanup_jobsets`` in an exit handler, and the run's ``Workflow`` as the JobSet's owner, are
  what remove a stopped run's JobSet when the second is not enough.
* **Credentials** are the pod's own: the ``pipeline-runner`` service account's token, in-cluster
  configuration at the ``kubernetes`` Service, and nothing but the shipped Roles
  (``kfp_components/rbac/``). Not run: the KFP launcher binary in front of the command (it
  records the execution in ML Metadata and uploads the outputs; no KFP API server or ML Metadata
  here), so the step's outputs are read from ``output_metadata.json`` through the container's
  termination message.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster.localcluster.node_host import cgroup_mounts
from tests.kfp._cluster import ROOT, annotations, bind, gone, only_run, run_status, runs
from tests.kfp.conftest import make_jobset

pytestmark = [pytest.mark.cluster, pytest.mark.kfp, pytest.mark.realnode]

LAUNCHER_IMAGE = "devcluster.local/kfp-launcher:1"
ROLES = {"controller": "jobset-launcher-controller.yaml", "native": "jobset-launcher-native.yaml"}
#: Where the SDK's executor writes the step's outputs, read back as the termination message.
OUTPUT_METADATA = "/tmp/kfp_outputs/output_metadata.json"


def _component(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A compiled component's container and its component spec."""
    compiled = yaml.safe_load((ROOT / "kfp_components" / f"{name}.yaml").read_text())
    spec = compiled["components"][f"comp-{name.replace('_', '-')}"]
    return compiled["deploymentSpec"]["executors"][spec["executorLabel"]]["container"], spec


def executor_input(
    component: str, parameters: dict[str, Any], *, run_id: str, task: str, execution: int
) -> dict[str, Any]:
    """The executor input the driver gives a task: its parameters, and where to write each
    output (parameters to files, artifacts to the scratch volume their URI maps to)."""
    _, spec = _component(component)
    outputs = spec.get("outputDefinitions") or {}
    artifacts = {
        name: {
            "artifacts": [
                {
                    "name": name,
                    "type": dict(definition["artifactType"]),
                    "uri": f"minio://mlpipeline/v2/artifacts/{run_id}/{task}/{execution}/{name}",
                    "metadata": {},
                }
            ]
        }
        for name, definition in (outputs.get("artifacts") or {}).items()
    }
    return {
        "inputs": {"parameterValues": parameters},
        "outputs": {
            "parameters": {
                name: {"outputFile": f"/tmp/outputs/{name}/data"}
                for name in outputs.get("parameters") or {}
            },
            "artifacts": artifacts,
            "outputFile": OUTPUT_METADATA,
        },
    }


#: PID 1 of a step's pod: Debian's ``tini``, sending the signals it gets to the step's group.
TINI = ("tini", "-g", "--")
#: PID 1 as KFP's emissary at its most generous: on SIGTERM it signals the step's process group,
#: and ends the container one second later (the emissary looks once a second whether its child,
#: KFP's launcher binary, which exits at once, is gone; at its least it is at once). Its child
#: is in a group of its own, as the emissary starts it.
EMISSARY = (
    "python3",
    "-c",
    "import os, signal, subprocess, sys, time\n"
    "child = subprocess.Popen(sys.argv[1:], start_new_session=True)\n"
    "def forward(signum, frame):\n"
    "    os.killpg(child.pid, signum)\n"
    "    time.sleep(1.0)\n"
    "    os._exit(128 + signum)\n"
    "signal.signal(signal.SIGTERM, forward)\n"
    "sys.exit(child.wait())\n",
)


def step_pod(  # noqa: PLR0917
    component: str,
    inputs: dict[str, Any],
    name: str,
    real_node: Any,
    retry_index: int,
    pid1: tuple[str, ...] = TINI,
) -> dict[str, Any]:
    """The pod of one attempt of a step, as the KFP backend makes it (see the module)."""
    container, _ = _component(component)
    resolved = json.dumps(inputs)
    command = [part.replace("{{$}}", resolved) for part in container["command"]]
    args = [part.replace("{{$}}", resolved) for part in container["args"]]
    env = [
        {"name": "KFP_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "KFP_POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
        {"name": "KFP_RETRY_INDEX", "value": str(retry_index)},
    ]
    restricted = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    spec = {
        "serviceAccountName": "pipeline-runner",
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 30,
        "securityContext": {"runAsUser": 65534, "runAsGroup": 65534},
        "containers": [
            {
                "name": "main",
                "image": LAUNCHER_IMAGE,
                "imagePullPolicy": "Never",
                "command": [*pid1, *command],
                "args": args,
                "env": env,
                "securityContext": restricted,
                "terminationMessagePath": OUTPUT_METADATA,
                "volumeMounts": [{"name": "minio-scratch", "mountPath": "/minio"}],
            }
        ],
        "volumes": [{"name": "minio-scratch", "emptyDir": {}}],
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": real_node.place(spec),
    }


class Step:
    """One KFP task of a pipeline run: the driver's resolved inputs, and its attempts' pods."""

    def __init__(
        self, devcluster: Any, namespace: str, real_node: Any, component: str, **parameters: Any
    ) -> None:
        self.devcluster, self.namespace, self.real_node = devcluster, namespace, real_node
        self.component = component
        self.run_id = str(uuid.uuid4())
        self.task = component.replace("_", "-")
        self.run_id = parameters.setdefault("run_id", self.run_id)
        if component == "launch_jobset":
            self.task = parameters.setdefault("task_name", self.task)
            parameters.setdefault("task_id", "17")
        self.inputs = executor_input(
            component, parameters, run_id=self.run_id, task=self.task, execution=23
        )
        self.attempts: list[str] = []
        #: The pods' controller owner (the run's Workflow, as Argo makes its pods).
        self.owner: dict[str, Any] | None = None

    def attempt(self, pid1: tuple[str, ...] = TINI) -> str:
        """Start the next attempt (a retry: the same inputs in a new pod); its pod's name."""
        index = len(self.attempts)
        name = f"{self.task}-{self.run_id[:8]}-{index}"
        body = step_pod(self.component, self.inputs, name, self.real_node, index, pid1)
        if self.owner is not None:
            body["metadata"]["ownerReferences"] = [self.owner]
        self.devcluster.core.create_namespaced_pod(self.namespace, body)
        self.attempts.append(name)
        return name

    def pod(self, name: str) -> Any:
        return self.devcluster.core.read_namespaced_pod(name, self.namespace)

    def ended(self, name: str, timeout: float) -> Any:
        """The pod's container state once it terminated."""

        def terminated() -> Any:
            statuses = self.pod(name).status.container_statuses or []
            return statuses and statuses[0].state.terminated

        return self.devcluster.wait_for(terminated, timeout, desc=f"pod {name} to end")

    def outputs(self, name: str, timeout: float = 120) -> dict[str, Any]:
        state = self.ended(name, timeout)
        log = self.log(name)
        assert state.exit_code == 0, f"exit {state.exit_code} ({state.reason}):\n{log}"
        return dict(json.loads(state.message)["parameterValues"])

    def log(self, name: str) -> str:
        return str(self.devcluster.core.read_namespaced_pod_log(name, self.namespace))


def pod_processes(record: dict[str, Any], uid: str) -> set[int]:
    """The processes of a pod on the real node (its cgroups below the node's own). A
    container that ends between the walk and the read (the step's init container) takes its
    cgroup with it: it has no processes left."""
    marks = (f"pod{uid}", f"pod{uid.replace('-', '_')}")
    pids: set[int] = set()
    for mount in cgroup_mounts():
        for dirpath, _, files in os.walk(mount / record["cgroup"]):
            if "cgroup.procs" in files and any(m in dirpath for m in marks):
                with contextlib.suppress(FileNotFoundError):
                    procs = Path(dirpath, "cgroup.procs").read_text()
                    pids.update(int(p) for p in procs.split())
    return pids


def kill_pod(record: dict[str, Any], uid: str) -> None:
    """SIGKILL every process of the pod, as a node (or the OOM killer) kills them: no time to
    clean up. Again until none is left (one may have ended, or started, meanwhile)."""
    pids = pod_processes(record, uid)
    assert pids, f"no processes of pod {uid} found below /{record['cgroup']}"
    deadline = time.monotonic() + 10
    while pids and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
        pids = pod_processes(record, uid)


@pytest.fixture
def launch(devcluster: Any, cluster_namespace: str, real_node: Any) -> Any:
    def make(backend: str, jobset: dict[str, Any], **parameters: Any) -> Step:
        bind(devcluster, cluster_namespace, ROLES[backend])
        return Step(
            devcluster,
            cluster_namespace,
            real_node,
            "launch_jobset",
            jobset=yaml.safe_dump(jobset),
            backend=backend,
            **parameters,
        )

    return make


@pytest.mark.parametrize("backend", ["controller", "native"])
def test_a_retry_after_a_killed_pod_reattaches(
    backend: str, launch: Any, devcluster: Any, cluster_namespace: str, real_node: Any
) -> None:
    """The first attempt's pod dies as a node kills it (SIGKILL to every process, no time to
    clean up); the retry, with the identity KFP gives it, adopts the same JobSet (same UID, no
    second one) and reports its result. An identity drawn per attempt or per pod (a random
    ID, ``KFP_POD_NAME``, the retry index) would make a second JobSet here."""
    jobset = make_jobset(
        annotations=annotations(run_seconds="25", termination_message='{"accuracy": 0.9}'),
        worker_annotations=annotations(run_seconds="2"),
    )
    step = launch(backend, jobset, delete_policy="on_timeout", follow_logs=True)
    first = step.attempt()

    def running() -> dict[str, Any] | None:
        found = runs(devcluster, cluster_namespace, backend)
        ready = found and run_status(found[0], backend).get("replicatedJobsStatus")
        return found[0] if ready else None

    created = devcluster.wait_for(running, 120, desc="the first attempt's JobSet to run")
    uid = created["metadata"]["uid"]
    kill_pod(real_node.record, step.pod(first).metadata.uid)
    killed = step.ended(first, 60)
    assert killed.exit_code == 137, (killed.exit_code, killed.reason)
    assert only_run(devcluster, cluster_namespace, backend)["metadata"]["uid"] == uid

    second = step.attempt()
    outputs = step.outputs(second, timeout=180)
    log = step.log(second)
    assert "adopted (an earlier attempt created it)" in log, log
    assert outputs["jobset_uid"] == uid
    assert outputs["terminal_state"] == "Completed"
    assert outputs["result"] == {"accuracy": 0.9}
    assert outputs["backend"] == backend
    run = only_run(devcluster, cluster_namespace, backend)  # still one, never a second
    assert run["metadata"]["uid"] == uid
    labels = run["metadata"]["labels"]
    assert labels["jobset-core/kfp-run-id"] == step.run_id
    assert labels["jobset-core/kfp-task-name"] == step.task
    assert labels["jobset-core/kfp-task-id"] == "17"


@pytest.mark.parametrize("backend", ["controller", "native"])
def test_a_deleted_pod_deletes_its_jobset(
    backend: str, launch: Any, devcluster: Any, cluster_namespace: str
) -> None:
    """The step's pod is deleted mid-run: the kubelet sends SIGTERM within the pod's grace
    period, PID 1 (KFP's emissary at its most, :data:`EMISSARY`) passes it to the step's
    process group through the compiled command's shell, and the launcher's handler deletes the
    JobSet with the pod's own credentials within that second. A launcher without the handler, a
    handler slower than a second (one that waits for its wait loop to notice, say), or a Role
    without ``delete`` would leave the JobSet: it has no owner here and never finishes."""
    step = launch(backend, make_jobset(annotations=annotations(never_finish="true")))
    name = step.attempt(EMISSARY)

    def running() -> bool:
        found = runs(devcluster, cluster_namespace, backend)
        return bool(found) and bool(run_status(found[0], backend).get("replicatedJobsStatus"))

    devcluster.wait_for(running, 120, desc="the step's JobSet to run")
    devcluster.wait_for(lambda: "created" in step.log(name), 30, desc="the step to say so")
    lines: list[str] = []  # the log is gone with the container: read it as it is written
    stream = devcluster.core.read_namespaced_pod_log(
        name, cluster_namespace, follow=True, _preload_content=False
    )
    reader = threading.Thread(
        target=lambda: lines.extend(line.decode() for line in stream), daemon=True
    )
    reader.start()
    devcluster.core.delete_namespaced_pod(name, cluster_namespace, grace_period_seconds=30)
    started = time.monotonic()
    reader.join(40)  # the stream ends with the container (or at SIGKILL, 30 s on)
    ended = time.monotonic() - started
    log = "".join(lines)
    left = runs(devcluster, cluster_namespace, backend)
    assert all(r["metadata"].get("deletionTimestamp") for r in left), f"not deleted:\n{log}"
    assert "terminated by SIGTERM" in log and "(DELETE sent)" in log, log
    assert ended < 20, f"the pod ended {ended:.1f} s after its deletion, not at the signal"
    devcluster.wait_for(lambda: gone(devcluster, cluster_namespace, backend), 60, desc="deletion")


def test_the_exit_handler_removes_what_the_run_left(
    launch: Any, devcluster: Any, cluster_namespace: str, real_node: Any
) -> None:
    """``cleanup_jobsets`` in a pod of its own (an exit handler's) deletes the runs of its
    pipeline run on both backends, and nothing of another run."""
    never = make_jobset(annotations=annotations(never_finish="true"))
    run_id = str(uuid.uuid4())
    ours = [
        launch("controller", never, run_id=run_id, task_name="train"),
        launch("native", never, run_id=run_id, task_name="train-native"),
    ]
    other = launch("controller", never)
    for step in [*ours, other]:
        step.attempt()

    def launched() -> bool:
        jobsets = runs(devcluster, cluster_namespace, "controller")
        return len(jobsets) == 2 and bool(runs(devcluster, cluster_namespace, "native"))

    devcluster.wait_for(launched, 120, desc="three runs")
    cleanup = Step(devcluster, cluster_namespace, real_node, "cleanup_jobsets", run_id=run_id)
    outputs = cleanup.outputs(cleanup.attempt(), timeout=120)
    assert outputs["Output"] == 2, cleanup.log(cleanup.attempts[0])

    def only_the_other_left() -> bool:
        left = runs(devcluster, cluster_namespace, "controller")
        anchors = runs(devcluster, cluster_namespace, "native")
        labels = [r["metadata"]["labels"]["jobset-core/kfp-run-id"] for r in left]
        return not anchors and labels == [other.run_id]

    devcluster.wait_for(only_the_other_left, 60, desc="the cleanup")


WORKFLOW_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "workflows.argoproj.io"},
    "spec": {
        "group": "argoproj.io",
        "names": {"kind": "Workflow", "plural": "workflows", "singular": "workflow"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}


@pytest.fixture(scope="module")
def workflows(devcluster: Any) -> Iterator[Any]:
    """Argo's ``Workflow`` kind (its name and group; no Argo runs): what owns a KFP run's pods."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    extensions = client.ApiextensionsV1Api(devcluster.api_client())
    try:
        extensions.create_custom_resource_definition(WORKFLOW_CRD)
        created = True
    except ApiException as error:
        if error.status != 409:
            raise
        created = False

    def established() -> bool:
        crd = extensions.read_custom_resource_definition(WORKFLOW_CRD["metadata"]["name"])
        return any(
            c.type == "Established" and c.status == "True" for c in crd.status.conditions or []
        )

    devcluster.wait_for(established, 30, desc="the Workflow kind")
    yield devcluster.custom
    if created:
        extensions.delete_custom_resource_definition(WORKFLOW_CRD["metadata"]["name"])


@pytest.mark.parametrize("backend", ["controller", "native"])
def test_a_deleted_run_takes_the_jobset_its_killed_step_left(  # noqa: PLR0917
    backend: str,
    launch: Any,
    workflows: Any,
    devcluster: Any,
    cluster_namespace: str,
    real_node: Any,
) -> None:
    """The step's pod is killed with no time to clean up, and the run is then deleted (no exit
    handler runs): the JobSet, owned by the run's Workflow as the pod is, is garbage collected
    with it. A JobSet without that owner would stay forever."""
    workflow = workflows.create_namespaced_custom_object(
        "argoproj.io",
        "v1alpha1",
        cluster_namespace,
        "workflows",
        {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "metadata": {"name": "run"}},
    )
    step = launch(backend, make_jobset(annotations=annotations(never_finish="true")))
    step.owner = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "name": "run",
        "uid": workflow["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    name = step.attempt()
    run = devcluster.wait_for(
        lambda: runs(devcluster, cluster_namespace, backend), 120, desc="the run"
    )[0]
    owners = [(o["kind"], o["uid"]) for o in run["metadata"].get("ownerReferences") or []]
    assert owners == [("Workflow", workflow["metadata"]["uid"])]
    devcluster.wait_for(
        lambda: "owned by Workflow run" in step.log(name), 30, desc="the step to say so"
    )
    kill_pod(real_node.record, step.pod(name).metadata.uid)
    assert step.ended(name, 60).exit_code == 137
    assert runs(devcluster, cluster_namespace, backend)  # the killed step deleted nothing

    workflows.delete_namespaced_custom_object(
        "argoproj.io", "v1alpha1", cluster_namespace, "workflows", "run"
    )
    devcluster.wait_for(
        lambda: gone(devcluster, cluster_namespace, backend), 60, desc="garbage collection"
    )
    devcluster.wait_for(
        lambda: not devcluster.batch.list_namespaced_job(cluster_namespace).items,
        60,
        desc="the run's Jobs to follow",
    )
