"""``JobSetLink``: an extra link to the JobSet, built from a URL template.

The template comes from the operator's ``link_template`` or the ``[jobset] link_template``
option, with ``{namespace}``, ``{name}`` and ``{uid}`` filled from the XComs the operator
pushes as soon as the JobSet exists, e.g.
``https://console.example.com/k8s/ns/{namespace}/jobsets/{name}``.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_jobset._compat import BaseOperatorLink, conf

__all__ = [
    "XCOM_CONNECTION",
    "XCOM_NAME",
    "XCOM_NAMESPACE",
    "XCOM_UID",
    "JobSetLink",
    "format_link",
]

XCOM_NAME = "jobset_name"
XCOM_NAMESPACE = "jobset_namespace"
XCOM_UID = "jobset_uid"
#: How the try reached its cluster (connection id, context, in-cluster): the UI view reads
#: the run through the same connection.
XCOM_CONNECTION = "jobset_connection"


def format_link(template: str, *, name: str | None, namespace: str | None, uid: str | None) -> str:
    """The link, or ``""`` when there is no template or no JobSet yet."""
    if not template or not name:
        return ""
    return template.format(name=name, namespace=namespace or "", uid=uid or "")


class JobSetLink(BaseOperatorLink):
    """Link to the JobSet of a task instance."""

    name = "JobSet"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        """Fill the template from the task instance's XComs."""
        from airflow.sdk.execution_time.xcom import XCom

        template = getattr(operator, "link_template", None) or conf.get(
            "jobset", "link_template", fallback=""
        )
        if not template:
            return ""
        return format_link(
            template,
            name=XCom.get_value(ti_key=ti_key, key=XCOM_NAME),
            namespace=XCom.get_value(ti_key=ti_key, key=XCOM_NAMESPACE),
            uid=XCom.get_value(ti_key=ti_key, key=XCOM_UID),
        )
