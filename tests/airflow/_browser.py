"""A real browser for the UI tests: Debian's Chromium driven through chromium-driver's
W3C WebDriver HTTP API with the standard library (no Selenium).

:func:`ensure_chromium` installs the two Debian packages with apt-get when they are missing
(as the real node installs its own: tests/cluster/localcluster/node_host.py), or fails the
test saying how; :func:`browser` starts the driver and one headless session, stopped on exit.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["PACKAGES", "Browser", "browser", "ensure_chromium"]

#: Debian package → the file it installs that the tests use.
PACKAGES = {"chromium": "/usr/bin/chromium", "chromium-driver": "/usr/bin/chromedriver"}
_ELEMENT = "element-6066-11e4-a52e-4f735466cecf"


def missing_packages() -> list[str]:
    return [pkg for pkg, path in PACKAGES.items() if not os.path.exists(path)]


def ensure_chromium() -> None:
    """Install Chromium and its driver with apt-get when missing.

    Raises:
        RuntimeError: they are missing and cannot be installed here (not root, no apt-get),
            or the install failed.
    """
    missing = missing_packages()
    if not missing:
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise RuntimeError(
            "the browser tests need these Debian packages: "
            + " ".join(missing)
            + " (apt-get install --no-install-recommends ...)"
        )
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    # Another process of the suite may be installing them too (the view's browser test and
    # the benchmarks' smoke run side by side): wait for dpkg's lock rather than fail.
    command = [
        "apt-get",
        "-o",
        "DPkg::Lock::Timeout=600",
        "install",
        "-y",
        "-q",
        "--no-install-recommends",
        *missing,
    ]
    run = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if run.returncode != 0:  # a brand-new machine may have no package lists yet
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, check=False)
        run = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if run.returncode != 0 or missing_packages():
        raise RuntimeError(f"apt-get install {' '.join(missing)} failed:\n{run.stderr[-2000:]}")


@dataclass
class Browser:
    """One WebDriver session."""

    base: str
    session: str

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        request = urllib.request.Request(
            f"{self.base}/session/{self.session}{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return json.loads(answer.read())["value"]
        except urllib.error.HTTPError as error:
            raise AssertionError(f"WebDriver {method} {path}: {error.read()[:1000]!r}") from None

    def get(self, url: str) -> None:
        """Load ``url`` in the current frame's window."""
        self._call("POST", "/url", {"url": url})

    def script(self, code: str, *args: Any) -> Any:
        """Run ``code`` (a function body) in the page; what it returns."""
        return self._call("POST", "/execute/sync", {"script": code, "args": list(args)})

    def script_async(self, code: str, *args: Any) -> Any:
        """Run ``code`` in the page; what it passes to its last argument (a callback)."""
        return self._call("POST", "/execute/async", {"script": code, "args": list(args)})

    def timeouts(self, *, script: float) -> None:
        """How long a script may run (seconds)."""
        self._call("POST", "/timeouts", {"script": int(script * 1000)})

    def cookie(self, name: str, value: str) -> None:
        """Set a cookie of the current page's site."""
        self._call("POST", "/cookie", {"cookie": {"name": name, "value": value, "path": "/"}})

    def delete_cookie(self, name: str) -> None:
        """Remove a cookie of the current page's site."""
        self._call("DELETE", f"/cookie/{name}")

    def frame(self, css: str | None) -> None:
        """Switch to the iframe ``css`` selects (``None``: back to the top document)."""
        if css is None:
            self._call("POST", "/frame", {"id": None})
            return
        found = self._call("POST", "/element", {"using": "css selector", "value": css})
        self._call("POST", "/frame", {"id": {_ELEMENT: found[_ELEMENT]}})

    def tab(self, url: str, title: str, timeout: float = 90) -> None:
        """Load a UI page holding a plugin's tab (an iframe titled ``title``) and enter it."""
        self.frame(None)
        self.get(url)
        self.wait(f"return document.querySelector('iframe[title=\"{title}\"]')", timeout)
        self.frame(f'iframe[title="{title}"]')

    def wait(self, code: str, timeout: float, *args: Any) -> Any:
        """Until ``code`` returns something truthy (then that), or fail after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                found = self.script(code, *args)
            except AssertionError:
                found = None  # e.g. no such frame yet
            if found:
                return found
            if time.monotonic() >= deadline:
                raise AssertionError(f"the page never satisfied: {code}")
            time.sleep(0.5)

    def screenshot(self, path: Path) -> None:
        """A PNG of the window into ``path``."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(self._call("GET", "/screenshot")))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def browser(width: int = 1400, height: int = 1000) -> Iterator[Browser]:
    """A headless Chromium session (the driver is stopped on exit)."""
    ensure_chromium()
    port = _free_port()
    driver = subprocess.Popen(
        [PACKAGES["chromium-driver"], f"--port={port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{base}/status", timeout=5) as answer:
                    if json.loads(answer.read())["value"]["ready"]:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "chromedriver did not start"
            time.sleep(0.2)
        options = {
            "binary": PACKAGES["chromium"],
            "args": [
                "--headless=new",
                "--no-sandbox",  # as root in a container
                "--disable-gpu",
                "--disable-dev-shm-usage",
                f"--window-size={width},{height}",
            ],
        }
        body = {"capabilities": {"alwaysMatch": {"goog:chromeOptions": options}}}
        request = urllib.request.Request(
            f"{base}/session",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            session = json.loads(answer.read())["value"]["sessionId"]
        the = Browser(base, session)
        try:
            yield the
        finally:
            the._call("DELETE", "")
    finally:
        driver.terminate()
        driver.wait(10)
