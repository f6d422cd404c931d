"""Pytest plugin: the local devcluster (real kube-apiserver + JobSet controller) for tests.

Register it once, in the root ``tests/conftest.py``::

    pytest_plugins = ["tests.cluster.pytest_devcluster"]

Fixtures
--------
``devcluster`` (session)
    Uses, in this order: the cluster named by ``DEVCLUSTER_KUBECONFIG``; a healthy running
    devcluster (``.devcluster/kubeconfig``, e.g. from ``make cluster-up``); otherwise starts one
    (``devcluster.py up``, building the binaries if needed) and stops it at the end of the session.
    A cluster that is missing or cannot be started FAILS the tests that need it; never a skip.
``cluster_namespace`` (function)
    A fresh namespace (default ServiceAccount present), deleted afterwards.
``kueue`` (session)
    The devcluster's Kueue (the names of its queues: ``tests/cluster/queues.py``). A cluster
    without Kueue FAILS the tests that need it (e.g. ``DEVCLUSTER_KUEUE=0``: deselect them with
    ``-m "not kueue"``).
``cluster_without_jobset`` (session)
    A second devcluster without the JobSet controller, CRD and webhooks (``DEVCLUSTER_JOBSET=0``;
    its own state folder, ``DEVCLUSTER_NOJOBSET_STATE_DIR``, else the main one's with
    ``-nojobset`` appended, e.g. ``.devcluster-nojobset/``; no real node unless
    ``DEVCLUSTER_NOJOBSET_REAL_NODE=1``), for the native backend: a healthy one is reused
    (``scripts/test.sh`` starts it beside the main one), else started on first use (once for
    all pytest-xdist workers) and stopped at the end of the session (or by its watchdog if the
    session dies).
``exclusive_placement`` (function)
    The cluster's exclusive-placement turn: a test that keeps exclusively placed pods live
    (e.g. until all of them run) takes it, so that such tests run one at a time per cluster,
    whatever pytest-xdist worker or environment runs them (:meth:`DevCluster.exclusive_turn`).
``real_node`` (session)
    The devcluster's real node (kubelet + containerd): its name, how to place a pod on it
    (:meth:`RealNode.place`), its images and its shared host folder. A cluster without a Ready
    real node FAILS the tests that need it (e.g. ``DEVCLUSTER_REAL_NODE=0``: deselect them with
    ``-m "not realnode"``).

Marker ``cluster``: every test carrying it gets the ``devcluster`` fixture automatically.
Marker ``nojobset``: a native-backend cluster test that runs on both clusters, ``[jobset]`` on
the devcluster and ``[nojobset]`` on ``cluster_without_jobset`` (its ``devcluster`` and
``cluster_namespace`` are that cluster's). Its keyword arguments narrow the second run to the
parameters given, e.g. ``@pytest.mark.nojobset(backend="native")`` on a test parametrized over
both backends, or ``@pytest.mark.nojobset(False)`` to keep one test of a marked class on the
devcluster only (see :func:`pytest_generate_tests`).
Marker ``realnode``: the test runs containers on the real node (gets ``real_node``; implies
``cluster``). Marker ``kueue``: the test queues JobSets with Kueue (gets ``kueue``; implies
``cluster``).

Needs the ``kubernetes`` Python client (30.x-37.x) only when a cluster test runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

HERE = Path(__file__).resolve().parent
DEVCLUSTER_PY = HERE / "devcluster.py"
JOBSET_GROUP = "jobset.x-k8s.io"
JOBSET_VERSION = "v1alpha2"
JOBSET_PLURAL = "jobsets"
ZONE_LABEL = "topology.kubernetes.io/zone"
SLICE_LABEL = "devcluster/slice"

T = TypeVar("T")


#: Images of the real node (built and imported by ``devcluster.py``; never pulled).
SHELL_IMAGE = "devcluster.local/shell:1"
PYTHON_IMAGE = "devcluster.local/python-jax:1"
REAL_NODE_LABEL = "devcluster/real-node"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "cluster: needs the local control plane (devcluster); started by the session fixture",
    )
    config.addinivalue_line(
        "markers", "realnode: runs real containers on the devcluster's real node (kubelet)"
    )
    config.addinivalue_line(
        "markers", "kueue: queues JobSets with the devcluster's Kueue (DEVCLUSTER_KUEUE)"
    )
    config.addinivalue_line(
        "markers",
        "nojobset(**params): a native-backend cluster test that also runs on the cluster "
        "without JobSet ([jobset] / [nojobset]); params narrow the second run, "
        "nojobset(False) keeps a test of a marked class off it",
    )
    config.addinivalue_line(
        "markers",
        "alone: needs the cluster to itself (restarts its components, or loads the machine "
        "so much that timings beside it mean nothing); scripts/test.sh runs these after the "
        "parallel pass, one at a time",
    )


def _owner_pid() -> int:
    """The process that owns a cluster this session starts: the session itself, or, in a
    worker of a parallel run (pytest-xdist), the controller that started the workers (so the
    first worker's end does not stop a cluster the others still use; the controller stops it
    in :func:`pytest_unconfigure`, or its watchdog when the controller dies)."""
    return os.getppid() if os.environ.get("PYTEST_XDIST_WORKER") else os.getpid()


def _owner_of(state: Path) -> int | None:
    """The process a running cluster belongs to (``up --owner-pid``), if any."""
    try:
        owner = json.loads((state / "state.json").read_text()).get("owner_pid")
    except (OSError, ValueError):
        return None
    return owner if isinstance(owner, int) else None


def pytest_unconfigure(config: pytest.Config) -> None:
    """The session (or the controller of a parallel run) stops the clusters it or one of its
    workers started."""
    if hasattr(config, "workerinput"):
        return
    nojobset = _nojobset_state_dir()
    if _owner_of(nojobset) == os.getpid() and _healthy(nojobset):
        env = _nojobset_env(nojobset)
        subprocess.run([sys.executable, str(DEVCLUSTER_PY), "down"], check=False, env=env)
    if os.environ.get("DEVCLUSTER_KUBECONFIG"):
        return
    state = _state_dir()
    if _owner_of(state) == os.getpid() and _healthy(state):
        subprocess.run([sys.executable, str(DEVCLUSTER_PY), "down"], check=False)


#: The two clusters a ``nojobset`` test runs on (the ``devcluster`` fixture's parameter).
WITH_JOBSET, WITHOUT_JOBSET = "jobset", "nojobset"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked ``nojobset`` runs on both clusters: ``devcluster`` (and with it
    ``cluster_namespace``) is parametrized, session-wide, with the two."""
    marker = metafunc.definition.get_closest_marker("nojobset")
    if marker is None or (marker.args and not marker.args[0]):
        return
    if "devcluster" not in metafunc.fixturenames:
        return
    metafunc.parametrize(
        "devcluster", [WITH_JOBSET, WITHOUT_JOBSET], indirect=True, scope="session"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``@pytest.mark.nojobset(backend="native")``: the run on the cluster without JobSet only
    for the parameters named (the others are deselected)."""
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        marker = item.get_closest_marker("nojobset")
        params = getattr(getattr(item, "callspec", None), "params", {})
        second = marker is not None and params.get("devcluster") == WITHOUT_JOBSET
        if second and any(params.get(k, v) != v for k, v in marker.kwargs.items()):
            dropped.append(item)
        else:
            keep.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def _wants_cluster(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(m) for m in ("cluster", "realnode", "kueue"))


_BUILD_ERROR: list[str] = []


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the binaries (if needed) before any test runs.

    A cold build takes many minutes; done here it is not counted by per-test timeouts.
    """
    if session.config.option.collectonly or os.environ.get("DEVCLUSTER_KUBECONFIG"):
        return
    if not any(_wants_cluster(item) for item in session.items):
        return
    if _healthy(_state_dir()):
        return
    cmd = [sys.executable, str(DEVCLUSTER_PY), "build"]
    capman = session.config.pluginmanager.getplugin("capturemanager")
    ctx = capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext()
    with ctx:
        sys.stderr.write("\n[pytest-devcluster] build (cached binaries are reused)\n")
        proc = subprocess.run(cmd, check=False, stdout=sys.stderr, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        _BUILD_ERROR.append(f"`devcluster.py build` failed (exit {proc.returncode}); see above")


@pytest.fixture(autouse=True)
def _devcluster_for_cluster_marker(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("kueue") is not None:
        request.getfixturevalue("kueue")
    if request.node.get_closest_marker("realnode") is not None:
        request.getfixturevalue("real_node")
    elif request.node.get_closest_marker("cluster") is not None:
        request.getfixturevalue("devcluster")


def _state_dir() -> Path:
    default = HERE.parent.parent / ".devcluster"
    return Path(os.environ.get("DEVCLUSTER_STATE_DIR") or str(default)).resolve()


@dataclass
class DevCluster:
    """Handle on a running cluster, with small helpers for tests."""

    kubeconfig: Path
    started_here: bool = False
    state_dir: Path | None = None
    _clients: dict[str, Any] = field(default_factory=dict, repr=False)

    # -- clients ---------------------------------------------------------------------------
    def api_client(self) -> Any:
        """A new ``kubernetes.client.ApiClient`` for this cluster."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig))

    def _client(self, name: str) -> Any:
        if name not in self._clients:
            from kubernetes import client

            if "api" not in self._clients:
                self._clients["api"] = self.api_client()
            self._clients[name] = getattr(client, name)(self._clients["api"])
        return self._clients[name]

    @property
    def core(self) -> Any:
        return self._client("CoreV1Api")

    @property
    def batch(self) -> Any:
        return self._client("BatchV1Api")

    @property
    def custom(self) -> Any:
        return self._client("CustomObjectsApi")

    @property
    def env(self) -> dict[str, str]:
        """Environment for subprocesses (KUBECONFIG set, kubectl of the devcluster on PATH)."""
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfig))
        bin_dir = self.bin_dir
        if bin_dir:
            env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
        return env

    @property
    def bin_dir(self) -> Path | None:
        if self.state_dir and (self.state_dir / "state.json").exists():
            data = json.loads((self.state_dir / "state.json").read_text())
            if data.get("bin_dir"):
                return Path(data["bin_dir"])
        return None

    # -- helpers ---------------------------------------------------------------------------
    @staticmethod
    def wait_for(
        predicate: Callable[[], T | None],
        timeout: float = 120.0,
        interval: float = 0.5,
        desc: str = "condition",
    ) -> T:
        """Poll ``predicate`` until it returns something truthy; fail the test on timeout."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            last = predicate()
            if last:
                return last
            time.sleep(interval)
        pytest.fail(f"timed out after {timeout:.0f}s waiting for {desc} (last value: {last!r})")

    def create_namespace(self, prefix: str = "t") -> str:
        from kubernetes import client

        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))

        def has_sa() -> bool:
            items = self.core.list_namespaced_service_account(name).items
            return any(sa.metadata.name == "default" for sa in items)

        self.wait_for(has_sa, timeout=30, interval=0.2, desc=f"default ServiceAccount in {name}")
        return name

    def delete_namespace(self, name: str) -> None:
        from kubernetes.client.rest import ApiException

        try:
            self.core.delete_namespace(name)
        except ApiException as e:
            if e.status != 404:
                raise

    def create_jobset(self, namespace: str, body: dict[str, Any], dry_run: bool = False) -> Any:
        kwargs = {"dry_run": "All"} if dry_run else {}
        return self.custom.create_namespaced_custom_object(
            JOBSET_GROUP, JOBSET_VERSION, namespace, JOBSET_PLURAL, body, **kwargs
        )

    def get_jobset(self, namespace: str, name: str) -> dict[str, Any]:
        obj: dict[str, Any] = self.custom.get_namespaced_custom_object(
            JOBSET_GROUP, JOBSET_VERSION, namespace, JOBSET_PLURAL, name
        )
        return obj

    def delete_jobset(self, namespace: str, name: str) -> None:
        self.custom.delete_namespaced_custom_object(
            JOBSET_GROUP,
            JOBSET_VERSION,
            namespace,
            JOBSET_PLURAL,
            name,
            propagation_policy="Foreground",
        )

    def wait_jobset_terminal(self, namespace: str, name: str, timeout: float = 180) -> dict:
        """Wait until ``status.terminalState`` is set; returns the JobSet object."""

        def done() -> dict[str, Any] | None:
            js = self.get_jobset(namespace, name)
            return js if (js.get("status") or {}).get("terminalState") else None

        return self.wait_for(done, timeout=timeout, desc=f"JobSet {namespace}/{name} to finish")

    def first_event_at(self, namespace: str, field_selector: str, timeout: float = 0) -> float:
        """When the first Event of ``namespace`` that ``field_selector`` matches was written
        (epoch seconds: its ``eventTime`` when its writer set one, else its first timestamp);
        waits up to ``timeout`` seconds for one (its writer may write it apart from what it
        is about)."""

        def written() -> float | None:
            events = self.core.list_namespaced_event(namespace, field_selector=field_selector)
            times = [
                e.event_time or e.first_timestamp or e.metadata.creation_timestamp
                for e in events.items
            ]
            return min(t.timestamp() for t in times) if times else None

        if timeout <= 0:
            found = written()
            assert found is not None, f"no Event {field_selector} in {namespace}"
            return found
        return self.wait_for(
            written, timeout=timeout, desc=f"an Event {field_selector} in {namespace}"
        )

    def node_labels(self) -> dict[str, dict[str, str]]:
        return {n.metadata.name: dict(n.metadata.labels or {}) for n in self.core.list_node().items}

    @contextlib.contextmanager
    def exclusive_turn(self, timeout: float = 600) -> Iterator[None]:
        """Hold this cluster's exclusive-placement turn (one holder at a time, across processes).

        An exclusively placed pod's anti-affinity keeps every other JobSet's pods, in every
        namespace, out of its topology domain. On the devcluster's two zones, two tests whose
        pods stay live until all of them run each put their first Job in one zone and wait for
        the other for ever, while no other test's JobSet pod can be scheduled on any kwok node:
        a CI run met exactly that (seven tests timed out). Tests that hold domains so take
        turns; their pods end within seconds of running, so a turn is short."""
        folder = self.state_dir
        if folder is None:  # a cluster of the user's: one lock per kubeconfig, for this user
            key = hashlib.sha256(str(self.kubeconfig.resolve()).encode()).hexdigest()[:16]
            folder = Path(tempfile.gettempdir()) / f"devcluster-turns-{os.getuid()}-{key}"
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "exclusive-placement.lock", "a+b") as lock:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        pytest.fail(
                            f"another test held {lock.name} for over {timeout:.0f}s",
                            pytrace=False,
                        )
                    time.sleep(0.2)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def _run_devcluster(
    args: list[str],
    request: pytest.FixtureRequest,
    stream: bool,
    env: dict[str, str] | None = None,
) -> str:
    """Run devcluster.py; with stream=True its progress goes straight to the terminal."""
    cmd = [sys.executable, str(DEVCLUSTER_PY), *args]
    capman = request.config.pluginmanager.getplugin("capturemanager")
    if stream and capman is not None:
        with capman.global_and_fixture_disabled():
            sys.stderr.write(f"\n[pytest-devcluster] {' '.join(args)}\n")
            proc = subprocess.run(
                cmd, check=False, stdout=sys.stderr, stderr=subprocess.STDOUT, env=env
            )
        out = ""
    else:
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, env=env)
        out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise RuntimeError(
            f"`devcluster.py {' '.join(args)}` failed (exit {proc.returncode})\n{out}"
        )
    return out


