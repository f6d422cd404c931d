"""Names the upstream JobSet controller (v0.12.0) derives, and the DNS rules they must obey.

Every function here is pure and mirrors one upstream helper, so the names our renderer,
validation and builders produce are byte-for-byte the controller's:

* :func:`job_name`: ``placement.GenJobName`` (``<jobset>-<replicatedJob>-<jobIndex>``).
* :func:`pod_hostname`: ``placement.GenPodName``; the stable hostname of an Indexed Job's pod
  is ``<jobName>-<completionIndex>`` (set by the Job controller).
* :func:`subdomain`: ``GetSubdomain`` (``spec.network.subdomain``, else the JobSet name).
* :func:`coordinator_endpoint`: ``CoordinatorEndpoint``
  (``<jobset>-<rj>-<jobIndex>-<podIndex>.<subdomain>``).
* :func:`pvc_name`: ``GeneratePVCName`` (``<template>-<jobset>``).
* :func:`job_key`: ``jobHashKey``, the **SHA-1** hex digest of ``<namespace>/<jobName>``
  (the upstream comment says SHA-256; the code uses SHA-1).
* :func:`namespaced_job_name`: ``namespacedJobName`` (``<namespace>_<jobName>``, the value
  of the node-selector strategy's node label).

The DNS and label-value checks return the API machinery's own messages
(``k8s.io/apimachinery/pkg/util/validation``), an empty list meaning "valid", so callers can
report them exactly as the API server or the upstream webhook would.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

from jobset_core.models import JobSet

__all__ = [
    "DNS1035_LABEL_MAX_LENGTH",
    "DNS1123_LABEL_MAX_LENGTH",
    "DNS1123_SUBDOMAIN_MAX_LENGTH",
    "LABEL_VALUE_MAX_LENGTH",
    "coordinator_endpoint",
    "dns1035_label_errors",
    "dns1123_label_errors",
    "dns1123_subdomain_errors",
    "ensure_jobset_name",
    "ensure_namespace",
    "job_key",
    "job_name",
    "label_value_errors",
    "namespaced_job_name",
    "pod_hostname",
    "pvc_name",
    "subdomain",
]

DNS1035_LABEL_MAX_LENGTH = 63
DNS1123_LABEL_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253
LABEL_VALUE_MAX_LENGTH = 63


def job_name(jobset_name: str, replicated_job: str, job_index: int) -> str:
    """The name of a child Job: ``<jobset>-<replicatedJob>-<jobIndex>``."""
    return f"{jobset_name}-{replicated_job}-{job_index}"


def pod_hostname(job: str, completion_index: int) -> str:
    """The hostname of an Indexed Job's pod: ``<jobName>-<completionIndex>``.

    With DNS hostnames enabled the pod is reachable as ``<hostname>.<subdomain>``.
    """
    return f"{job}-{completion_index}"


def subdomain(jobset: JobSet) -> str:
    """The pods' subdomain and the headless Service's name.

    ``spec.network.subdomain`` when set, otherwise the JobSet name (upstream defaults it in the
    controller, not the webhook, because a ``generateName`` JobSet has no name at admission).
    """
    network = jobset.spec.network
    if network is not None and network.subdomain:
        return network.subdomain
    return jobset.name


def coordinator_endpoint(jobset: JobSet) -> str | None:
    """The coordinator pod's stable DNS name, or ``None`` without ``spec.coordinator``.

    ``<jobset>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>``; unset indexes are 0.
    """
    coordinator = jobset.spec.coordinator
    if coordinator is None:
        return None
    host = pod_hostname(
        job_name(jobset.name, coordinator.replicated_job, coordinator.job_index or 0),
        coordinator.pod_index or 0,
    )
    return f"{host}.{subdomain(jobset)}"


def pvc_name(template_name: str, jobset_name: str) -> str:
    """The PersistentVolumeClaim created for a volume-claim-policy template: ``<tpl>-<jobset>``."""
    return f"{template_name}-{jobset_name}"


def job_key(namespace: str, job: str) -> str:
    """The ``jobset.sigs.k8s.io/job-key`` value: SHA-1 hex of ``<namespace>/<jobName>``."""
    return hashlib.sha1(f"{namespace}/{job}".encode(), usedforsecurity=False).hexdigest()


def namespaced_job_name(namespace: str, job: str) -> str:
    """``<namespace>_<jobName>``: a label value naming a Job across namespaces (no ``/``)."""
    return f"{namespace}_{job}"


_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_LABEL_VALUE_FMT = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"

_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character"
)
_DNS1035_LABEL_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
    "start with an alphabetic character, and end with an alphanumeric character"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, "
    "'-', '_' or '.', and must start and end with an alphanumeric character"
)


def _regex_error(message: str, fmt: str, *examples: str) -> str:
    # apimachinery's RegexError, including its double space after the first example.
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def _too_long(value: str, limit: int, unit: str = "characters") -> list[str]:
    # Go's len() counts bytes.
    return [f"must be no more than {limit} {unit}"] if len(value.encode()) > limit else []


def dns1123_label_errors(value: str) -> list[str]:
    """Problems of ``value`` as an RFC 1123 label (``IsDNS1123Label``); empty when valid."""
    errors = _too_long(value, DNS1123_LABEL_MAX_LENGTH)
    if not re.fullmatch(_DNS1123_LABEL_FMT, value):
        if re.fullmatch(_DNS1123_SUBDOMAIN_FMT, value):
            errors.append("must not contain dots")
        else:
            errors.append(
                _regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc")
            )
    return errors


def dns1123_subdomain_errors(value: str) -> list[str]:
    """Problems of ``value`` as an RFC 1123 subdomain (``IsDNS1123Subdomain``)."""
    errors = _too_long(value, DNS1123_SUBDOMAIN_MAX_LENGTH)
    if not re.fullmatch(_DNS1123_SUBDOMAIN_FMT, value):
        errors.append(_regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errors


def dns1035_label_errors(value: str) -> list[str]:
    """Problems of ``value`` as an RFC 1035 label (``IsDNS1035Label``)."""
    errors = _too_long(value, DNS1035_LABEL_MAX_LENGTH)
    if not re.fullmatch(_DNS1035_LABEL_FMT, value):
        errors.append(_regex_error(_DNS1035_LABEL_MSG, _DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errors


def label_value_errors(value: str) -> list[str]:
    """Problems of ``value`` as a label value (``IsValidLabelValue``; the empty string is valid)."""
    errors = _too_long(value, LABEL_VALUE_MAX_LENGTH, unit="bytes")
    if not re.fullmatch(_LABEL_VALUE_FMT, value):
        errors.append(
            _regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345")
        )
    return errors


def ensure_namespace(value: object, argument: str = "namespace") -> str:
    """``value`` when it is a valid namespace name (an RFC 1123 label, as the API server
    requires); for arguments given on the command line or to an operator.

    Raises:
        TypeError: ``value`` is not a string.
        ValueError: it is not a valid namespace name (the message names ``argument``).
    """
    return _ensure(value, argument, "namespace name", dns1123_label_errors)


def ensure_jobset_name(value: object, argument: str = "name") -> str:
    """``value`` when it is a valid JobSet name (an RFC 1035 label: the upstream webhook derives
    Job and pod names and labels from it).

    Raises:
        TypeError: ``value`` is not a string.
        ValueError: it is not a valid JobSet name (the message names ``argument``).
    """
    return _ensure(value, argument, "JobSet name", dns1035_label_errors)


def _ensure(value: object, argument: str, what: str, check: Callable[[str], list[str]]) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{argument} must be a string, not {type(value).__name__}")
    if not value:
        raise ValueError(f"{argument} must not be empty")
    errors = check(value)
    if errors:
        shown = value if len(value) <= 80 else value[:77] + "..."
        raise ValueError(f"{argument} {shown!r} is not a valid {what}: {'; '.join(errors)}")
    return value
