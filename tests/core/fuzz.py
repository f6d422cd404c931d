"""Differential fuzzing of our verdict against the real API server: seeds, mutations, oracles.

A :class:`Mutant` is a seed (a valid JobSet: an upstream example or a builder's output) plus a
few :class:`Mutation` s, so every case prints as a short, replayable value and can be committed
as a hypothesis ``@example``. :func:`mutants` is the hypothesis strategy; :func:`our_verdict`
runs what a user runs (the file is written, loaded, validated and rendered) and
:func:`server_verdict` asks the devcluster: a server-side dry-run create of the JobSet
(``fieldValidation=Strict``), then dry-run creates of the Jobs and Service the controller would
make of what the server stored. :func:`disagreements` compares the two.

The server is reached with the official ``kubernetes`` client only (no project client).
"""

from __future__ import annotations

import copy
import json
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from jobset_core.errors import MAX_MESSAGE_CHARS, Problem, SpecError
from jobset_core.models import load_jobset, load_jobsets
from jobset_core.validation import validate
from jobset_core.validation.strictness import is_deliberate

Path_ = tuple[str | int, ...]

#: Our rules that report a whole file (no field path): reading, size, encoding, YAML, kind.
FILE_RULES = frozenset(
    {
        "read",
        "file-size",
        "not-utf8",
        "yaml",
        "yaml-depth",
        "yaml-aliases",
        "too-many-documents",
        "kind",
        "object-size",
        "type",
    }
)


# -- seeds -------------------------------------------------------------------------------------


def builder_seeds() -> dict[str, dict[str, Any]]:
    """Valid JobSets made by the builders."""
    from jobset_core import builders

    made = {
        "builder/leader-workers": builders.leader_workers(
            "lw", "busybox:1.36", workers=2, leader_command=["sh"], worker_command=["sh"]
        ),
        "builder/pytorch-ddp": builders.pytorch_ddp(
            "ddp", "pytorch:2", ["train.py"], nodes=2, procs_per_node=2, max_restarts=2
        ),
        "builder/jax-multislice": builders.jax_multislice(
            "jax",
            "jax:1",
            ["python", "train.py"],
            slices=2,
            hosts_per_slice=2,
            topology_key="devcluster/slice",
            chips_per_host=4,
        ),
    }
    return {key: js.to_dict() for key, js in made.items()}


@cache
def seeds() -> dict[str, dict[str, Any]]:
    """Every seed by id: upstream examples valid under the default gates, and builder output."""
    from tests.core.conftest import search_upstream_examples

    out: dict[str, dict[str, Any]] = {}
    for example in search_upstream_examples().examples:
        document = copy.deepcopy(example.document)
        document["metadata"].pop("namespace", None)
        try:
            valid = not validate(load_jobset(document))
        except SpecError:
            valid = False
        if valid:
            out[f"upstream/{example.id}"] = document
    out.update(builder_seeds())
    return out


# -- mutations ---------------------------------------------------------------------------------

_MISSING = object()


@dataclass(frozen=True)
class Mutation:
    """One change at ``path``: ``set`` (replace or add ``value``), ``delete``, ``append``
    (add ``value`` to a list) or ``nest`` (``value`` levels of ``{"a": ...}`` or lists)."""

    op: str
    path: Path_
    value: Any = None

    def apply(self, document: Any) -> Any:
        if not self.path:
            return copy.deepcopy(self.value) if self.op == "set" else document
        holder = _get(document, self.path[:-1])
        key = self.path[-1]
        if holder is _MISSING:
            return document
        if self.op == "set":
            _put(holder, key, copy.deepcopy(self.value))
        elif self.op == "delete":
            if isinstance(holder, dict):
                holder.pop(key, None)
            elif isinstance(holder, list) and isinstance(key, int) and key < len(holder):
                del holder[key]
        elif self.op == "append":
            target = _get(holder, (key,))
            if isinstance(target, list):
                target.append(copy.deepcopy(self.value))
        elif self.op == "nest":
            depth, kind = self.value
            _put(holder, key, _nested(depth, kind))
        return document


