"""One process extension's life: confinement from the user's grants, the manifest handshake,
calls with deadlines, and restarts with backoff after a crash or a hang.

The host decides what the process may do before it runs: the sandbox is built from the
capabilities the user granted in ``[extensions.process.NAME]`` (never from the manifest), and a
manifest that requires a capability outside that set is refused. A crash or a missed deadline
fails only the call in flight; the next call starts the process again, after a pause that
doubles with each consecutive failure (capped), so a crashing extension never spins.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roder_core.brokers import confined
from roder_core.brokers.confined import ConfinedCommand
from roder_core.brokers.secrets import SecretRedactor
from roder_core.kernel.extension import ProcessState
from roder_core.settings.config import ProcessExtensionConfig
from roder_ext_process.connection import ExtensionCallError, RpcConnection

#: The protocol version this host speaks (docs/extension-protocol.md).
PROTOCOL_VERSION = "1"
#: Capabilities a process extension can be granted, by prefix.
KNOWN_CAPABILITIES = (
    "fs.read.workspace",
    "fs.write.workspace",
    "network.loopback",
    "network.web",
    "network.api.",
    "secret.read.",
)
FIRST_BACKOFF = 0.5
MAX_BACKOFF = 30.0


def check_capabilities(name: str, granted: list[str]) -> None:
    for cap in granted:
        if not any(cap == known or (known.endswith(".") and cap.startswith(known)) for known in KNOWN_CAPABILITIES):
            raise ValueError(
                f"[extensions.process.{name}] capabilities: {cap!r} is not one a process can be granted "
                f"({', '.join(k + '*' if k.endswith('.') else k for k in KNOWN_CAPABILITIES)})"
            )


def confine(
    name: str, config: ProcessExtensionConfig, workspace: Path, env: Mapping[str, str], known: SecretRedactor, hidden: list[Path]
) -> ConfinedCommand:
    """The command line and environment that give the process exactly what was granted."""
    granted = set(config.capabilities)
    return confined.confine(
        config.command,
        workspace,
        env,
        known=known,
        reads="fs.read.workspace" in granted,
        writes="fs.write.workspace" in granted,
        network=any(cap.startswith("network.") for cap in granted),
        passed_env=[cap.removeprefix("secret.read.") for cap in granted if cap.startswith("secret.read.")],
        extra_env={**config.env, "RODER_EXTENSION_NAME": name},
        hidden=hidden,
    )


@dataclass
class Handshake:
    """What the process announced in answer to ``initialize``."""

    manifest: dict[str, Any]
    tools: list[dict[str, Any]] = field(default_factory=list)
    hooks: list[dict[str, Any]] = field(default_factory=list)
    engines: list[dict[str, Any]] = field(default_factory=list)
    context_providers: list[dict[str, Any]] = field(default_factory=list)
    policy_contributors: list[dict[str, Any]] = field(default_factory=list)
    status_segments: list[dict[str, Any]] = field(default_factory=list)
    palette_sources: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_result(cls, name: str, result: Any) -> Handshake:
        if not isinstance(result, dict) or not isinstance(result.get("manifest"), dict):
            raise ExtensionCallError(f"extension {name} answered initialize without a manifest object")
        raw = result.get("services")
        services: dict[str, Any] = raw if isinstance(raw, dict) else {}

        def rows(key: str) -> list[dict[str, Any]]:
            value = services.get(key, [])
            return [row for row in value if isinstance(row, dict)] if isinstance(value, list) else []

        return cls(
            manifest=result["manifest"],
            tools=rows("tools"),
            hooks=rows("hooks"),
            engines=rows("inferenceEngines"),
            context_providers=rows("contextProviders"),
            policy_contributors=rows("policyContributors"),
            status_segments=rows("statusSegments"),
            palette_sources=rows("paletteSources"),
        )


@dataclass
class PendingHandshake:
    """An ``initialize`` sent to a process just started, answered by ``deadline`` (monotonic)."""

    supervisor: Supervisor
    conn: RpcConnection
    request_id: int
    future: concurrent.futures.Future[Any]
    deadline: float

    def result(self) -> Handshake:
        """The manifest; a process that does not answer within its ``startup_timeout`` fails
        saying so, and is stopped (start-up goes on without it)."""
        sup = self.supervisor
        try:
            answer = self.conn.answer(self.request_id, self.future, "initialize", sup.config.startup_timeout, self.deadline)
        except ExtensionCallError as exc:
            if not self.future.done():  # it hung: never answered (an error answer is its own reason)
                exc = ExtensionCallError(f"{exc} (startup_timeout); Roder started without it")
            self.conn.close()
            raise exc from None
        shake = Handshake.from_result(sup.name, answer)
        sup._ready = self.conn
        return shake


class Supervisor:
    """Starts, watches and restarts one extension process; every call goes through here."""

    def __init__(
        self,
        name: str,
        config: ProcessExtensionConfig,
        workspace: Path,
        confinement: ConfinedCommand,
        on_notification: Callable[[str, dict[str, Any]], None] | None = None,
        redact: Callable[[str], str] | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self.workspace = workspace
        self.confinement = confinement
        #: The run's redaction, for what Roder itself hands the process beyond a tool call's
        #: arguments (the prompt a context provider is asked about): never a secret.
        self.redact: Callable[[str], str] = redact or (lambda text: text)
        self.extension_id = name
        self._listeners: list[Callable[[str, dict[str, Any]], None]] = [on_notification] if on_notification else []
        self._conn: RpcConnection | None = None
        #: The process once it has answered ``initialize``: the only one calls are sent to.
        self._ready: RpcConnection | None = None
        #: A start whose ``initialize`` is not answered yet (``connection``): others wait for it.
        self._starting: concurrent.futures.Future[RpcConnection] | None = None
        self._lock = threading.Lock()
        self.restarts = 0
        self.failures = 0
        self.next_start = 0.0
        self.last_error: str | None = None
        self.stopped = False
        self.clock: Callable[[], float] = time.monotonic

    def listen(self, listener: Callable[[str, dict[str, Any]], None]) -> None:
        self._listeners.append(listener)

    def _notify(self, method: str, params: dict[str, Any]) -> None:
        for listener in list(self._listeners):
            listener(method, params)

    # ------------------------------------------------------------------ the process

    def handshake(self) -> Handshake:
        """Start the process and read its manifest (the registry is being built: synchronous)."""
        return self.begin_handshake().result()

    def begin_handshake(self) -> PendingHandshake:
        """Start the process and send ``initialize``; the answer is waited for later, so every
        declared extension starts at once and start-up waits for the slowest, never the sum."""
        conn = self._start()
        request_id, future = conn.request("initialize", self._initialize_params())
        return PendingHandshake(self, conn, request_id, future, time.monotonic() + self.config.startup_timeout)

    def _initialize_params(self) -> dict[str, Any]:
        from roder_core import __version__

        return {
            "protocolVersion": PROTOCOL_VERSION,
            "host": {"name": "roder", "version": __version__},
            "workspace": str(self.workspace),
            "grantedCapabilities": sorted(self.config.capabilities),
        }

    def _start(self) -> RpcConnection:
        conn = RpcConnection(
            self.name, self.confinement.argv, env=self.confinement.env, cwd=self.workspace, on_notification=self._notify
        )
        self._conn = conn
        return conn

    def connection(self, wait: bool = True) -> RpcConnection:
        """The live process, started again when it died (not before its backoff has passed).
        Nothing is sent to a process before it has answered ``initialize``: a call that finds
        another caller's start under way waits for it (``wait``), or fails saying so."""
        with self._lock:
            ready = self._ready
            if ready is not None and ready.alive:
                return ready
            starting = self._starting
            conn: RpcConnection | None = None
            if starting is None:
                if self.stopped:
                    raise ExtensionCallError(f"extension {self.name} is stopped")
                now = self.clock()
                if now < self.next_start:
                    raise ExtensionCallError(
                        f"extension {self.name} failed ({self.last_error}); it is restarted in {self.next_start - now:.1f} s"
                    )
                starting = self._starting = concurrent.futures.Future()
                conn = self._start()
        if conn is None:
            if not wait:
                raise ExtensionCallError(f"extension {self.name} is starting again (initialize not answered yet)")
            return starting.result()
        try:
            conn.call_sync("initialize", self._initialize_params(), self.config.startup_timeout)
        except ExtensionCallError as exc:
            self._failed(str(exc))
            conn.close()
            with self._lock:
                self._starting = None
            starting.set_exception(exc)
            raise
        self.restarts += 1
        with self._lock:
            self._ready, self._starting = conn, None
        starting.set_result(conn)
        return conn

    def _failed(self, reason: str) -> None:
        """Note a crash or hang: the next start waits, twice as long each time in a row."""
        self.last_error = reason
        self.failures += 1
        backoff = 0.0 if self.failures == 1 else min(FIRST_BACKOFF * 2 ** (self.failures - 2), MAX_BACKOFF)
        self.next_start = self.clock() + backoff

    async def call(self, method: str, params: Mapping[str, Any], timeout: float | None = None) -> Any:
        """One call; a crash or a missed deadline fails it with a clear error and costs only it.
        A process started again for it answers ``initialize`` in a worker thread: a restart
        that hangs holds this call, never the event loop (the app, other turns)."""
        conn = self._ready
        if conn is None or not conn.alive:
            conn = await asyncio.to_thread(self.connection)
        try:
            result = await conn.call(method, params, timeout or self.config.timeout)
        except ExtensionCallError as exc:
            if not conn.alive or "did not answer" in str(exc):
                self._failed(str(exc))
                conn.close()  # a hung process is replaced, not waited on
            raise
        self.failures = 0
        return result

    def call_sync(self, method: str, params: Mapping[str, Any], timeout: float) -> Any:
        conn = self.connection(wait=False)  # (the event loop's: never held by another's restart)
        try:
            return conn.call_sync(method, params, timeout)
        except ExtensionCallError as exc:
            if not conn.alive:
                self._failed(str(exc))
            raise

    def notify(self, method: str, params: Mapping[str, Any]) -> None:
        conn = self._ready
        if conn is not None and conn.alive:
            conn.notify(method, params)

    def state(self) -> ProcessState:
        conn = self._conn
        if self.stopped:
            state = "stopped"
        elif conn is not None and conn.alive:
            state = "running"
        elif self.failures:
            state = "restarting"
        else:
            state = "stopped"
        return ProcessState(
            self.extension_id,
            "process",
            state,  # type: ignore[arg-type]
            sandboxed=self.confinement.sandboxed,
            granted=tuple(sorted(self.config.capabilities)),
            restarts=self.restarts,
            last_error=self.last_error,
        )

    def close(self) -> None:
        self.stopped = True
        conn, self._conn, self._ready = self._conn, None, None
        if conn is not None:
            conn.close()
