"""One-shot mode on this user's running host (``roder serve``): a ``roder_tui.ask_turn.Session`` that
speaks JSON-RPC to the host's unix socket with the standard library alone.

The host already holds the runtime, the extensions and the provider's connection, so the
client's own start is the whole cost a hosted run adds: it imports no pydantic, no protocol
models, no runtime (``tests/test_startup_imports.py`` lists what it may import). Requests and
replies are the protocol's wire form, the same JSON a typed client would send; notifications
are kept as (method, params) dicts for ``roder_tui.ask_turn.Printer``. Secrets never reach this
process in a form it would have to redact: the host redacts what it sends.

Looking for a host costs one ``stat`` when none runs, so one-shot mode can always look.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import logging
import os
import select
import signal
import socket
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from roder_core import __version__, bounded_json
from roder_core.errors import RoderError
from roder_core.server.errors import RUNTIME_ERROR, RpcError
from roder_core.server.host_paths import HostPaths, config_stamp, environment_digest
from roder_core.server.wire import MAX_LINE, PROTOCOL_VERSION
from roder_core.settings.paths import RoderPaths
from roder_tui.ask_turn import ASK_QUEUE_SIZE, Wire

log = logging.getLogger(__name__)

T = TypeVar("T")
#: Bytes read from the host's socket at a time.
READ_SIZE = 256 * 1024
#: Seconds a one-shot waits for the host's ``host/status`` before running in process instead: a
#: host that is stopped (SIGSTOP, a debugger) or stuck must not hang every ``roder -p`` unsaid.
STATUS_TIMEOUT = 10.0


class HostSilent(RoderError):
    """The host did not answer a request in the time given."""


class HostSession:
    """One blocking connection to the host: a request waits for its reply, reading and keeping
    the wanted notifications that arrive meanwhile in order. Its coroutines never suspend (they
    block on the socket), so ``run_unsuspended`` drives ``roder_tui.ask_turn.drive`` over it without
    an event loop: a hosted run does not even import asyncio. When the connection ends, the
    waiting request fails and the notification stream ends."""

    shared = True

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = bytearray()
        self._skipping = False  # inside a line longer than MAX_LINE, dropped up to its newline
        self._ids = itertools.count(1)
        self._replies: dict[int, Wire] = {}
        self._ignored: set[int] = set()  # requests whose replies nobody waits for (turn/interrupt)
        self._wanted: Callable[[str], bool] | None = None  # None: not subscribed, notifications dropped
        self._events: deque[tuple[str, Wire]] = deque()
        self._behind = False
        self._ended: str | None = None
        self._wakeup: socket.socket | None = None  # readable when SIGINT arrived (``interrupting``)
        self._interrupt: Wire | None = None
        self._interrupted = False  # turn/interrupt sent: a second Ctrl+C ends the run

    @classmethod
    def connect(cls, path: Path) -> HostSession:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(path))
        except OSError:
            sock.close()
            raise
        return cls(sock)

    async def request(self, method: str, params: Wire | None = None, *, within: float | None = None) -> Any:
        """The reply's result; ``within`` seconds at most (else ``HostSilent``), or as long as
        the host takes (a turn's requests: Ctrl+C is watched meanwhile)."""
        request_id = self._send(method, params)
        deadline = None if within is None else time.monotonic() + within
        while request_id not in self._replies:
            if self._ended is not None:
                raise RoderError(f"the app server connection ended: {self._ended}")
            if not self._pump(deadline):
                raise HostSilent(f"it did not answer {method} in {within:g} s")
        reply = self._replies.pop(request_id)
        error = reply.get("error")
        if isinstance(error, dict):
            raise RpcError(int(error.get("code", RUNTIME_ERROR)), str(error.get("message", "")), error.get("data"))
        return reply.get("result")

    def _send(self, method: str, params: Wire | None) -> int:
        if self._ended is not None:
            raise RoderError(f"the app server connection is closed: {self._ended}")
        request_id = next(self._ids)
        message: Wire = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        try:
            self._sock.sendall(json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n")
        except OSError as exc:
            raise RpcError(RUNTIME_ERROR, f"the connection to the host broke: {exc}") from None
        return request_id

    def subscribe(self, wanted: Callable[[str], bool]) -> None:
        self._wanted = wanted

    async def events(self) -> AsyncIterator[tuple[str, Wire]]:
        while True:
            while self._events:
                yield self._events.popleft()
            if self._ended is not None:
                break
            self._pump()
        if self._behind:
            raise RoderError(f"the output fell {ASK_QUEUE_SIZE} notifications behind the host; the stream was cut")

    @contextlib.contextmanager
    def interrupting(self, thread_id: str) -> Iterator[None]:
        """Ctrl+C interrupts the thread's turn on the host (the run then ends as the turn does).
        The signal only writes to a wakeup socket, which ``_pump`` watches beside the host's."""
        wakeup, sink = socket.socketpair()
        wakeup.setblocking(False)
        sink.setblocking(False)
        previous_fd = signal.set_wakeup_fd(sink.fileno(), warn_on_full_buffer=False)
        previous = signal.signal(signal.SIGINT, lambda _signum, _frame: None)
        self._wakeup, self._interrupt = wakeup, {"threadId": thread_id}
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)
            signal.set_wakeup_fd(previous_fd)
            self._wakeup = self._interrupt = None
            wakeup.close()
            sink.close()

    def _pump(self, deadline: float | None = None) -> bool:
        """Wait for the host (or Ctrl+C), then take in what it sent; False when ``deadline``
        (monotonic) passed first. A second Ctrl+C, the host not having ended the turn after
        the first, ends the run (``KeyboardInterrupt``): a stuck host cannot hold the terminal."""
        watched = [self._sock] if self._wakeup is None else [self._sock, self._wakeup]
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        readable, _, _ = select.select(watched, [], [], left)
        if not readable:
            return deadline is None
        if self._wakeup is not None and self._wakeup in readable:
            with contextlib.suppress(BlockingIOError):
                signals = self._wakeup.recv(64)
                if signal.SIGINT in signals and self._interrupt is not None:
                    if self._interrupted:
                        sys.stderr.write("roder: the host had not ended the turn after the first Ctrl+C; stopped waiting\n")
                        raise KeyboardInterrupt
                    self._interrupted = True
                    self._ignored.add(self._send("turn/interrupt", self._interrupt))
        if self._sock not in readable:
            return True
        try:
            chunk = self._sock.recv(READ_SIZE)
        except OSError as exc:
            self._ended = str(exc) or type(exc).__name__
            return True
        if not chunk:
            self._ended = "the host closed the connection"
            return True
        self._take(chunk)
        return True

    def _take(self, chunk: bytes) -> None:
        """Complete lines of ``chunk`` (after what was buffered) become messages."""
        start = len(self._buffer)
        self._buffer += chunk
        while (end := self._buffer.find(b"\n", start)) >= 0:
            line, self._buffer[: end + 1] = bytes(self._buffer[:end]), b""
            start = 0
            if self._skipping:
                self._skipping = False
                log.warning("a message from the host was longer than %d bytes and was skipped", MAX_LINE)
            elif line.strip():
                self._receive(line)
        if len(self._buffer) > MAX_LINE:
            self._buffer.clear()
            self._skipping = True

    def _receive(self, line: bytes) -> None:
        try:
            message = bounded_json.loads(line)
        except ValueError:
            log.warning("the host sent a message that is not JSON; skipped")
            return
        if not isinstance(message, dict):
            return
        method = message.get("method")
        if isinstance(method, str):
            if self._wanted is not None and not self._behind and self._wanted(method):
                if len(self._events) >= ASK_QUEUE_SIZE:
                    self._behind, self._ended = True, "the output fell behind"
                else:
                    self._events.append((method, message.get("params") or {}))
            return
        request_id = message.get("id")
        if isinstance(request_id, int) and request_id not in self._ignored:
            self._replies[request_id] = message

    def close(self) -> None:
        self._sock.close()


def run_unsuspended(coroutine: Coroutine[Any, Any, T]) -> T:
    """The result of a coroutine that never suspends (one that awaits only a ``HostSession``),
    without an event loop."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    coroutine.close()
    raise RuntimeError("a hosted one-shot awaited something other than its host session")


def open_host_session(args: argparse.Namespace) -> tuple[HostSession, str] | None:
    """A session on a host that would run this one-shot exactly as this process would, with the
    policy mode the thread must get there; None (after one ``stat``) when there is none."""
    if os.environ.get("RODER_NO_HOST"):
        return None
    socket_path = HostPaths.from_env().running_socket()
    if socket_path is None:
        return None
    try:
        session = HostSession.connect(socket_path)
    except OSError:  # a socket left behind by a host that is gone
        return None
    try:
        info = run_unsuspended(session.request("host/status", within=STATUS_TIMEOUT))
        reason = incompatibility(info, args, Path.cwd(), os.environ)
    except HostSilent as exc:
        session.close()
        sys.stderr.write(f"roder: not using the host at {socket_path}: {exc} (stopped or stuck?); running here\n")
        return None
    except Exception:  # an old or broken host: answer in process
        session.close()
        return None
    if reason is not None:
        session.close()
        return None
    return session, str(args.mode or info["defaultMode"])


def incompatibility(info: Mapping[str, Any], args: argparse.Namespace, cwd: Path, env: Mapping[str, str]) -> str | None:
    """Why the host (its ``host/status`` result, wire form) would not run this one-shot as this
    process would, or None."""
    if (info["version"], info["protocolVersion"]) != (__version__, PROTOCOL_VERSION):
        return f"the host runs roder {info['version']} (protocol {info['protocolVersion']})"
    if Path(info["cwd"]) != cwd.resolve():
        return f"the host serves {info['cwd']}"
    trust = bool(getattr(args, "trust", False))
    if info["trusted"] != trust:  # one-shot runs trust a folder only when told to (--trust)
        return "the host trusts this folder" if info["trusted"] else "the host does not trust this folder"
    flags = info.get("flags") or {}
    for name in ("sandbox", "max_iterations"):
        if getattr(args, name, None) != flags.get(name):
            return f"the host was started with other --{name.replace('_', '-')}"
    if getattr(args, "profile", "developer") != info["profile"]:
        return f"the host runs profile {info['profile']}"
    for name in ("provider", "model"):  # given here, they choose the thread's; else the host's must be the config's
        if getattr(args, name, None) is None and flags.get(name) is not None:
            return f"the host was started with --{name} {flags[name]}"
    paths = RoderPaths.from_env(dict(env))
    if config_stamp(paths.config_file, cwd.resolve(), trust) != info["configStamp"]:
        return "the config changed since the host started"
    if environment_digest(env) != info["environmentDigest"]:
        return "provider keys or endpoints in this environment differ from the host's"
    return None
