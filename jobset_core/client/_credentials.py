"""The credentials of one client, kept fresh: the I/O half of :mod:`._auth`.

:class:`Credentials` hands every request the ``Authorization`` header it should carry. An exec
plugin runs again before its token expires; a token file is read again whenever it changes (a
``stat`` per request, microseconds); after a 401 the source is refreshed once and the request
sent once more (:meth:`Credentials.refused`), never in a loop. Concurrent requests that find
the credential due wait for one refresh instead of starting their own.

Nothing here logs or stores a token: messages name the plugin's program or the file, and a
failing plugin's standard error is cut to a few hundred characters.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from jobset_core.client._auth import (
    CertificateAnswer,
    Credential,
    CredentialPlan,
    ExecPlugin,
    Fixed,
    TokenFile,
    after_refusal,
    exec_info,
    read_exec_credential,
    refresh_due,
    token_from_file,
)
from jobset_core.errors import ConfigError

__all__ = ["CredentialStats", "Credentials"]

log = logging.getLogger(__name__)

#: Longest a credential plugin may take (a plugin that asks for input never answers).
EXEC_TIMEOUT = 120.0
#: After a failed refresh while the old credential still works, the next try waits this long.
FAILED_REFRESH_PAUSE = 5.0
_STDERR_CHARS = 300


class CredentialStats:
    """What a credential source did (read at any time).

    Attributes:
        refreshes: Credentials obtained after the first one (plugin runs, file reads that
            found a new token).
        refusals: 401 answers received.
        failures: Refreshes that failed (the plugin failed, the file could not be read).
    """

    def __init__(self) -> None:
        self.refreshes = 0
        self.refusals = 0
        self.failures = 0

    def snapshot(self) -> dict[str, int]:
        """A plain copy."""
        return dict(vars(self))


class Credentials:
    """The credential source of one client.

    Args:
        plan: What to refresh (see :func:`~jobset_core.client._auth.plan_credentials`).
        fixed_header: The header of a :class:`~jobset_core.client._auth.Fixed` plan (what
            the official loader configured), if any.
        cluster: The kubeconfig's cluster section (for ``provideClusterInfo``).
        clock: Epoch seconds (injectable for tests).
    """

    def __init__(
        self,
        plan: CredentialPlan,
        *,
        fixed_header: str | None = None,
        cluster: Mapping[str, Any] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.plan = plan
        self.stats = CredentialStats()
        self._cluster = cluster
        self._clock = clock
        self._credential = Credential(fixed_header, obtained_at=clock())
        self._file_stamp: tuple[int, int, int] | None = None
        self._pause_until = 0.0
        self._locks: dict[int, asyncio.Lock] = {}

    @property
    def label(self) -> str:
        """What the credentials come from (for messages; never the credential itself)."""
        return self.plan.label

    async def start(self) -> CertificateAnswer | None:
        """Obtain the first credential. A plugin that answers with a client certificate is
        handed back to the official loader (the answer says so; the plan becomes fixed).

        Raises:
            ConfigError: the plugin failed, or the file cannot be read.
        """
        plan = self.plan
        if isinstance(plan, ExecPlugin):
            answer = await self._run_plugin(plan)
            if isinstance(answer, CertificateAnswer):
                self.plan = Fixed(f"{plan.label}, a client certificate")
                return answer
            self._credential = answer
        elif isinstance(plan, TokenFile):
            self._credential = self._read_file(plan, generation=1)
        return None

    async def current(self) -> Credential:
        """The credential the next request carries, refreshed first when it is due.

        Raises:
            ConfigError: a refresh failed and the credential held has expired.
        """
        plan = self.plan
        if isinstance(plan, TokenFile):
            self._reread_if_changed(plan)
            return self._credential
        if isinstance(plan, ExecPlugin) and self._due():
            async with self._lock():
                if self._due():
                    await self._refresh(plan, reason="due")
        return self._credential

    async def refused(self, used: Credential, *, retried: bool) -> Credential | None:
        """The API server answered 401 to a request carrying ``used``: the credential to send
        it again with, or ``None`` when the 401 should surface (a fixed credential, the
        request's second refusal, or a refresh that brought nothing new)."""
        self.stats.refusals += 1
        plan = self.plan
        if isinstance(plan, Fixed):
            return None
        async with self._lock():
            decision = after_refusal(used, self._credential, retried=retried)
            if decision == "give_up":
                return None
            if decision == "refresh":
                if isinstance(plan, ExecPlugin):
                    await self._refresh(plan, reason="refused", strict=True)
                else:
                    self._credential = self._read_file(plan, self._credential.generation + 1)
            fresh = self._credential
        if fresh.header == used.header:
            return None  # the source still hands out the refused credential
        return fresh

    # ------------------------------------------------------------------ plumbing

    def _due(self) -> bool:
        now = self._clock()
        return refresh_due(self._credential, now) and now >= self._pause_until

    def _lock(self) -> asyncio.Lock:
        loop = id(asyncio.get_running_loop())
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = asyncio.Lock()
        return lock

    async def _refresh(self, plan: ExecPlugin, *, reason: str, strict: bool = False) -> None:
        held = self._credential
        try:
            answer = await self._run_plugin(plan)
        except ConfigError as error:
            self.stats.failures += 1
            now = self._clock()
            if strict or held.expires_at is None or now >= held.expires_at:
                raise
            self._pause_until = now + FAILED_REFRESH_PAUSE
            log.warning("%s; the current token stays in use until it expires", error)
            return
        if isinstance(answer, CertificateAnswer):
            raise ConfigError(
                f"{plan.label}: it answered with a client certificate where it gave a token "
                "before; a client certificate cannot replace a token while the client runs"
            )
        self.stats.refreshes += 1
        self._credential = Credential(
            answer.header, answer.obtained_at, answer.expires_at, held.generation + 1
        )
        log.debug("%s: new token (%s)", plan.label, reason)

    async def _run_plugin(self, plan: ExecPlugin) -> Credential | CertificateAnswer:
        env = dict(os.environ)
        env.update(plan.env)
        env["KUBERNETES_EXEC_INFO"] = exec_info(plan, self._cluster)
        try:
            process = await asyncio.create_subprocess_exec(
                plan.command,
                *plan.args,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as err:
            raise ConfigError(f"{plan.label}: cannot run {plan.command}: {err.strerror}") from None
        try:
            async with asyncio.timeout(EXEC_TIMEOUT):
                stdout, stderr = await process.communicate()
        except TimeoutError:
            process.kill()
            await process.wait()
            raise ConfigError(
                f"{plan.label}: no answer within {EXEC_TIMEOUT:.0f}s (does it wait for input?)"
            ) from None
        if process.returncode != 0:
            said = stderr.decode("utf-8", "replace").strip()[:_STDERR_CHARS]
            raise ConfigError(
                f"{plan.label}: exited with status {process.returncode}"
                + (f": {said}" if said else "")
            )
        return read_exec_credential(stdout, plan, self._clock())

    def _stamp(self, plan: TokenFile) -> tuple[int, int, int] | None:
        try:
            info = os.stat(plan.path)
        except OSError:
            return None
        return (info.st_mtime_ns, info.st_size, info.st_ino)

    def _reread_if_changed(self, plan: TokenFile) -> None:
        stamp = self._stamp(plan)
        if stamp is None or stamp == self._file_stamp:
            return  # unchanged, or missing for a moment while it is replaced
        try:
            fresh = self._read_file(plan, self._credential.generation + 1)
        except ConfigError as error:  # an empty file mid-write: keep the one held
            self.stats.failures += 1
            log.debug("%s", error)
            return
        if fresh.header != self._credential.header:
            self.stats.refreshes += 1
            self._credential = fresh

    def _read_file(self, plan: TokenFile, generation: int) -> Credential:
        stamp = self._stamp(plan)
        try:
            with open(plan.path, "rb") as handle:
                content = handle.read()
        except OSError as err:
            raise ConfigError(f"{plan.label}: cannot read it: {err.strerror}") from None
        credential = token_from_file(content, plan, self._clock())
        self._file_stamp = stamp
        return Credential(
            credential.header, credential.obtained_at, credential.expires_at, generation
        )