def _nested(depth: int, kind: str) -> Any:
    node: Any = "x"
    for _ in range(depth):
        node = {"a": node} if kind == "map" else [node]
    return node


def _has(holder: Any, key: str | int) -> bool:
    if isinstance(holder, dict):
        return isinstance(key, str)
    return isinstance(holder, list) and isinstance(key, int) and key < len(holder)


def _get(node: Any, path: Path_) -> Any:
    for part in path:
        if not _has(node, part) or (isinstance(node, dict) and part not in node):
            return _MISSING
        node = node[part]
    return node


def _put(holder: Any, key: str | int, value: Any) -> None:
    if _has(holder, key):
        holder[key] = value


@dataclass(frozen=True)
class Mutant:
    """A seed and the mutations applied to it, in order."""

    seed: str
    mutations: tuple[Mutation, ...] = ()

    def document(self) -> Any:
        document: Any = copy.deepcopy(seeds()[self.seed])
        for mutation in self.mutations:
            document = mutation.apply(document)
        return document


def paths(document: Any, max_depth: int = 30) -> Iterator[tuple[Path_, Any]]:
    """The nodes of a document with their paths, depth first, none deeper than ``max_depth``
    (what a nesting mutation added is not mutated again)."""
    stack: list[tuple[Path_, Any]] = [((), document)]
    while stack:
        path, node = stack.pop()
        yield path, node
        if len(path) >= max_depth:
            continue
        if isinstance(node, dict):
            stack.extend(((*path, k), v) for k, v in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend(((*path, i), v) for i, v in reversed(list(enumerate(node))))


INT_EDGES = (0, 1, -1, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**53, 2**63 - 1, 2**63, 10**30)
ALPHABETS = (
    string.ascii_lowercase + string.digits + "-",
    string.ascii_letters + string.digits + "-_.",
    string.printable,
    "".join(chr(c) for c in range(0, 0x80)),
    "aé中😀\u200b\x7f=/.",
)


def texts(max_size: int = 20) -> st.SearchStrategy[str]:
    return st.one_of(
        [st.text(alphabet=alphabet, max_size=max_size) for alphabet in ALPHABETS]
        + [st.text(max_size=max_size)]
    )


#: Environment variable names: valid (relaxed rules), and each way of being invalid.
ENV_NAMES = st.one_of(
    st.sampled_from(["MY_VAR", "my.var-1", "1ABC", "a b%", "A=B", "=", "é", "tab\t", "x\x7f", ""]),
    st.text(alphabet=string.printable + "=é\x00\x7f\u200b", min_size=1, max_size=12),
)

QUANTITIES = st.one_of(
    st.from_regex(
        r"\A[+-]?([0-9]{1,4}(\.[0-9]{0,3})?|\.[0-9]{1,3})([KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9])?\Z"
    ),
    st.sampled_from(["", "-1Gi", "0", "1 Gi", "1Gb", "1e400", "+1", "1.5.5", "Ki", "-0"]),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
)

FIELD_PATHS = st.one_of(
    st.sampled_from(
        [
            "metadata.name",
            "metadata.namespace",
            "metadata.uid",
            "spec.nodeName",
            "spec.serviceAccountName",
            "status.podIP",
            "status.podIPs",
            "status.hostIP",
            "status.hostIPs",
            "metadata.labels['app']",
            "metadata.annotations['batch.kubernetes.io/job-completion-index']",
            "metadata.labels",
            "metadata.annotations['Bad Key']",
            "spec.foo",
            "status.phase",
            "",
            "metadata.name['x']",
        ]
    ),
    texts(),
)


def scalars() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.sampled_from(INT_EDGES),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        texts(),
        st.sampled_from(["", "a" * 64, "a" * 254, "é" * 40, "x" * 10_000]),
    )


def values() -> st.SearchStrategy[Any]:
    return st.one_of(
        scalars(),
        st.lists(scalars(), max_size=3),
        st.dictionaries(texts(8), scalars(), max_size=3),
    )


def _containers(document: Any) -> list[Path_]:
    out = []
    for path, node in paths(document):
        if path[-1:] in (("containers",), ("initContainers",)) and isinstance(node, list):
            out += [(*path, i) for i in range(len(node)) if isinstance(node[i], dict)]
    return out


