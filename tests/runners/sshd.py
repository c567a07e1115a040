"""A real OpenSSH server for the ssh runner tests: loopback only, throwaway keys, no system config.

``sshd -D -e -f <config>`` runs as a child of the test session with a host key and an
authorized user key generated in a temporary folder; it accepts only that key, only for the user
running the tests (root or not), only on 127.0.0.1. Nothing under /etc is read or written: the
config names every file it needs. One server serves every test of ``tests/runners`` (the
``sshd`` fixture of ``conftest.py``); each test brings its own remote workspace folder. When
sshd cannot start here the fixture skips with sshd's own words.

The server is a plain ``subprocess.Popen`` with a thread reading its log, not an asyncio
subprocess: each test has its own event loop, and the server outlives them all.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

SSHD = "/usr/sbin/sshd"
SFTP_SERVER_CANDIDATES = ("/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server", "/usr/libexec/sftp-server")


@dataclass
class Sshd:
    port: int
    user: str
    identity_file: Path
    known_hosts: Path
    process: subprocess.Popen[bytes]
    log: list[str] = field(default_factory=list)
    #: Reads sshd's log for as long as it runs.
    drain: threading.Thread | None = None

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

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=60)
        if self.drain is not None:
            self.drain.join(timeout=60)


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


def start_sshd(folder: Path) -> Sshd:
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
                # every test of the session shares this server: room for their connections
                "MaxStartups 100",
                "MaxSessions 100",
                "",
            ]
        )
    )
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # privilege separation needs it (empty)
    process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert process.stderr is not None
    server = Sshd(port, user, user_key, folder / "known_hosts", process)
    listening = threading.Event()

    def drain() -> None:  # keep reading its log so it never blocks on a full pipe
        assert process.stderr is not None
        for raw in process.stderr:
            line = raw.decode(errors="replace")
            server.log.append(line)
            if "Server listening on" in line:
                listening.set()
        listening.set()  # it exited: stop waiting

    server.drain = threading.Thread(target=drain, name="sshd-log", daemon=True)
    server.drain.start()
    if not listening.wait(60) or process.poll() is not None:
        server.stop()
        raise RuntimeError("sshd did not start: " + "".join(server.log).strip())
    host_pub = host_key.with_suffix(".pub").read_text().split()
    server.known_hosts.write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
    return server
