"""The log scan of ``make test`` finds a planted credential (a whole or cut token, a key, the
admin kubeconfig's key, a service-account token) in a log file, and nothing in clean logs."""

from __future__ import annotations

import base64
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster import logscan

KEY_PEM = "-----BEGIN PRIVATE KEY-----\n" + "A" * 20 + "kEy" * 30 + "\n-----END PRIVATE KEY-----\n"
TOKEN = "dcst_eyJ1IjoiYWxpY2UifQ.c2lnbmF0dXJlLW9mLXRoZS10b2tlbg"


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """A folder outside pytest's own: `make test` scans that one for credentials, and the ones
    planted here are fakes that must not be found there."""
    folder = Path(tempfile.mkdtemp(prefix="jobset-logscan-test-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def state(tmp_path: Path) -> Path:
    root = tmp_path / "state"
    (root / "pki").mkdir(parents=True)
    (root / "authn").mkdir()
    (root / "authn" / "issued.log").write_text(TOKEN + "\n")
    (root / "pki" / "authn-hmac.key").write_bytes(b"\x01" * 32)
    (root / "pki" / "admin.key").write_text(KEY_PEM)
    data = base64.b64encode(KEY_PEM.encode()).decode()
    (root / "kubeconfig").write_text(
        f"users:\n- name: admin\n  user:\n    client-key-data: {data}\n"
    )
    return root


@pytest.mark.parametrize(
    ("text", "named"),
    [
        pytest.param(f"Authorization: Bearer {TOKEN}", "issued token #1", id="token"),
        pytest.param(f"header={TOKEN[:30]}...", "a devcluster token", id="cut-token"),
        pytest.param(("01" * 32), "token webhook key (hex)", id="hmac-key"),
        pytest.param("kEy" * 22, "admin.key (PEM", id="pem"),
        pytest.param(
            base64.b64encode(KEY_PEM.encode()).decode(), "admin kubeconfig", id="kubeconfig"
        ),
        pytest.param("token: eyJhbGciOiJSUzI1NiIsImtpZCI6IjEyMyJ9.x.y", "service-account", id="sa"),
    ],
)
def test_a_planted_credential_is_found(state: Path, tmp_path: Path, text: str, named: str) -> None:
    logs = tmp_path / "home" / "logs" / "dag_id=x"
    logs.mkdir(parents=True)
    (logs / "attempt=1").write_text(f"some line\n{text}\nmore\n")
    found = logscan.leaks([tmp_path / "home"], logscan.secrets_of(state))
    assert found and any(named in leak for leak in found), found
    assert not any(TOKEN in leak or "kEy" in leak for leak in found)  # never the secret itself


def test_clean_logs_and_non_logs_are_not_flagged(state: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "run.log").write_text("a JobSet completed; Bearer <redacted>\n")
    (home / "user.kubeconfig").write_text(TOKEN)  # a kubeconfig is not a log
    assert logscan.leaks([home], logscan.secrets_of(state)) == []
