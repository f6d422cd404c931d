"""Kubernetes name and label syntax, with the API server's own error messages.

Mirrors ``k8s.io/apimachinery/pkg/util/validation`` and ``pkg/api/validate/content``
(v0.36): each function returns the list of messages the server would report, empty when
the value is valid.
"""

from __future__ import annotations

import re

__all__ = [
    "dns1035_label",
    "dns1123_label",
    "dns1123_subdomain",
    "domain_prefixed_path",
    "label_value",
    "max_len",
    "port_name",
    "qualified_name",
]

_DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = _DNS1123_LABEL + "(\\." + _DNS1123_LABEL + ")*"
_DNS1035_LABEL = "[a-z]([-a-z0-9]*[a-z0-9])?"
_LABEL_KEY = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE = "(" + _LABEL_KEY + ")?"
_HTTP_PATH = r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+"

_LABEL_KEY_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)


def max_len(length: int) -> str:
    """``MaxLenError``."""
    return f"must be no more than {length} characters"


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{example}'," for example in examples)
    return f"{msg} (e.g. {shown} regex used for validation is '{fmt}')"


def dns1123_label(value: str) -> list[str]:
    """``IsDNS1123Label``: at most 63 characters of ``[a-z0-9-]``, alphanumeric at both ends."""
    errs = [max_len(63)] if len(value) > 63 else []
    if not re.fullmatch(_DNS1123_LABEL, value):
        if re.fullmatch(_DNS1123_SUBDOMAIN, value):
            errs.append("must not contain dots")
        else:
            errs.append(
                _regex_error(
                    "a lowercase RFC 1123 label must consist of lower case alphanumeric "
                    "characters or '-', and must start and end with an alphanumeric character",
                    _DNS1123_LABEL,
                    "my-name",
                    "123-abc",
                )
            )
    return errs


def dns1123_subdomain(value: str) -> list[str]:
    """``IsDNS1123Subdomain``: at most 253 characters, dot-separated RFC 1123 labels."""
    errs = [max_len(253)] if len(value) > 253 else []
    if not re.fullmatch(_DNS1123_SUBDOMAIN, value):
        errs.append(
            _regex_error(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character",
                _DNS1123_SUBDOMAIN,
                "example.com",
            )
        )
    return errs


def dns1035_label(value: str) -> list[str]:
    """``IsDNS1035Label``: like an RFC 1123 label, but must start with a letter."""
    errs = [max_len(63)] if len(value) > 63 else []
    if not re.fullmatch(_DNS1035_LABEL, value):
        errs.append(
            _regex_error(
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                "start with an alphabetic character, and end with an alphanumeric character",
                _DNS1035_LABEL,
                "my-name",
                "abc-123",
            )
        )
    return errs


def label_value(value: str) -> list[str]:
    """``IsValidLabelValue``: empty, or at most 63 alphanumerics, ``-``, ``_``, ``.``."""
    errs = [max_len(63)] if len(value) > 63 else []
    if not re.fullmatch(_LABEL_VALUE, value):
        errs.append(
            _regex_error(
                "a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character",
                _LABEL_VALUE,
                "MyValue",
                "my_value",
                "12345",
            )
        )
    return errs


def qualified_name(value: str) -> list[str]:
    """``IsQualifiedName``: a label or annotation key, ``[prefix/]name``."""
    parts = value.split("/")
    errs: list[str] = []
    if len(parts) > 2:
        return [
            "a valid label key "
            + _regex_error(_LABEL_KEY_MSG, _LABEL_KEY, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend(f"prefix part {msg}" for msg in dns1123_subdomain(prefix))
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + max_len(63))
    if not re.fullmatch(_LABEL_KEY, name):
        errs.append(
            "name part " + _regex_error(_LABEL_KEY_MSG, _LABEL_KEY, "MyName", "my.name", "123-abc")
        )
    return errs


def domain_prefixed_path(value: str) -> list[str]:
    """``IsDomainPrefixedPath``: ``<DNS-1123 subdomain>/<HTTP path>``, e.g. ``acme.io/foo``."""
    if not value:
        return ["Required value"]
    host, sep, path = value.partition("/")
    if not sep or not host or not path:
        return ['must be a domain-prefixed path (such as "acme.io/foo")']
    errs = dns1123_subdomain(host)
    if not re.fullmatch(_HTTP_PATH, path):
        errs.append(_regex_error("Invalid path", _HTTP_PATH))
    return errs


def port_name(value: str) -> list[str]:
    """``IsValidPortName``: an IANA service name."""
    errs = [max_len(15)] if len(value) > 15 else []
    if not re.fullmatch("[-a-z0-9]+", value):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search("[a-z]", value):
        errs.append("must contain at least one letter (a-z)")
    if "--" in value:
        errs.append("must not contain consecutive hyphens")
    if value.startswith("-") or value.endswith("-"):
        errs.append("must not begin or end with a hyphen")
    return errs
