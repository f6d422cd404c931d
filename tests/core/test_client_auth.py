"""Credentials that expire, without a cluster: which credential a kubeconfig user stands for,
when it is refreshed, what a plugin's answer means, what a 401 leads to (pure tables), and the
credential source with real plugin programs and token files (a clock of the test's own).
What the API server decides (a refused token, a watch that outlives its token) is tested
against the devcluster in ``test_client_credentials.py``."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from jobset_core.client._auth import (
    CertificateAnswer,
    Credential,
    ExecPlugin,
    Fixed,
    TokenFile,
    after_refusal,
    exec_info,
    plan_credentials,
    read_exec_credential,
    refresh_due,
    resolve_command,
    stripped_user,
    token_from_file,
)
from jobset_core.client._credentials import Credentials
from jobset_core.errors import ConfigError

API = "client.authentication.k8s.io/v1"
EXEC = {"apiVersion": API, "command": "aws", "args": ["eks", "get-token"]}


# ---------------------------------------------------------------------- plans


@pytest.mark.parametrize(
    ("user", "plan"),
    [
        pytest.param(None, Fixed(), id="no-user"),
        pytest.param({"token": "t"}, Fixed(), id="static-token"),
        pytest.param({"client-certificate-data": "x"}, Fixed(), id="certificate"),
        pytest.param(
            {"auth-provider": {"name": "oidc"}, "exec": EXEC}, Fixed(), id="auth-provider-first"
        ),
        pytest.param(
            {"exec": EXEC, "tokenFile": "t"},
            ExecPlugin("aws", ("eks", "get-token"), (), API, False, "user.exec"),
            id="exec-first",
        ),
        pytest.param(
            {"tokenFile": "sa/token", "token": "stale"},
            TokenFile("/cfg/sa/token", "user.tokenFile"),
            id="token-file-over-token",
        ),
        pytest.param(
            {"tokenFile": "/var/run/token"},
            TokenFile("/var/run/token", "user.tokenFile"),
            id="absolute-token-file",
        ),
    ],
)
def test_plan_credentials(user: dict[str, Any] | None, plan: Any) -> None:
    assert plan_credentials(user, "/cfg") == plan


def test_an_exec_plugin_keeps_its_environment_and_cluster_wish() -> None:
    section = {
        **EXEC,
        "env": [{"name": "AWS_PROFILE", "value": "ml"}],
        "provideClusterInfo": True,
        "command": "./bin/plugin",
    }
    plan = plan_credentials({"exec": section}, "/home/me/.kube", where="users[name=me].user")
    assert plan == ExecPlugin(
        "/home/me/.kube/bin/plugin",
        ("eks", "get-token"),
        (("AWS_PROFILE", "ml"),),
        API,
        True,
        "users[name=me].user.exec",
    )
    assert plan.label == "exec plugin 'plugin' (users[name=me].user.exec)"


@pytest.mark.parametrize(
    ("section", "message"),
    [
        pytest.param({"apiVersion": API}, r"user\.exec\.command: required", id="no-command"),
        pytest.param(
            {"command": "x", "apiVersion": "client.authentication.k8s.io/v1alpha1"},
            r"user\.exec\.apiVersion: 'client.authentication.k8s.io/v1alpha1' is not one of",
            id="old-api",
        ),
        pytest.param(
            {**EXEC, "args": "eks get-token"}, r"user\.exec\.args: must be a list", id="args"
        ),
        pytest.param({**EXEC, "env": [{"name": "A"}]}, r"user\.exec\.env\[0\]", id="env"),
        pytest.param(
            {**EXEC, "interactiveMode": "Always"},
            r"user\.exec\.interactiveMode: Always needs a terminal",
            id="interactive",
        ),
        pytest.param("aws", r"user\.exec: must be a mapping", id="not-a-mapping"),
    ],
)
def test_a_malformed_exec_section_names_its_field(section: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        plan_credentials({"exec": section}, "/cfg")


@pytest.mark.parametrize(
    ("command", "base", "resolved"),
    [
        pytest.param("aws", "/cfg", "aws", id="bare-name-on-path"),
        pytest.param("/usr/bin/x", "/cfg", "/usr/bin/x", id="absolute"),
        pytest.param("bin/x", "/cfg", "/cfg/bin/x", id="relative-with-separator"),
        pytest.param("./x", "/cfg", "/cfg/x", id="dot-relative"),
        pytest.param("bin/x", "", "bin/x", id="content-kubeconfig"),
    ],
)
def test_resolve_command(command: str, base: str, resolved: str) -> None:
    assert resolve_command(command, base) == resolved


def test_the_loader_never_sees_what_this_client_refreshes() -> None:
    user = {"exec": EXEC, "token": "t", "tokenFile": "f", "client-certificate-data": "c"}
    assert stripped_user(user, plan_credentials(user, "")) == {"client-certificate-data": "c"}
    token_file = {"token": "t", "tokenFile": "f", "username": "u"}
    assert stripped_user(token_file, TokenFile("f")) == {"username": "u"}
    assert stripped_user(user, Fixed()) == user


def test_exec_info_tells_the_cluster_only_when_asked() -> None:
    cluster = {
        "server": "https://k:6443",
        "certificate-authority-data": "Q0E=",
        "extensions": [{"name": "client.authentication.k8s.io/exec", "extension": {"a": 1}}],
    }
    plain = json.loads(exec_info(ExecPlugin("x"), cluster))
    assert plain == {"apiVersion": API, "kind": "ExecCredential", "spec": {"interactive": False}}
    asked = json.loads(exec_info(ExecPlugin("x", provide_cluster_info=True), cluster))
    assert asked["spec"]["cluster"] == {
        "server": "https://k:6443",
        "certificate-authority-data": "Q0E=",
        "config": {"a": 1},
    }


# ---------------------------------------------------------------------- answers


def credential_json(status: dict[str, Any], api: str = API, kind: str = "ExecCredential") -> bytes:
    return json.dumps({"apiVersion": api, "kind": kind, "status": status}).encode()


def test_an_exec_answer_with_a_token_and_its_expiry() -> None:
    out = credential_json({"token": "abc", "expirationTimestamp": "2030-01-01T00:00:00Z"})
    found = read_exec_credential(out, ExecPlugin("x"), now=100.0)
    assert found == Credential("Bearer abc", 100.0, 1893456000.0)
    no_expiry = read_exec_credential(credential_json({"token": "abc"}), ExecPlugin("x"), 5.0)
    assert no_expiry == Credential("Bearer abc", 5.0, None)


def test_a_certificate_answer_goes_back_to_the_official_loader() -> None:
    status = {"clientCertificateData": "CERT", "clientKeyData": "KEY"}
    assert read_exec_credential(credential_json(status), ExecPlugin("x"), 0.0) == (
        CertificateAnswer()
    )


@pytest.mark.parametrize(
    ("out", "message"),
    [
        pytest.param(b"nope", "its output is not JSON", id="not-json"),
        pytest.param(credential_json({}, kind="Other"), "not an ExecCredential", id="kind"),
        pytest.param(
            credential_json({"token": "t"}, api="client.authentication.k8s.io/v1beta1"),
            "it answered apiVersion 'client.authentication.k8s.io/v1beta1'",
            id="version",
        ),
        pytest.param(
            json.dumps({"apiVersion": API, "kind": "ExecCredential"}).encode(),
            "has no status",
            id="no-status",
        ),
        pytest.param(credential_json({"token": ""}), "neither a token nor", id="empty-token"),
        pytest.param(
            credential_json({"token": "t", "expirationTimestamp": "soon"}),
            "expirationTimestamp 'soon' is not RFC 3339",
            id="bad-expiry",
        ),
    ],
)
def test_bad_exec_answers_are_config_errors(out: bytes, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        read_exec_credential(out, ExecPlugin("/opt/bin/plugin", ("--secret", "s3")), 0.0)
    assert "plugin 'plugin'" in str(caught.value) and "s3" not in str(caught.value)


def jwt(claims: dict[str, Any]) -> str:
    part = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"eyJhbGciOiJSUzI1NiJ9.{part}.sig"


@pytest.mark.parametrize(
    ("content", "expires"),
    [
        pytest.param(b"plain-token\n", None, id="opaque"),
        pytest.param(jwt({"exp": 1700000000, "sub": "x"}).encode(), 1700000000.0, id="jwt"),
        pytest.param(jwt({"sub": "x"}).encode(), None, id="jwt-without-exp"),
        pytest.param(b"a.b.c", None, id="three-parts-not-a-jwt"),
    ],
)
def test_token_from_file(content: bytes, expires: float | None) -> None:
    found = token_from_file(content, TokenFile("/t"), now=1.0)
    assert found.header == f"Bearer {content.decode().strip()}" and found.expires_at == expires


def test_an_empty_token_file_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"token file /t \(user.tokenFile\): the file is empty"):
        token_from_file(b"  \n", TokenFile("/t"), now=0.0)


# ---------------------------------------------------------------------- decisions


@pytest.mark.parametrize(
    ("obtained", "expires", "now", "due"),
    [
        pytest.param(0.0, None, 1e9, False, id="no-expiry-is-kept-until-refused"),
        pytest.param(0.0, 100.0, 79.0, False, id="short-80-percent-not-yet"),
        pytest.param(0.0, 100.0, 80.0, True, id="short-80-percent"),
        pytest.param(0.0, 3600.0, 3539.0, False, id="long-61s-before"),
        pytest.param(0.0, 3600.0, 3540.0, True, id="long-60s-before"),
        pytest.param(0.0, 100.0, 150.0, True, id="expired"),
        pytest.param(50.0, 40.0, 45.0, True, id="expired-on-arrival"),
    ],
)
def test_refresh_due(obtained: float, expires: float | None, now: float, due: bool) -> None:
    assert refresh_due(Credential("Bearer x", obtained, expires), now) is due


@pytest.mark.parametrize(
    ("used", "current", "retried", "decision"),
    [
        pytest.param(1, 1, False, "refresh", id="refused-one-is-current"),
        pytest.param(1, 2, False, "retry", id="already-rotated"),
        pytest.param(1, 2, True, "give_up", id="second-refusal"),
        pytest.param(2, 2, True, "give_up", id="second-refusal-same"),
    ],
)
def test_after_refusal(used: int, current: int, retried: bool, decision: str) -> None:
    one = Credential("Bearer a", 0.0, generation=used)
    now = Credential("Bearer b", 0.0, generation=current)
    assert after_refusal(one, now, retried=retried) == decision


# ---------------------------------------------------------------------- the source


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def plugin(tmp_path: Path, *, ttl: float | None = 100.0, fail_after: int | None = None) -> Path:
    """A credential plugin: token ``t<n>`` on its n-th run, valid ``ttl`` seconds from the
    time the test's clock file says; exits 1 after ``fail_after`` runs."""
    script = tmp_path / "plugin.py"
    script.write_text(
        f"""
import json, sys, time, pathlib
here = pathlib.Path({str(tmp_path)!r})
runs = here / "runs"
n = int(runs.read_text()) + 1 if runs.exists() else 1
runs.write_text(str(n))
fail_after, ttl = {fail_after!r}, {ttl!r}
if fail_after is not None and n > fail_after:
    print("the identity provider is down", file=sys.stderr)
    sys.exit(1)
now = float((here / "now").read_text())
status = {{"token": f"t{{n}}"}}
if ttl is not None:
    status["expirationTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + ttl))
print(json.dumps({{"apiVersion": "{API}", "kind": "ExecCredential", "status": status}}))
"""
    )
    return script