def _metadata(document: Any) -> list[Path_]:
    return [p for p, node in paths(document) if p[-1:] == ("metadata",) and isinstance(node, dict)]


def _pod_specs(document: Any) -> list[Path_]:
    return [
        p
        for p in (path for path, _ in paths(document))
        if p[-4:-1] == ("template", "spec", "template") and p[-1] == "spec"
    ]


@st.composite
def targeted(draw: st.DrawFn, document: Any) -> Mutation:
    """The kinds of input the issue lists, placed where they matter."""
    containers = _containers(document)
    metadata = _metadata(document)
    pods = _pod_specs(document)
    choices: list[Callable[[], Mutation]] = []
    if containers:

        def env() -> Mutation:
            where = draw(st.sampled_from(containers))
            var: dict[str, Any] = {"name": draw(ENV_NAMES)}
            source = draw(st.sampled_from(["value", "fieldRef", "resource", "key", "none"]))
            if source == "value":
                var["value"] = draw(texts())
            elif source == "fieldRef":
                ref = {"fieldPath": draw(FIELD_PATHS)}
                if draw(st.booleans()):
                    ref["apiVersion"] = draw(st.sampled_from(["v1", "v2", ""]))
                var["valueFrom"] = {"fieldRef": ref}
            elif source == "resource":
                resource = draw(st.sampled_from(["limits.cpu", "requests.memory", "cpu", ""]))
                ref = {"resource": resource, "divisor": draw(QUANTITIES)}
                var["valueFrom"] = {"resourceFieldRef": ref}
            elif source == "key":
                kind = draw(st.sampled_from(["configMapKeyRef", "secretKeyRef"]))
                ref = {"name": draw(texts()), "key": draw(texts())}
                var["valueFrom"] = {kind: ref}
                if draw(st.booleans()):
                    var["value"] = draw(texts())
            else:
                var["valueFrom"] = {}
            return Mutation("set", (*where, "env"), [var])

        def ports() -> Mutation:
            where = draw(st.sampled_from(containers))
            item = draw(st.one_of(st.none(), st.fixed_dictionaries({"containerPort": scalars()})))
            return Mutation("set", (*where, "ports"), [item])

        def resources() -> Mutation:
            where = draw(st.sampled_from(containers))
            bound = draw(st.sampled_from(["limits", "requests"]))
            name = draw(st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "ephemeral-storage"]))
            return Mutation("set", (*where, "resources"), {bound: {name: draw(QUANTITIES)}})

        # The kinds issue 12 lists come up more often than the others.
        choices += [env, env, env, ports, ports, resources, resources]
    if pods:

        def empty_dir() -> Mutation:
            where = draw(st.sampled_from(pods))
            volume = {"name": "scratch", "emptyDir": {"sizeLimit": draw(QUANTITIES)}}
            return Mutation("set", (*where, "volumes"), [volume])

        def nest() -> Mutation:
            where = draw(st.sampled_from(pods))
            key = draw(st.sampled_from(["nodeSelector", "affinity", "tolerations", "unknownX"]))
            depth = draw(st.sampled_from([3, 20, 45, 60, 63, 64, 65, 120, 300]))
            return Mutation("nest", (*where, key), (depth, draw(st.sampled_from(["map", "list"]))))

        choices += [empty_dir, empty_dir, nest]
    if metadata:

        def labels() -> Mutation:
            where = draw(st.sampled_from(metadata))
            kind = draw(st.sampled_from(["labels", "annotations"]))
            return Mutation(
                "set", (*where, kind), draw(st.dictionaries(texts(), texts(70), max_size=2))
            )

        def big_annotations() -> Mutation:
            where = draw(st.sampled_from(metadata))
            size = draw(st.sampled_from([262_144 - 1, 262_144, 262_145, 300_000]))
            return Mutation("set", (*where, "annotations"), {"a": "x" * (size - 1)})

        choices += [labels, big_annotations]

    def namespace() -> Mutation:
        return Mutation("set", ("metadata", "namespace"), draw(texts()))

    def int_edges() -> Mutation:
        ints = [p for p, node in paths(document) if type(node) is int]
        if not ints:
            return namespace()
        return Mutation("set", draw(st.sampled_from(ints)), draw(st.sampled_from(INT_EDGES)))

    def null_item() -> Mutation:
        lists = [p for p, node in paths(document) if isinstance(node, list)]
        if not lists:
            return namespace()
        return Mutation("append", draw(st.sampled_from(lists)), None)

    def name() -> Mutation:
        names = [p for p, node in paths(document) if p[-1:] == ("name",) and type(node) is str]
        if not names:
            return namespace()
        length = draw(st.sampled_from([1, 5, 20, 40, 50, 58, 62, 63, 64]))
        value = draw(
            st.one_of(
                st.text(alphabet=string.ascii_lowercase + "-", min_size=length, max_size=length),
                st.sampled_from(["a" * length, "A-b", "a.b", "1a", "a-", "a_b"]),
            )
        )
        return Mutation("set", draw(st.sampled_from(names)), value)

    def copy_item() -> Mutation:
        lists = [p for p, node in paths(document) if isinstance(node, list) and node]
        if not lists:
            return namespace()
        where = draw(st.sampled_from(lists))
        item = copy.deepcopy(_get(document, where)[0])
        if isinstance(item, dict) and isinstance(item.get("name"), str) and draw(st.booleans()):
            item["name"] += draw(st.sampled_from(["-b", "x", ""]))
        return Mutation("append", where, item)

    choices += [namespace, int_edges, int_edges, null_item, null_item, name, name, copy_item]
    return draw(st.sampled_from(choices))()


