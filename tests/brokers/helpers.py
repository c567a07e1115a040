"""Helpers for broker and security tests: unique markers and orphan checks through /proc, and
loopback HTTP servers."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from roder_core.brokers.sandbox import probe_bubblewrap

BWRAP = probe_bubblewrap()
needs_bwrap = pytest.mark.skipif(not BWRAP.works, reason=f"bubblewrap unusable here: {BWRAP.reason}")


def marker() -> str:
    return f"roder_marker_{uuid.uuid4().hex[:12]}"


def running(mark: str) -> list[int]:
    """PIDs whose command line mentions ``mark`` (zombies excluded)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if mark.encode() in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def assert_gone(mark: str, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not running(mark):
            return
        time.sleep(0.05)
    pids = running(mark)
    for pid in pids:  # do not leak them into other tests
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    raise AssertionError(f"orphan processes survived: {pids}")


class QuietHandler(BaseHTTPRequestHandler):
    """A test HTTP handler that does not log, with a one-call reply."""

    def reply(self, body: bytes, content_type: str = "text/plain", status: int = 200) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class Reachable(QuietHandler):
    """Answers every GET with ``reachable``: what a network probe must never see from a sandbox."""

    def do_GET(self) -> None:
        self.reply(b"reachable")


@contextlib.contextmanager
def outside_folder(prefix: str) -> Iterator[Path]:
    """A folder outside the workspace and outside /tmp (the sandbox replaces /tmp), on disk."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir="/var/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[int]:
    """A loopback HTTP server on a free port for the duration of the block; yields the port."""
    server = HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