def source(tmp_path: Path, clock: Clock, **kwargs: Any) -> Credentials:
    script = plugin(tmp_path, **kwargs)
    (tmp_path / "now").write_text(str(int(clock.now)))
    return Credentials(ExecPlugin(sys.executable, (str(script),)), clock=clock)


def runs(tmp_path: Path) -> int:
    return int((tmp_path / "runs").read_text())


def tick(tmp_path: Path, clock: Clock, seconds: float) -> None:
    clock.now += seconds
    (tmp_path / "now").write_text(str(int(clock.now)))


async def test_a_plugin_runs_again_only_when_its_token_is_due(tmp_path: Path) -> None:
    clock = Clock()
    creds = source(tmp_path, clock)
    await creds.start()
    assert (await creds.current()).header == "Bearer t1"
    tick(tmp_path, clock, 50)
    assert (await creds.current()).header == "Bearer t1" and runs(tmp_path) == 1
    tick(tmp_path, clock, 31)  # 81 s of 100: due
    fresh = await creds.current()
    assert (fresh.header, fresh.generation, runs(tmp_path)) == ("Bearer t2", 2, 2)
    assert creds.stats.refreshes == 1


async def test_many_requests_that_find_the_token_due_share_one_refresh(tmp_path: Path) -> None:
    clock = Clock()
    creds = source(tmp_path, clock)
    await creds.start()
    tick(tmp_path, clock, 90)
    headers = {c.header for c in await asyncio.gather(*(creds.current() for _ in range(20)))}
    assert headers == {"Bearer t2"} and runs(tmp_path) == 2


