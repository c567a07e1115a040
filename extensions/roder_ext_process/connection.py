"""JSON-RPC 2.0 over a child process's stdin and stdout, one message per line.

A reader thread owns the child's stdout, so the connection works from synchronous code (the
manifest handshake happens while the registry is built, before any event loop) and from any
event loop later (tool calls, engine streams). Each request gets a ``concurrent.futures.Future``;
async callers wrap it. A call cancelled by its caller sends ``$/cancelRequest`` so the
extension can stop. When the child exits, every call in flight fails with the exit status and
the end of what it wrote to stderr.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import json
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from roder_core import bounded_json

#: A line longer than this from the extension is a protocol error (it ends the connection).
MAX_LINE = 32 * 1024 * 1024
STDERR_TAIL = 40


class ExtensionCallError(Exception):
    """A call failed: the extension answered an error, exited, or did not answer in time."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class RpcConnection:
    """One running extension process and the calls in flight to it."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        on_notification: Callable[[str, dict[str, Any]], None],
        pass_fds: tuple[int, ...] = (),
    ) -> None:
        self.name = name
        self._on_notification = on_notification
        self._ids = itertools.count(1)
        self._pending: dict[int, concurrent.futures.Future[Any]] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._stderr: deque[str] = deque(maxlen=STDERR_TAIL)
        self.exit_reason: str | None = None
        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
            pass_fds=pass_fds,
        )
        self._stderr_reader = threading.Thread(target=self._drain_stderr, name=f"roder-ext-{name}-err", daemon=True)
        self._stderr_reader.start()
        threading.Thread(target=self._read, name=f"roder-ext-{name}-out", daemon=True).start()

    @property
    def alive(self) -> bool:
        return self.exit_reason is None and self.process.poll() is None

    # ------------------------------------------------------------------ calls

    def request(self, method: str, params: Mapping[str, Any]) -> tuple[int, concurrent.futures.Future[Any]]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        request_id = next(self._ids)
        with self._lock:
            if self.exit_reason is not None:
                future.set_exception(ExtensionCallError(self.exit_reason))
                return request_id, future
            self._pending[request_id] = future
        try:
            self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": dict(params)})
        except OSError as exc:
            self._fail_all(f"extension {self.name} cannot be written to: {exc.strerror or exc}")
        return request_id, future

    def notify(self, method: str, params: Mapping[str, Any]) -> None:
        with contextlib.suppress(OSError):
            self._send({"jsonrpc": "2.0", "method": method, "params": dict(params)})

    def call_sync(self, method: str, params: Mapping[str, Any], timeout: float) -> Any:
        request_id, future = self.request(method, params)
        return self.answer(request_id, future, method, timeout)

    def answer(
        self, request_id: int, future: concurrent.futures.Future[Any], method: str, timeout: float, deadline: float | None = None
    ) -> Any:
        """The answer to a request sent with ``request``: waited for ``timeout`` seconds, or with
        ``deadline`` (``time.monotonic``) until then, so requests to several processes can all be
        sent first and then waited for at once (the error still names ``timeout``)."""
        try:
            return future.result(max(deadline - time.monotonic(), 0.0) if deadline is not None else timeout)
        except concurrent.futures.TimeoutError:
            self._forget(request_id)
            raise ExtensionCallError(f"extension {self.name} did not answer {method} within {timeout:g} s") from None

    async def call(self, method: str, params: Mapping[str, Any], timeout: float) -> Any:
        """Await the answer; a cancelled caller tells the extension (``$/cancelRequest``)."""
        request_id, future = self.request(method, params)
        try:
            async with asyncio.timeout(timeout):
                return await asyncio.wrap_future(future)
        except TimeoutError:
            self._forget(request_id)
            raise ExtensionCallError(f"extension {self.name} did not answer {method} within {timeout:g} s") from None
        except asyncio.CancelledError:
            self._forget(request_id)
            self.notify("$/cancelRequest", {"id": request_id})
            raise

    def close(self) -> None:
        """End the process (its whole process group) and fail what is still in flight."""
        if self.process.poll() is None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()  # type: ignore[union-attr]
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(2)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._fail_all(f"extension {self.name} was stopped")

    def stderr_tail(self) -> str:
        return " | ".join(line for line in self._stderr if line)[-600:]

    # ------------------------------------------------------------------ plumbing

    def _send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")
        stdin = self.process.stdin
        assert stdin is not None
        with self._write_lock:
            stdin.write(data)
            stdin.flush()

    def _forget(self, request_id: int) -> None:
        with self._lock:
            self._pending.pop(request_id, None)

    def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        problem: str | None = None
        while True:
            line = stdout.readline(MAX_LINE + 1)
            if not line:
                break
            if len(line) > MAX_LINE:
                problem = f"extension {self.name} sent a line over {MAX_LINE} bytes"
                break
            try:  # nesting past bounded_json.MAX_DEPTH is refused before parsing
                message = bounded_json.loads(line)
            except bounded_json.JSONTooDeep as exc:
                problem = f"extension {self.name} sent a message refused: {exc.msg}"
                break
            except ValueError:
                problem = f"extension {self.name} wrote something that is not JSON-RPC to stdout: {line[:80]!r}"
                break
            if not isinstance(message, dict):
                problem = f"extension {self.name} sent a message that is not a JSON object"
                break
            self._dispatch(message)
        if problem is not None:  # the process is still running: end it before waiting for it
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
        code = self.process.wait()
        self._stderr_reader.join(1.0)  # what it said last explains the exit
        tail = self.stderr_tail()
        reason = problem or f"extension {self.name} exited with status {code}"
        self._fail_all(reason + (f" (stderr: {tail})" if tail and problem is None else ""))

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "id" in message and ("result" in message or "error" in message):
            with self._lock:
                future = self._pending.pop(message["id"], None) if isinstance(message["id"], int) else None
            if future is None or future.done():
                return
            error = message.get("error")
            if isinstance(error, dict):
                code = error.get("code")
                future.set_exception(
                    ExtensionCallError(str(error.get("message") or "error"), code if isinstance(code, int) else None)
                )
            else:
                future.set_result(message.get("result"))
            return
        method, params = message.get("method"), message.get("params")
        if isinstance(method, str):
            if "id" in message:  # the host serves no requests: say so instead of leaving it hanging
                with contextlib.suppress(OSError):
                    self._send(
                        {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": f"unknown method {method}"}}
                    )
                return
            self._on_notification(method, params if isinstance(params, dict) else {})

    def _drain_stderr(self) -> None:
        stderr = self.process.stderr
        assert stderr is not None
        for raw in iter(lambda: stderr.readline(8192), b""):
            self._stderr.append(raw.decode("utf-8", "replace").rstrip())

    def _fail_all(self, reason: str) -> None:
        with self._lock:
            if self.exit_reason is None:
                self.exit_reason = reason
            pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(ExtensionCallError(reason))