@st.composite
def generic(draw: st.DrawFn, document: Any) -> Mutation:
    """Any node replaced, deleted, duplicated, or given an unknown key."""
    everything = list(paths(document))[1:]
    where, node = draw(st.sampled_from(everything))
    options = ["replace", "delete"]
    if isinstance(node, dict):
        options.append("add-key")
    if isinstance(node, list):
        options.append("duplicate")
    op = draw(st.sampled_from(options))
    if op == "replace":
        return Mutation("set", where, draw(values()))
    if op == "delete":
        return Mutation("delete", where)
    if op == "add-key":
        key = draw(st.one_of(texts(12), st.sampled_from(["fooBar", "Name", "name2"])))
        return Mutation("set", (*where, key), draw(values()))
    item = node[0] if node else None
    return Mutation("append", where, item)


@st.composite
def mutants(draw: st.DrawFn) -> Mutant:
    """A seed with one to three mutations, targeted or generic."""
    seed = draw(st.sampled_from(sorted(seeds())))
    document: Any = copy.deepcopy(seeds()[seed])
    mutations = []
    # Mostly one mutation, mostly a targeted one: a second mutation often makes the JobSet
    # invalid at the first step, which hides what the first one would show at the second.
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 3]))):
        if not isinstance(document, dict):
            break
        kind = draw(st.sampled_from(["targeted", "targeted", "targeted", "generic"]))
        strategy = targeted(document) if kind == "targeted" else generic(document)
        mutation = draw(strategy)
        document = mutation.apply(document)
        mutations.append(mutation)
    return Mutant(seed, tuple(mutations))


# -- verdicts ----------------------------------------------------------------------------------


@dataclass
class Verdict:
    """Who accepted what: ``problems`` (ours) or ``rejection`` (the server's), and for an
    accepted JobSet the objects that would be created."""

    accepted: bool
    problems: list[Problem] = field(default_factory=list)
    rejection: str = ""
    step: str = ""


def write_document(document: Any, directory: Path) -> Path:
    """The document as a user would have it: a YAML file (JSON when too deep for PyYAML's
    recursive emitter; JSON is YAML too)."""
    path = directory / "jobset.yaml"
    try:
        text = yaml.safe_dump(document, sort_keys=False)
    except RecursionError:
        text = json.dumps(document)
    path.write_text(text, encoding="utf-8")
    return path