async def test_a_failing_plugin_keeps_the_token_until_it_expires(tmp_path: Path) -> None:
    clock = Clock()
    creds = source(tmp_path, clock, fail_after=1)
    await creds.start()
    tick(tmp_path, clock, 90)
    assert (await creds.current()).header == "Bearer t1"  # refresh failed: the old one
    assert (await creds.current()).header == "Bearer t1" and runs(tmp_path) == 2  # paused
    tick(tmp_path, clock, 6)
    assert (await creds.current()).header == "Bearer t1" and runs(tmp_path) == 3
    tick(tmp_path, clock, 10)  # expired now
    with pytest.raises(ConfigError, match=r"exited with status 1: the identity provider is down"):
        await creds.current()
    assert creds.stats.failures == 3


async def test_a_refusal_refreshes_once_and_the_second_gives_up(tmp_path: Path) -> None:
    clock = Clock()
    creds = source(tmp_path, clock, ttl=None)  # no expiry: kept until refused
    await creds.start()
    used = await creds.current()
    fresh = await creds.refused(used, retried=False)
    assert fresh is not None and fresh.header == "Bearer t2"
    assert await creds.refused(fresh, retried=True) is None
    # A request that carried t1 after t2 came: retried with t2, no plugin run.
    again = await creds.refused(used, retried=False)
    assert again is not None and again.header == "Bearer t2" and runs(tmp_path) == 2
    assert creds.stats.refusals == 3


