"""A real OpenSSH server for the ssh runner tests: loopback only, throwaway keys, no system config.

``sshd -D -e -f <config>`` runs as a child of the test with a host key and an authorized user
key generated in a temporary folder; it accepts only that key, only for the user running the
tests (root or not), only on 127.0.0.1. Nothing under /etc is read or written: the config names
every file it needs. When sshd cannot start here the fixture skips with sshd's own words.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

SSHD = "/usr/sbin/sshd"
SFTP_SERVER_CANDIDATES = ("/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server", "/usr/libexec/sftp-server")


@dataclass
class Sshd:
    port: int
    user: str
    identity_file: Path
    known_hosts: Path
    process: asyncio.subprocess.Process
    log: list[str]
    #: Reads sshd's log for as long as it runs.
    drain: asyncio.Future[None] | None = None

    def runner_table(self, name: str, workspace: Path, **extra: str) -> str:
        """A ``[runners.NAME]`` table reaching this server."""
        lines = [
            f"[runners.{name}]",
            'kind = "ssh"',
            'host = "127.0.0.1"',
            f"port = {self.port}",
            f'user = "{self.user}"',
            f'identity_file = "{self.identity_file}"',
            f'known_hosts = "{self.known_hosts}"',
            f'workspace = "{workspace}"',
            *(f'{key} = "{value}"' for key, value in extra.items()),
        ]
        return "\n".join(lines) + "\n"

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.terminate()
            await self.process.wait()
        if self.drain is not None:
            await self.drain


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "roder-test", "-f", str(path)], check=True)


def why_not() -> str | None:
    """Why this machine cannot run the test server (None when it can)."""
    if not os.path.exists(SSHD):
        return f"{SSHD} is missing (apt-get install openssh-server)"
    if shutil.which("ssh-keygen") is None:
        return "ssh-keygen is missing (apt-get install openssh-client)"
    return None


async def start_sshd(folder: Path) -> Sshd:
    """Start the server and wait until it says it listens (its own log line, no sleeping)."""
    folder.mkdir(parents=True, exist_ok=True)
    host_key, user_key = folder / "host_key", folder / "user_key"
    _keygen(host_key)
    _keygen(user_key)
    authorized = folder / "authorized_keys"
    authorized.write_text(user_key.with_suffix(".pub").read_text())
    authorized.chmod(0o600)
    user = getpass.getuser()
    sftp = next((p for p in SFTP_SERVER_CANDIDATES if os.path.exists(p)), "internal-sftp")
    port = _free_port()
    config = folder / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {host_key}",
                f"PidFile {folder / 'sshd.pid'}",
                f"AuthorizedKeysFile {authorized}",
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "StrictModes no",
                "PermitRootLogin prohibit-password",
                f"AllowUsers {user}",
                f"Subsystem sftp {sftp}",
                "LogLevel VERBOSE",
                "",
            ]
        )
    )
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # privilege separation needs it (empty)
    process = await asyncio.create_subprocess_exec(
        SSHD, "-D", "-e", "-f", str(config), stdin=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    assert process.stderr is not None
    log: list[str] = []
    while True:
        line = (await asyncio.wait_for(process.stderr.readline(), 60)).decode(errors="replace")
        if not line:
            raise RuntimeError("sshd exited: " + "".join(log).strip())
        log.append(line)
        if "Server listening on" in line:
            break
    host_pub = host_key.with_suffix(".pub").read_text().split()
    known_hosts = folder / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")

    async def drain() -> None:  # keep reading its log so it never blocks on a full pipe
        assert process.stderr is not None
        while line := await process.stderr.readline():
            log.append(line.decode(errors="replace"))

    server = Sshd(port, user, user_key, known_hosts, process, log)
    server.drain = asyncio.ensure_future(drain())
    return server