def our_verdict(document: Any, directory: Path, namespace: str) -> Verdict:
    """Load the file, validate it for ``namespace``; every problem must name the file."""
    path = write_document(document, directory)
    try:
        jobsets = load_jobsets(path)
    except SpecError as err:
        assert err.source == str(path), f"a load error without the file name: {err}"
        return Verdict(False, list(err.problems))
    if len(jobsets) != 1:
        return Verdict(False, [Problem("", f"{len(jobsets)} documents", "one-document")])
    problems = validate(jobsets[0], namespace=namespace)
    return Verdict(not problems, problems)


def unclear(verdict: Verdict) -> list[str]:
    """Problems that do not name a field path (outside the file-level rules) or ramble."""
    out = []
    for problem in verdict.problems:
        if not problem.path and problem.rule not in FILE_RULES:
            out.append(f"no field path: {problem!r}")
        if not problem.message or len(problem.message) > MAX_MESSAGE_CHARS:
            out.append(f"message empty or longer than {MAX_MESSAGE_CHARS}: {str(problem)[:200]!r}")
    return out


def _status(err: Any) -> str:
    try:
        body = json.loads(err.body)
    except (TypeError, ValueError):
        return f"{err.status} {err.body!r}"[:2000]
    return f"{err.status} {body.get('reason')}: {body.get('message')}"[:2000]


def server_verdict(api: Any, document: Any, namespace: str) -> Verdict:
    """The devcluster's verdict: dry-run create the JobSet, then its Service and Jobs.

    ``api`` is a ``kubernetes.client.ApiClient``. A 4xx or 5xx answer is a rejection; a
    transport error propagates (that is no verdict).
    """
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from jobset_core.models import load_jobset
    from jobset_core.render import render

    body = copy.deepcopy(document)
    custom, batch, core = (
        client.CustomObjectsApi(api),
        client.BatchV1Api(api),
        client.CoreV1Api(api),
    )
    try:
        response = custom.create_namespaced_custom_object(
            "jobset.x-k8s.io",
            "v1alpha2",
            namespace,
            "jobsets",
            body,
            dry_run="All",
            field_validation="Strict",
            _preload_content=False,
        )
    except ApiException as err:
        return Verdict(False, rejection=_status(err), step="jobset")
    except (ValueError, TypeError) as err:  # not JSON-encodable (NaN, ...): kubectl fails too
        return Verdict(False, rejection=f"cannot be sent as JSON: {err}", step="jobset")
    created = json.loads(response.data)
    # The Jobs of one replicated job differ only in their index (the webhook checks the
    # longest names): two of each are enough, and a million replicas stay cheap. A replicated
    # job with 0 (or fewer) replicas is checked as one Job: deliberate, see STRICTNESS.
    stored = copy.deepcopy(created)
    for rjob in (stored.get("spec") or {}).get("replicatedJobs") or []:
        replicas = rjob.get("replicas")
        rjob["replicas"] = min(max(replicas, 1), 2) if isinstance(replicas, int) else 1
    try:
        model = load_jobset(stored, allow_unknown_fields=True)
    except SpecError as err:
        raise AssertionError(f"the server stored a JobSet we cannot load: {err}") from err
    rendered = render(model, namespace, uid=created["metadata"]["uid"], max_jobs=None)
    for obj in rendered.objects():
        create = core.create_namespaced_service if obj["kind"] == "Service" else None
        create = create or batch.create_namespaced_job
        try:
            create(namespace, obj, dry_run="All", field_validation="Strict", _preload_content=False)
        except ApiException as err:
            return Verdict(
                False, rejection=_status(err), step=f"{obj['kind']} {obj['metadata']['name']}"
            )
    return Verdict(True)


def disagreements(ours: Verdict, theirs: Verdict) -> list[str]:
    """What is wrong with our verdict, given the server's (empty: we agree)."""
    out = unclear(ours)
    if ours.accepted and not theirs.accepted:
        out.append(f"we accept what the server rejects at {theirs.step}: {theirs.rejection}")
    if not ours.accepted and theirs.accepted:
        loose = [p for p in ours.problems if not is_deliberate(p)]
        out += [f"we reject what the server accepts: {p} [{p.rule}]" for p in loose]
    return out