def _healthy(state_dir: Path) -> bool:
    proc = subprocess.run(
        [sys.executable, str(DEVCLUSTER_PY), "status", "--json"],
        check=False,
        capture_output=True,
        text=True,
        env=dict(os.environ, DEVCLUSTER_STATE_DIR=str(state_dir)),
    )
    try:
        return bool(json.loads(proc.stdout)["healthy"])
    except (ValueError, KeyError):
        return False


def _check_api(dc: DevCluster) -> None:
    try:
        import kubernetes  # noqa: F401
    except ImportError:
        pytest.fail(
            "cluster tests need the `kubernetes` Python client (pip install 'kubernetes>=30,<38')",
            pytrace=False,
        )
    try:
        dc.core.list_node()
        dc.custom.list_cluster_custom_object(JOBSET_GROUP, JOBSET_VERSION, JOBSET_PLURAL, limit=1)
    except Exception as e:  # any failure here means: no usable cluster
        pytest.fail(f"devcluster at {dc.kubeconfig} is not usable: {e}", pytrace=False)


@pytest.fixture(scope="session")
def devcluster(request: pytest.FixtureRequest) -> Iterator[DevCluster]:
    if getattr(request, "param", WITH_JOBSET) == WITHOUT_JOBSET:  # a ``nojobset`` test
        yield request.getfixturevalue("cluster_without_jobset")
        return
    explicit = os.environ.get("DEVCLUSTER_KUBECONFIG")
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            pytest.fail(f"DEVCLUSTER_KUBECONFIG={explicit} does not exist", pytrace=False)
        dc = DevCluster(kubeconfig=path)
        _check_api(dc)
        yield dc
        return

    state = _state_dir()
    if _healthy(state):
        dc = DevCluster(kubeconfig=state / "kubeconfig", state_dir=state)
        _check_api(dc)
        yield dc
        return

    if _BUILD_ERROR:
        pytest.fail(f"could not build the devcluster: {_BUILD_ERROR[0]}", pytrace=False)
    try:
        _run_devcluster(["up", "--owner-pid", str(_owner_pid())], request, stream=True)
    except Exception as e:
        # `up` cleans up after itself when it fails; make sure nothing is left anyway.
        subprocess.run([sys.executable, str(DEVCLUSTER_PY), "down"], check=False)
        pytest.fail(f"could not start the devcluster: {e}", pytrace=False)
    # `up` finds a cluster that another session started meanwhile healthy and leaves it alone:
    # then it is not ours to stop. Ours is stopped by pytest_unconfigure, not here: a session
    # with ``nojobset`` tests sets this fixture up again each time the cluster changes.
    dc = DevCluster(
        kubeconfig=state / "kubeconfig",
        started_here=_owner_of(state) == os.getpid(),
        state_dir=state,
    )  # a worker's cluster belongs to its controller: started_here is false there
    _check_api(dc)
    yield dc


