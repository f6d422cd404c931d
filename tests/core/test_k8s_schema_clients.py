"""The schema tables read the same from both generations of the official client's models.

Up to client 36 the generated models are plain classes (a setter refuses ``None`` for a
required field); from 37 they are pydantic models (``model_fields`` says what is required) and
spell their types the ``typing`` way. Every environment of ``make test`` runs this file with its
own client (30 on the kfp side and in core-oldest, 36 on the Airflow side, 37 in core-newest),
so each generation is read here by one of them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jobset_core.models import load_jobset
from jobset_core.validation import validate
from jobset_core.validation._k8s_schema import _type_name, client_version, read_client_tables

#: (class, JSON name) -> (attribute, type, required), the same in every client from 30 to 37.
KNOWN = {
    ("V1JobSpec", "template"): ("template", "V1PodTemplateSpec", True),
    ("V1JobSpec", "backoffLimit"): ("backoff_limit", "int", False),
    ("V1PodSpec", "containers"): ("containers", "list[V1Container]", True),
    ("V1PodSpec", "nodeSelector"): ("node_selector", "dict[str, str]", False),
    ("V1Container", "name"): ("name", "str", True),
    ("V1Container", "env"): ("env", "list[V1EnvVar]", False),
    ("V1Container", "imagePullPolicy"): ("image_pull_policy", "str", False),
    ("V1EnvVar", "name"): ("name", "str", True),
    ("V1ResourceRequirements", "limits"): ("limits", "dict[str, str]", False),
    ("V1Toleration", "tolerationSeconds"): ("toleration_seconds", "int", False),
    ("V1ObjectMeta", "labels"): ("labels", "dict[str, str]", False),
    ("V1PodSecurityContext", "supplementalGroups"): ("supplemental_groups", "list[int]", False),
}


def _spelled(type_: str) -> str:
    # Clients up to 35 spell a dict "dict(str, str)", 36 "dict[str, str]": both are read.
    return re.sub(r"dict\((.*)\)$", r"dict[\1]", type_)


@pytest.mark.parametrize(
    ("where", "expected"), KNOWN.items(), ids=[".".join(where) for where in KNOWN]
)
def test_the_installed_client_is_read_as_every_other(
    where: tuple[str, str], expected: tuple[str, str, bool]
) -> None:
    class_name, key = where
    field = read_client_tables()[class_name][key]
    assert (field.attr, _spelled(field.type), field.required) == expected, client_version()


def test_the_installed_client_generation_is_the_one_its_major_says() -> None:
    import kubernetes.client

    pydantic_models = hasattr(kubernetes.client.V1Container, "model_fields")
    assert pydantic_models == (int(client_version().split(".")[0]) >= 37)


@pytest.mark.parametrize(
    ("given", "read"),
    [
        ("List[str]", "list[str]"),
        ("Dict[str, str]", "dict[str, str]"),
        ("Dict[str, List[str]]", "dict[str, list[str]]"),
        ("List[CoreV1ResourceClaim]", "list[CoreV1ResourceClaim]"),
        ("bytes", "str"),
        ("Dict[str, bytes]", "dict[str, str]"),
        ("list[V1EnvVar]", "list[V1EnvVar]"),
        ("dict(str, str)", "dict(str, str)"),
        ("object", "object"),
    ],
)
def test_type_names_of_both_generations(given: str, read: str) -> None:
    assert _type_name(given) == read


def test_a_missing_required_field_and_a_bad_type_are_found_with_any_client(tmp_path: Path) -> None:
    path = tmp_path / "js.yaml"
    path.write_text(
        """
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: js}
spec:
  replicatedJobs:
  - name: w
    template:
      spec:
        template:
          spec:
            restartPolicy: Never
            containers:
            - image: busybox
              env: [{name: A, value: 1}]
"""
    )
    problems = {(p.path, p.rule) for p in validate(load_jobset(path))}
    base = "spec.replicatedJobs[0].template.spec.template.spec.containers[0]"
    assert (f"{base}.name", "required") in problems
    assert (f"{base}.env[0].value", "type") in problems


def test_the_client_version_is_what_the_installed_distribution_says() -> None:
    # Read from the dist-info folder's name (no importlib.metadata at a CLI start): the
    # same as the metadata's answer, in both environments (clients 30 and 37).
    from importlib.metadata import version

    assert client_version() == version("kubernetes")
