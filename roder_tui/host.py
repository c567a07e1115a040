"""Finding, starting and describing this user's background host (``roder serve``).

Shared by ``roder serve``, ``roder attach``, ``roder --detach`` and ``roder web``. One-shot mode
talks to a host with a client of its own that imports no protocol models (``roder_tui.ask_host``).
"""

from __future__ import annotations

import argparse
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from roder_core.server.host_paths import HostPaths

if TYPE_CHECKING:
    from roder_core.server.protocol_attach import HostStatusResult
    from roder_core.server.remote_client import RemoteAppClient

#: Seconds ``roder serve`` waits for a new host to say it is ready.
START_TIMEOUT = 60.0
#: Flags of ``add_runtime_flags`` a background host is started with: (attribute, flag).
RUNTIME_FLAGS = (
    ("provider", "--provider"),
    ("model", "--model"),
    ("mode", "--mode"),
    ("sandbox", "--sandbox"),
    ("profile", "--profile"),
    ("max_iterations", "--max-iterations"),
)


def roder_argv(*args: str) -> list[str]:
    """How Roder starts itself again (a background host, each ``roder web`` page's app):
    ``python -P -m roder_tui.cli ARGS``. These start in the project's folder, and a plain
    ``-m`` puts that folder first on ``sys.path``, so a repository's ``json.py`` or
    ``roder_tui/`` would be imported instead of Roder's own, on the host, unconfined, in any
    folder, trusted or not. ``-P`` (Python 3.11's safe path) leaves the folder out."""
    return [sys.executable, "-P", "-m", "roder_tui.cli", *args]


class HostStartError(Exception):
    """The background host did not come up; the message says why (its log's last lines)."""


async def connect(paths: HostPaths | None = None) -> RemoteAppClient | None:
    """A client of this user's running host, or None when none runs (or its folder is not
    private: then nobody should talk to it)."""
    socket = (paths or HostPaths.from_env()).running_socket()
    if socket is None:
        return None
    from roder_core.server.remote_client import HostUnreachable, RemoteAppClient

    try:
        return await RemoteAppClient.connect_unix(socket)
    except HostUnreachable:
        return None


async def status(client: RemoteAppClient) -> HostStatusResult:
    from roder_core.server.protocol_attach import HOST_STATUS

    return await client.call(HOST_STATUS)


def runtime_flags(args: argparse.Namespace) -> list[str]:
    """The shared runtime flags given on this command line, to pass on to a new host."""
    flags: list[str] = []
    for attribute, flag in RUNTIME_FLAGS:
        value = getattr(args, attribute, None)
        if value is not None and not (attribute == "profile" and value == "developer"):
            flags += [flag, str(value)]
    if getattr(args, "trust", False):
        flags.append("--trust")
    return flags


def start_background(flags: list[str], cwd: Path, paths: HostPaths | None = None) -> tuple[str, str]:
    """Start ``roder serve --foreground`` detached from this terminal (its own session, output
    to the host log) and wait until it listens; returns its socket path and what it announced
    for its user (the WebSocket's address and token with ``--remote``)."""
    paths = paths or HostPaths.from_env()
    paths.ensure_private()
    read_end, write_end = os.pipe()
    command = roder_argv("serve", "--foreground", "--ready-fd", str(write_end), *flags)
    with open(paths.log, "ab") as log:
        os.chmod(paths.log, 0o600)
        log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} roder serve in {cwd}\n".encode())
        log.flush()
        process = subprocess.Popen(
            command,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            pass_fds=(write_end,),
            start_new_session=True,  # a closed terminal or SSH session does not reach it
        )
    os.close(write_end)
    try:
        ready = _read_ready(read_end, START_TIMEOUT)
    finally:
        os.close(read_end)
    if ready.startswith("ready "):
        first, _, banner = ready.partition("\n")
        return first.removeprefix("ready ").strip(), banner
    code = process.poll()
    why = f"it exited with status {code}" if code is not None else f"it did not get ready in {START_TIMEOUT:.0f} s"
    raise HostStartError(f"the host did not start ({why}); its log {paths.log} ends with:\n{_tail(paths.log)}")


def _read_ready(fd: int, timeout: float) -> str:
    """What the host wrote before closing the pipe: its ready line and banner (nothing if it died)."""
    data = b""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        readable, _, _ = select.select([fd], [], [], left)
        if not readable:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8", "replace")


def _tail(path: Path, lines: int = 12) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def describe(info: HostStatusResult) -> str:
    """A few lines for people: what runs where, with which settings."""
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.started_at)) if info.started_at else "?"
    turns = ", ".join(sorted(info.active_turns)) or "none"
    return "\n".join(
        [
            f"roder host: running (pid {info.pid}, roder {info.version}) since {since}",
            f"  workspace: {info.cwd}",
            f"  socket:    {info.socket} (mode 0600, folder 0700)",
            f"  model:     {info.provider}/{info.model}; mode {info.mode}; sandbox {info.sandbox or 'default'}; "
            f"profile {info.profile}; folder {'trusted' if info.trusted else 'not trusted'}",
            f"  clients:   {info.clients}; threads with a running turn: {turns}",
        ]
    )