@dataclass
class RealNode:
    """The devcluster's real node, for tests that run real containers."""

    name: str
    #: Host folder mounted by ``hostPath`` into pods (same path on the node), or None when
    #: the cluster is not a local devcluster.
    shared_dir: Path | None
    subnet: str | None = None
    record: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def place(pod_spec: dict[str, Any]) -> dict[str, Any]:
        """Select the real node in ``pod_spec`` (its label, a toleration of its taint)."""
        pod_spec["nodeSelector"] = {**(pod_spec.get("nodeSelector") or {}), REAL_NODE_LABEL: "true"}
        pod_spec["tolerations"] = [
            *(pod_spec.get("tolerations") or []),
            {"key": REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"},
        ]
        return pod_spec


@pytest.fixture(scope="session")
def real_node(devcluster: DevCluster) -> RealNode:
    """The Ready real node of the cluster, or a test failure that says why there is none."""
    record: dict[str, Any] = {}
    if devcluster.state_dir is not None:
        proc = subprocess.run(
            [sys.executable, str(DEVCLUSTER_PY), "status", "--json"],
            check=False,
            capture_output=True,
            text=True,
            env=dict(os.environ, DEVCLUSTER_STATE_DIR=str(devcluster.state_dir)),
        )
        with contextlib.suppress(ValueError):
            record = json.loads(proc.stdout).get("real_node") or {}
    nodes = devcluster.core.list_node(label_selector=f"{REAL_NODE_LABEL}=true").items
    ready = [
        n.metadata.name
        for n in nodes
        if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
    ]
    if not ready:
        why = (
            "the real node is off (DEVCLUSTER_REAL_NODE=0)"
            if os.environ.get("DEVCLUSTER_REAL_NODE", "1").strip().lower() in ("0", "false")
            else f"no Ready node labelled {REAL_NODE_LABEL}=true (see `make cluster-status`)"
        )
        pytest.fail(
            f"this test runs containers on the devcluster's real node, but {why}; "
            'deselect real-node tests with -m "not realnode"',
            pytrace=False,
        )
    shared = Path(record["dir"]) / "shared" if record.get("dir") else None
    return RealNode(name=ready[0], shared_dir=shared, subnet=record.get("subnet"), record=record)


@pytest.fixture
def cluster_namespace(devcluster: DevCluster) -> Iterator[str]:
    name = devcluster.create_namespace()
    try:
        yield name
    finally:
        devcluster.delete_namespace(name)


@pytest.fixture
def exclusive_placement(devcluster: DevCluster) -> Iterator[None]:
    """The test's turn to keep exclusively placed pods live (:meth:`DevCluster.exclusive_turn`)."""
    with devcluster.exclusive_turn():
        yield


@pytest.fixture(scope="session")
def kueue(devcluster: DevCluster) -> str:
    """The devcluster's ClusterQueue, once Kueue answers; a test failure when there is none."""
    from tests.cluster.queues import CLUSTER_QUEUE

    try:
        cq = devcluster.custom.get_cluster_custom_object(
            "kueue.x-k8s.io", "v1beta2", "clusterqueues", CLUSTER_QUEUE
        )
    except Exception as e:
        why = (
            "Kueue is off (DEVCLUSTER_KUEUE=0)"
            if os.environ.get("DEVCLUSTER_KUEUE", "1").strip().lower() in ("0", "false")
            else f"the ClusterQueue {CLUSTER_QUEUE} cannot be read ({e})"
        )
        pytest.fail(
            f'this test queues JobSets with Kueue, but {why}; deselect with -m "not kueue"',
            pytrace=False,
        )
    return str(cq["metadata"]["name"])


def _nojobset_state_dir() -> Path:
    """The state folder of the cluster without JobSet (one for all pytest-xdist workers):
    ``DEVCLUSTER_NOJOBSET_STATE_DIR``, else the main one's with ``-nojobset`` appended."""
    default = f"{_state_dir()}-nojobset"
    return Path(os.environ.get("DEVCLUSTER_NOJOBSET_STATE_DIR") or default).resolve()


def _nojobset_env(state: Path) -> dict[str, str]:
    """``devcluster.py``'s environment for the cluster without JobSet in ``state``."""
    env = dict(
        os.environ,
        DEVCLUSTER_STATE_DIR=str(state),
        DEVCLUSTER_JOBSET="0",
        DEVCLUSTER_REAL_NODE=os.environ.get("DEVCLUSTER_NOJOBSET_REAL_NODE", "0"),
    )
    env.pop("KUBECONFIG", None)
    return env


@pytest.fixture(scope="session")
def cluster_without_jobset(request: pytest.FixtureRequest) -> Iterator[DevCluster]:
    """A devcluster without JobSet (no CRD, controller or webhooks): a healthy one is reused,
    else one is started (it belongs to the session, or to the controller of a parallel run,
    and is stopped at its end: here, or in :func:`pytest_unconfigure`)."""
    state = _nojobset_state_dir()
    env = _nojobset_env(state)
    started = False
    if not _healthy(state):
        owner = str(_owner_pid())
        try:
            _run_devcluster(["up", "--owner-pid", owner], request, True, env)
        except Exception as e:
            if _owner_of(state) == int(owner):
                subprocess.run([sys.executable, str(DEVCLUSTER_PY), "down"], check=False, env=env)
            pytest.fail(f"could not start the devcluster without JobSet: {e}", pytrace=False)
        started = _owner_of(state) == os.getpid()
    dc = DevCluster(kubeconfig=state / "kubeconfig", started_here=started, state_dir=state)
    try:
        dc.core.list_node()
        groups = {g.name for g in dc._client("ApisApi").get_api_versions().groups}
        if JOBSET_GROUP in groups:
            pytest.fail(f"the cluster in {state} serves {JOBSET_GROUP}", pytrace=False)
        yield dc
    finally:
        if dc.started_here:
            _run_devcluster(["down", "--force"], request, False, env)
