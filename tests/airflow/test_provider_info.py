"""The provider metadata Airflow reads (``get_provider_info``) is complete and valid: it
passes Airflow's own schema, every module and class it names imports, the version is the
package's one, and Airflow's providers manager sees the extra link and the triggers. The
connection type is deliberately the cncf.kubernetes provider's ``kubernetes``: declaring it
again would compete with ``KubernetesHook`` for the connection form, so the test checks that
it stays the cncf provider's."""

from __future__ import annotations

import importlib
import json
from importlib.resources import files

import pytest

from airflow_provider_jobset import __version__, get_provider_info

pytestmark = [pytest.mark.airflow, pytest.mark.airflow_matrix]


def test_provider_info_passes_airflows_schema() -> None:
    import jsonschema

    schema = json.loads(files("airflow").joinpath("provider_info.schema.json").read_text())
    jsonschema.validate(get_provider_info(), schema)


def test_every_named_module_and_class_imports() -> None:
    info = get_provider_info()
    assert info["versions"] == [__version__]
    for section in ("operators", "sensors", "hooks", "triggers"):
        for entry in info[section]:
            for module in entry["python-modules"]:
                importlib.import_module(module)
    for path in info["extra-links"]:
        module, _, name = path.rpartition(".")
        assert isinstance(getattr(importlib.import_module(module), name), type)
    assert "connection-types" not in info


def test_the_providers_manager_sees_the_provider() -> None:
    from airflow.providers_manager import ProvidersManager

    manager = ProvidersManager()
    manager.initialize_providers_list()
    assert manager.providers["airflow-provider-jobset"].version == __version__
    assert "airflow_provider_jobset.links.JobSetLink" in manager.extra_links_class_names
    # The kubernetes connection type stays the cncf provider's; our hook reads it.
    from airflow_provider_jobset.hooks import JobSetHook

    try:  # the task runtime's view of hooks (Airflow 3.2+); the manager's own before
        from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

        hooks = ProvidersManagerTaskRuntime().hooks
    except ImportError:
        hooks = manager.hooks
    hook = hooks[JobSetHook.conn_type]
    assert hook is not None and hook.package_name == "apache-airflow-providers-cncf-kubernetes"
