"""The cluster the benchmarks run on, and who talks to it.

By default the suite starts a devcluster of its own (``tests/cluster/devcluster.py`` in a
state folder of its own, without the real node, with Kueue: the queue family needs it; the
other families' JobSets carry no queue label, so Kueue's webhooks never see them and its
manager leaves them alone) whose API server writes an audit log and
ends a watch that asks for no timeout after 15-30 s (``--min-request-timeout=15``; the default
is 30-60 minutes), so a measuring window of a minute covers two of those timeouts. With
``KUBECONFIG`` set, it runs on that cluster instead (no audit log: requests are then counted in
each subject's process).

The driver talks as the cluster's admin with the official ``kubernetes`` client (never
through the code under test). Each subject talks as a service account of its own
(:meth:`BenchCluster.identity`): ``cluster`` identities are bound to the waiter role across
the cluster, ``namespace`` ones only in the namespaces they are given (a RoleBinding each, as a
team's triggerer would have), so the observer picks per-namespace informers for them. A
``kueue_reader`` identity is also bound, the same way, to the role that reads Kueue's
Workloads (as ``jobset-airflow-kueue-reader`` is deployed beside the waiter's roles).
Everything created is labelled with the run's id and removed by :meth:`BenchCluster.close`.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from benchmarks.audit import AuditLog
from benchmarks.workloads import BENCH_LABEL

__all__ = ["BenchCluster", "Identity", "progress"]

ROOT = Path(__file__).resolve().parents[1]
DEVCLUSTER = ROOT / "tests" / "cluster" / "devcluster.py"
AUDIT_POLICY = Path(__file__).resolve().parent / "audit-policy.yaml"
#: Seconds a watch that sets no timeout lasts at least on the bench cluster (up to twice that).
MIN_REQUEST_TIMEOUT = 15
#: Pods per fake node on the bench cluster (the default 110 x 8 nodes is fewer than a run).
NODE_PODS = 2000
ROLE = "airflow-provider-jobset-bench-waiter"
#: What a waiter of either backend may do (the native backend creates and patches Jobs,
#: Services and its anchor ConfigMap).
RULES = [
    {
        "apiGroups": ["jobset.x-k8s.io"],
        "resources": ["jobsets", "jobsets/status"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    {
        "apiGroups": ["batch"],
        "resources": ["jobs", "jobs/status"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
    {
        "apiGroups": [""],
        "resources": ["pods", "pods/log", "events", "configmaps", "services"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
    },
]
#: What the waiter may read of Kueue besides (``jobset-airflow-kueue-reader``'s rules).
KUEUE_READER = f"{ROLE}-kueue-reader"
KUEUE_RULES = [
    {
        "apiGroups": ["kueue.x-k8s.io"],
        "resources": ["workloads"],
        "verbs": ["get", "list", "watch"],
    },
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues"], "verbs": ["get"]},
]
T = TypeVar("T")
_STARTED = time.monotonic()


def progress(message: str) -> None:
    """One progress line (with the time since the suite started)."""
    print(f"[bench {time.monotonic() - _STARTED:6.1f}s] {message}", flush=True)


@dataclass(frozen=True)
class Identity:
    """A service account a subject talks as.

    Attributes:
        name: The account's name (also how the audit log names it, see :attr:`user`).
        kubeconfig: A kubeconfig file holding its token.
        user: Its user name at the API server.
        kueue_reader: Also bound to the role that reads Kueue's Workloads.
    """

    name: str
    kubeconfig: Path
    user: str
    kueue_reader: bool = False

    @property
    def roles(self) -> tuple[str, ...]:
        """The cluster roles it is bound to (cluster-wide or in its namespaces)."""
        return (ROLE, KUEUE_READER) if self.kueue_reader else (ROLE,)

    def airflow_env(self) -> dict[str, str]:
        """Environment for an Airflow process: ``kubernetes_default`` is this identity."""
        import json

        conn = {"conn_type": "kubernetes", "extra": {"kube_config_path": str(self.kubeconfig)}}
        return {
            "AIRFLOW_CONN_KUBERNETES_DEFAULT": json.dumps(conn),
            "KUBECONFIG": str(self.kubeconfig),
        }


@dataclass
class BenchCluster:
    """A cluster and the admin's clients (see the module docs).

    Attributes:
        kubeconfig: The admin's kubeconfig.
        work: A folder for the run's files (kubeconfigs, logs, subjects' specs).
        run: The run's id (the value of :data:`~benchmarks.workloads.BENCH_LABEL`).
        state_dir: The devcluster's state folder when the suite started it (else ``None``).
        audit: The API server's audit log, when the suite can read it.
    """

    kubeconfig: Path
    work: Path
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    state_dir: Path | None = None
    audit: AuditLog | None = None
    _api: Any = None
    _namespaces: list[str] = field(default_factory=list)
    _cluster_objects: list[tuple[str, str]] = field(default_factory=list)
    _accounts: int = 0

    # ------------------------------------------------------------------ start / stop

    @classmethod
    def start(cls, state_dir: Path, work: Path, *, keep: bool = False) -> BenchCluster:
        """Start a devcluster of the suite's own in ``state_dir`` (or reuse the one running
        there), stopped by :meth:`close`, or by the devcluster's watchdog if this process
        dies (``keep``: no watchdog, it stays up for the next run)."""
        flags = [
            f"--audit-policy-file={AUDIT_POLICY}",
            "--audit-log-path={state}/logs/audit.log",
            "--audit-log-format=json",
            "--audit-log-maxsize=0",
            f"--min-request-timeout={MIN_REQUEST_TIMEOUT}",
        ]
        env = dict(
            os.environ,
            DEVCLUSTER_STATE_DIR=str(state_dir),
            DEVCLUSTER_REAL_NODE="0",
            # Kueue on (the queue family): other families' JobSets have no queue label, so
            # its webhooks never see them (they select on it) and its manager ignores them
            DEVCLUSTER_KUEUE="1",
            DEVCLUSTER_NODE_PODS=str(NODE_PODS),
            DEVCLUSTER_APISERVER_ARGS=" ".join(flags),
        )
        env.pop("KUBECONFIG", None)
        started = time.monotonic()
        progress(f"starting the bench devcluster in {state_dir}")
        owner = [] if keep else ["--owner-pid", str(os.getpid())]
        done = subprocess.run(
            [sys.executable, str(DEVCLUSTER), "up", *owner],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"devcluster up failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
        progress(f"bench devcluster up in {time.monotonic() - started:.1f}s")
        work.mkdir(parents=True, exist_ok=True)
        return cls(
            kubeconfig=state_dir / "kubeconfig",
            work=work,
            state_dir=state_dir,
            audit=AuditLog(state_dir / "logs" / "audit.log"),
        )

    @classmethod
    def existing(cls, kubeconfig: Path, work: Path) -> BenchCluster:
        """The cluster of a kubeconfig (no audit log)."""
        work.mkdir(parents=True, exist_ok=True)
        return cls(kubeconfig=kubeconfig, work=work)

    def close(self, *, keep: bool = False) -> None:
        """Remove everything the run created; stop the devcluster the suite started (unless
        ``keep``)."""
        if self.state_dir is not None and not keep:
            env = dict(os.environ, DEVCLUSTER_STATE_DIR=str(self.state_dir))
            subprocess.run(
                [sys.executable, str(DEVCLUSTER), "down", "--force"],
                env=env,
                capture_output=True,
                check=False,
            )
            progress("bench devcluster stopped")
            return
        if self.state_dir is not None:
            self.delete_namespaces(list(self._namespaces))
            progress(f"bench devcluster left running in {self.state_dir}")
            return
        self.delete_namespaces(list(self._namespaces), wait=True)
        rbac = self.rbac
        for kind, name in reversed(self._cluster_objects):
            with contextlib.suppress(Exception):
                if kind == "ClusterRole":
                    rbac.delete_cluster_role(name)
                elif kind == "ClusterQueue":
                    self.custom.delete_cluster_custom_object(
                        "kueue.x-k8s.io", "v1beta2", "clusterqueues", name
                    )
                else:
                    rbac.delete_cluster_role_binding(name)
        progress("removed the namespaces and cluster roles the run created")

    # ------------------------------------------------------------------ clients

    @property
    def api(self) -> Any:
        """The admin's ``kubernetes.client.ApiClient``."""
        if self._api is None:
            from kubernetes import client, config

            configuration = client.Configuration()
            config.load_kube_config(str(self.kubeconfig), client_configuration=configuration)
            configuration.connection_pool_maxsize = 32
            self._api = client.ApiClient(configuration)
        return self._api

    @property
    def core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api)

    @property
    def batch(self) -> Any:
        from kubernetes import client

        return client.BatchV1Api(self.api)

    @property
    def custom(self) -> Any:
        from kubernetes import client

        return client.CustomObjectsApi(self.api)

    @property
    def rbac(self) -> Any:
        from kubernetes import client

        return client.RbacAuthorizationV1Api(self.api)

    @property
    def server(self) -> str:
        """The API server's URL."""
        config = yaml.safe_load(self.kubeconfig.read_text(encoding="utf-8"))
        context = next(
            c["context"] for c in config["contexts"] if c["name"] == config["current-context"]
        )
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        return str(cluster["server"])

    @property
    def port(self) -> int:
        """The API server's port (to tell its connections apart)."""
        from urllib.parse import urlsplit

        return urlsplit(self.server).port or 443

    # ------------------------------------------------------------------ objects

    def namespaces(self, prefix: str, count: int) -> list[str]:
        """Create ``count`` namespaces ``<prefix>-<i>`` (labelled with the run's id)."""
        names = [f"{prefix}-{self.run}-{i}" for i in range(count)]

        def body(n: str) -> dict[str, Any]:
            return {"metadata": {"name": n, "labels": {BENCH_LABEL: self.run}}}

        self.parallel(lambda n: self.core.create_namespace(body(n)), names)
        self._namespaces.extend(names)

        def ready(name: str) -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                items = self.core.list_namespaced_service_account(name).items
                if any(sa.metadata.name == "default" for sa in items):
                    return
                time.sleep(0.2)
            raise TimeoutError(f"no default ServiceAccount in {name}")

        self.parallel(ready, names)
        return names

    def delete_namespaces(self, names: list[str], *, wait: bool = False) -> None:
        """Delete namespaces (``wait``: until they are gone, at most five minutes)."""
        from kubernetes.client.rest import ApiException

        def delete(name: str) -> None:
            try:
                self.core.delete_namespace(name)
            except ApiException as error:
                if error.status != 404:
                    raise

        self.parallel(delete, names)
        for name in names:
            if name in self._namespaces:
                self._namespaces.remove(name)
        if not wait:
            return
        deadline = time.monotonic() + 300
        while names and time.monotonic() < deadline:
            left = {n.metadata.name for n in self.core.list_namespace().items}
            names = [n for n in names if n in left]
            if names:
                time.sleep(1)
        if names:
            progress(f"WARNING: namespaces still terminating after 5 minutes: {names[:5]}")

    def parallel(
        self, call: Callable[[T], Any], items: Iterable[T], workers: int = 16
    ) -> list[Any]:
        """``call`` on every item, ``workers`` at a time."""
        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(call, items))

    # ------------------------------------------------------------------ identities

    def identity(
        self,
        name: str,
        *,
        cluster_wide: bool,
        namespaces: Iterable[str] = (),
        kueue_reader: bool = False,
    ) -> Identity:
        """A service account (in a namespace of its own) that may wait for runs everywhere
        (``cluster_wide``) or only in ``namespaces`` (``kueue_reader``: and read Kueue's
        Workloads there)."""
        self._ensure_role(ROLE, RULES)
        if kueue_reader:
            self._ensure_role(KUEUE_READER, KUEUE_RULES)
        home = self.namespaces(f"id-{name}", 1)[0]
        self.core.create_namespaced_service_account(home, {"metadata": {"name": name}})
        subject = [{"kind": "ServiceAccount", "name": name, "namespace": home}]
        identity = Identity(
            name=name,
            kubeconfig=self._kubeconfig(home, name),
            user=f"system:serviceaccount:{home}:{name}",
            kueue_reader=kueue_reader,
        )
        for role in identity.roles if cluster_wide else ():
            binding = f"{role}-{self.run}-{name}"
            self.rbac.create_cluster_role_binding(
                {
                    "metadata": {"name": binding, "labels": {BENCH_LABEL: self.run}},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": role,
                    },
                    "subjects": subject,
                }
            )
            self._cluster_objects.append(("ClusterRoleBinding", binding))
        self.grant(identity, namespaces)
        return identity

    def grant(self, identity: Identity, namespaces: Iterable[str]) -> None:
        """Let ``identity`` wait for runs in these namespaces (a RoleBinding each, per role)."""
        home, name = identity.user.split(":")[2:4]
        subject = [{"kind": "ServiceAccount", "name": name, "namespace": home}]

        def bind(item: tuple[str, str]) -> None:
            namespace, role = item
            suffix = "" if role == ROLE else "-kueue-reader"
            self.rbac.create_namespaced_role_binding(
                namespace,
                {
                    "metadata": {"name": f"bench-{name}{suffix}"},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": role,
                    },
                    "subjects": subject,
                },
            )

        self.parallel(bind, [(n, role) for n in namespaces for role in identity.roles])

    def cluster_queue(self, body: dict[str, Any]) -> None:
        """Create a Kueue ClusterQueue (removed by :meth:`close` on a cluster the suite did not
        start)."""
        self.custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", body)
        self._cluster_objects.append(("ClusterQueue", body["metadata"]["name"]))

    def _ensure_role(self, role: str, rules: list[dict[str, Any]]) -> None:
        if ("ClusterRole", role) in self._cluster_objects:
            return
        from kubernetes.client.rest import ApiException

        body = {"metadata": {"name": role, "labels": {BENCH_LABEL: self.run}}, "rules": rules}
        try:
            self.rbac.create_cluster_role(body)
        except ApiException as error:
            if error.status != 409:
                raise
            self.rbac.replace_cluster_role(role, body)
        self._cluster_objects.append(("ClusterRole", role))

    def _kubeconfig(self, namespace: str, name: str) -> Path:
        request = {"spec": {"expirationSeconds": 6 * 3600}}
        token = self.core.create_namespaced_service_account_token(name, namespace, request)
        admin = yaml.safe_load(self.kubeconfig.read_text(encoding="utf-8"))
        context = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])
        cluster = next(c for c in admin["clusters"] if c["name"] == context["context"]["cluster"])
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [cluster],
            "users": [{"name": name, "user": {"token": token.status.token}}],
            "contexts": [{"name": name, "context": {"cluster": cluster["name"], "user": name}}],
            "current-context": name,
        }
        path = self.work / f"kubeconfig-{name}"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        path.chmod(0o600)
        return path

    def admin_identity(self) -> Identity:
        """The admin, as an identity (for subjects whose requests are not counted)."""
        return Identity("admin", self.kubeconfig, user="")

    # ------------------------------------------------------------------ waiting

    @contextlib.contextmanager
    def timed(self, what: str) -> Iterator[None]:
        """A progress line with how long ``what`` took."""
        started = time.monotonic()
        yield
        progress(f"{what}: {time.monotonic() - started:.1f}s")


def wait_until(check: Callable[[], bool], timeout: float, what: str, interval: float = 0.5) -> None:
    """Poll ``check`` until it holds; ``TimeoutError`` naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
