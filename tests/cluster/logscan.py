#!/usr/bin/env python3
"""No credentials in logs: find the devcluster's secrets in log files.

The secrets are everything a test run authenticates with: every token the token webhook
issued (``.devcluster/authn/issued.log``; also its signature alone, in case a log cuts the
token), the webhook's HMAC key, the private keys in ``.devcluster/pki/`` (their PEM body and
the base64 of the whole PEM, as a kubeconfig's ``client-key-data`` holds it), the admin
kubeconfig's client key, and any service-account token (by its JWT header: the tests that
request one, such as the KFP RBAC test, never record it). A log file is any ``*.log``,
``*.out`` or ``*.err`` file, or any file below a folder named ``logs`` (Airflow's task and
triggerer logs).

``python tests/cluster/logscan.py --state-dir .devcluster PATH...`` prints each leak (the
file and which secret, never the secret) and exits 1 if there is one; ``make test`` runs it
over everything the suite logged before it stops the cluster.
"""

from __future__ import annotations

import argparse
import base64
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

__all__ = ["is_log", "leaks", "main", "secrets_of"]

_LOG_SUFFIXES = (".log", ".out", ".err")
_TOKEN_PREFIX = "dcst_"  # devcluster_auth's tokens
_TOKEN = re.compile(re.escape(_TOKEN_PREFIX) + r"[A-Za-z0-9_\-.]{12,}")
_MIN_SECRET = 16  # shorter strings would match by chance
_SA_TOKEN_HEADER = "eyJhbGciOiJSUzI1NiIsImtpZCI6"  # base64url of '{"alg":"RS256","kid":'


def secrets_of(state_dir: Path) -> dict[str, str]:
    """Each secret of the devcluster in ``state_dir`` under a name that does not reveal it."""
    found: dict[str, str] = {}
    ledger = state_dir / "authn" / "issued.log"
    if ledger.exists():  # also found by their prefix (see leaks); the ledger names them
        for number, token in enumerate(ledger.read_text().split(), 1):
            found[f"issued token #{number}"] = token
    pki = state_dir / "pki"
    hmac_key = pki / "authn-hmac.key"
    if hmac_key.exists():
        raw = hmac_key.read_bytes()
        found["token webhook key (hex)"] = raw.hex()
        found["token webhook key (base64)"] = base64.b64encode(raw).decode()
    for key in sorted(pki.glob("*.key")) if pki.is_dir() else []:
        pem = key.read_text(errors="replace")
        body = "".join(line for line in pem.splitlines() if not line.startswith("-----"))
        if body:
            found[f"{key.name} (PEM body)"] = body[:64]
            found[f"{key.name} (PEM line)"] = body[64:128]
        found[f"{key.name} (base64 PEM)"] = base64.b64encode(pem.encode()).decode()[:64]
    kubeconfig = state_dir / "kubeconfig"
    if kubeconfig.exists():
        for name, value in _kubeconfig_secrets(kubeconfig.read_text()):
            found[f"admin kubeconfig {name}"] = value[:64]
    # Any service-account token (the API server signs them RS256 with a key id), whoever
    # asked for it: its JWT header is the same for all of them.
    found["a service-account token (JWT header)"] = _SA_TOKEN_HEADER
    return {name: value for name, value in found.items() if len(value) >= _MIN_SECRET}


def _kubeconfig_secrets(text: str) -> Iterator[tuple[str, str]]:
    """The credentials of a kubeconfig (YAML or JSON; read as text, no YAML parser needed)."""
    for match in re.finditer(r'"?(client-key-data|token|password)"?\s*:\s*"?([^\s",]+)', text):
        yield match.group(1), match.group(2)


def is_log(path: Path) -> bool:
    """Whether ``path`` is a log file (see the module docs)."""
    return path.suffix in _LOG_SUFFIXES or "logs" in path.parent.parts


def _files(paths: Iterable[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_file():
            yield path
        elif path.is_dir():
            yield from (p for p in path.rglob("*") if p.is_file() and is_log(p))


def leaks(paths: Iterable[Path], secrets: dict[str, str]) -> list[str]:
    """``file: secret name`` for each secret found in a log file below ``paths`` (a token of
    the token webhook is found by its prefix, even cut short, so thousands of issued tokens
    cost one search per file)."""
    tokens = {value: name for name, value in secrets.items() if value.startswith(_TOKEN_PREFIX)}
    others = {name: value for name, value in secrets.items() if value not in tokens}
    found = []
    for path in _files(paths):
        try:
            text = path.read_bytes().decode("utf-8", "replace")
        except OSError:
            continue
        for match in sorted(set(_TOKEN.findall(text))):
            found.append(f"{path}: {tokens.get(match, 'a devcluster token (or part of one)')}")
        found += [f"{path}: {name}" for name, value in others.items() if value in text]
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--state-dir", type=Path, required=True)
    ap.add_argument("paths", nargs="*", type=Path)
    args = ap.parse_args(argv)
    secrets = secrets_of(args.state_dir)
    files = list(_files(args.paths))
    found = leaks(files, secrets)
    for leak in found:
        print(f"credential in a log: {leak}")
    print(
        f"logscan: {len(secrets)} secrets looked for in {len(files)} log files: {len(found)} found"
    )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