async def test_a_fixed_credential_is_never_refreshed() -> None:
    creds = Credentials(Fixed(), fixed_header="Bearer static")
    used = await creds.current()
    assert used.header == "Bearer static"
    assert await creds.refused(used, retried=False) is None


async def test_a_plugin_that_answers_a_certificate_hands_over(tmp_path: Path) -> None:
    script = tmp_path / "cert.py"
    status = {"clientCertificateData": "C", "clientKeyData": "K"}
    answer = json.dumps({"apiVersion": API, "kind": "ExecCredential", "status": status})
    script.write_text(f"print({answer!r})\n")
    creds = Credentials(ExecPlugin(sys.executable, (str(script),)))
    assert await creds.start() == CertificateAnswer()
    assert isinstance(creds.plan, Fixed)


async def test_a_missing_plugin_names_itself(tmp_path: Path) -> None:
    creds = Credentials(ExecPlugin(str(tmp_path / "absent-plugin"), where="users[name=u].user"))
    with pytest.raises(ConfigError, match=r"exec plugin 'absent-plugin' .*cannot run"):
        await creds.start()


async def test_a_token_file_is_read_again_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("one\n")
    creds = Credentials(TokenFile(str(path)))
    await creds.start()
    first = await creds.current()
    assert first.header == "Bearer one" and await creds.current() is first
    replacement = tmp_path / "token.new"
    replacement.write_text("two")
    os.replace(replacement, path)  # how the kubelet rotates a projected token
    assert (await creds.current()).header == "Bearer two"
    path.write_text("")  # caught mid-write: the token held stays
    os.utime(path, ns=(1, 1))
    assert (await creds.current()).header == "Bearer two"
    path.write_text("three")
    held = await creds.current()
    assert held.header == "Bearer three"
    assert await creds.refused(held, retried=False) is None  # refused, and still the same
    assert creds.stats.refreshes == 2


async def test_an_unreadable_token_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("x")
    path.chmod(0)
    creds = Credentials(TokenFile(str(path), "the in-cluster service account token"))
    if os.access(path, os.R_OK):  # root reads anything: take the file away instead
        path.chmod(stat.S_IRUSR)
        path.unlink()
    with pytest.raises(ConfigError, match=r"the in-cluster service account token\): cannot read"):
        await creds.start()


async def test_the_in_cluster_token_is_read_again_when_the_kubelet_rotates_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A projected service-account token: the official loader reads it once; ours again."""
    from jobset_core.client import config
    from jobset_core.client.config import ClientSettings, load_connection

    (tmp_path / "token").write_text("first")
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n")
    monkeypatch.setattr(config, "_SA_DIR", tmp_path)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    connection = await load_connection(ClientSettings(in_cluster=True))
    assert connection.configuration.host == "https://10.0.0.1:443"
    assert isinstance(connection.credentials.plan, TokenFile)
    assert (await connection.credentials.current()).header == "Bearer first"
    replaced = tmp_path / "token.new"
    replaced.write_text("second")
    os.replace(replaced, tmp_path / "token")  # the kubelet swaps the file atomically
    assert (await connection.credentials.current()).header == "Bearer second"
