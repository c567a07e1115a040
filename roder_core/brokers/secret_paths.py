"""Paths the sandbox hides from commands: credentials, histories, Roder's own data, host sockets.

The whole filesystem is readable inside the sandbox (builds need compilers, libraries, caches),
so what must not be read is masked instead: a folder becomes an empty read-only folder, a file an
empty read-only file. The built-in list covers the usual credential stores and shell histories
in the user's home, Roder's data folder (stored API keys, threads, the memory database, the
audit log) and its config.toml, and the sockets of host services (Docker, D-Bus, the user's
runtime folder with gpg-agent and ssh-agent), and the machine's own secrets a root command could
read (``/etc/shadow``, SSH host keys). ``[sandboxing] deny_read`` adds to it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

#: Relative to the home folder.
HOME_SECRETS = (
    ".ssh",
    ".ray",
    ".aws",
    ".azure",
    ".netrc",
    ".docker",
    ".gnupg",
    ".kube",
    ".password-store",
    ".config/gcloud",
    ".config/gh",
    ".config/hub",
    ".config/op",
    ".config/rclone",
    ".config/doctl",
    ".git-credentials",
    ".config/git/credentials",
    ".npmrc",
    ".yarnrc",
    ".pypirc",
    ".gem/credentials",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".terraform.d/credentials.tfrc.json",
    ".m2/settings.xml",
    ".pgpass",
    ".my.cnf",
    ".vault-token",
    ".config/roder",
    ".local/share/roder",
    ".bash_history",
    ".zsh_history",
    ".zhistory",
    ".histfile",
    ".sh_history",
    ".python_history",
    ".node_repl_history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
    ".rediscli_history",
    ".lesshst",
    ".local/share/fish/fish_history",
    ".local/share/recently-used.xbel",
)
#: Machine secrets a root command (uid 0 without capabilities still owns them) could read.
SYSTEM_SECRETS = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/security/opasswd",
    "/etc/ssh/ssh_host_rsa_key",
    "/etc/ssh/ssh_host_ecdsa_key",
    "/etc/ssh/ssh_host_ed25519_key",
    "/etc/ssh/ssh_host_dsa_key",
    "/etc/sudoers.d",
)
#: Host services' sockets and socket folders.
HOST_SOCKETS = (
    "/run/user",
    "/run/dbus",
    "/var/run/dbus",
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/docker",
    "/run/containerd",
    "/run/podman",
    "/run/snapd.socket",
    "/run/snapd-snap.socket",
    "/run/libvirt",
    "/run/systemd/private",
    "/run/systemd/journal",
    "/run/systemd/userdb",
    "/run/user-sockets",
)


def default_deny_read(home: Path, data_dir: Path | None = None, config_file: Path | None = None) -> list[Path]:
    """The built-in list for this home folder and Roder's own locations."""
    paths = [home / name for name in HOME_SECRETS]
    paths += [Path(p) for p in (*SYSTEM_SECRETS, *HOST_SOCKETS)]
    if data_dir is not None:
        paths.append(data_dir)
    if config_file is not None:
        paths.append(config_file)
    return paths


def expand(entries: Iterable[str], home: Path) -> list[Path]:
    """``[sandboxing] deny_read`` entries: ``~`` is the home folder; relative paths are refused
    by the config loader, so these are absolute."""
    out = []
    for entry in entries:
        text = str(home) + entry[1:] if entry == "~" or entry.startswith("~/") else entry
        out.append(Path(text))
    return out


def masks(candidates: Iterable[Path], roots: Iterable[Path]) -> list[Path]:
    """The candidates to mask on this machine: existing ones, resolved (a symlink is masked at
    its target, so the link leads to nothing), without those holding a writable root (the
    workspace must stay visible) and without those under ``/tmp`` (private in the sandbox).

    Computed for every sandboxed command (a secret may appear between two), so on resolved
    path strings, with each folder resolved once per call (``_resolved``): ``pathlib``'s
    comparisons and ``realpath``'s walk of every candidate's folders cost more than the file
    system's answers here."""
    real_roots = [os.path.realpath(root) for root in roots]
    folders: dict[str, str] = {}
    chosen: dict[str, None] = {}
    for candidate in candidates:
        real = _resolved(os.fspath(candidate), folders)
        if real is None or real in ("/", "/tmp") or within(real, "/tmp"):
            continue
        if any(within(root, real) for root in real_roots):
            continue
        chosen[real] = None
    # a folder masked hides everything below it: no need to mask those again
    return outermost(Path(real) for real in chosen)


def _resolved(path: str, folders: dict[str, str]) -> str | None:
    """``os.path.realpath(path)`` when ``path`` exists (a link: when its target does), else
    None. ``folders`` keeps the resolved folders of one call, each found with one ``lstat``."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    folder, name = os.path.split(path)
    if stat.S_ISLNK(mode) or name in ("", ".", ".."):
        real = os.path.realpath(path)
        return real if os.path.exists(real) else None
    return os.path.join(_folder(folder, folders), name)


def _folder(folder: str, folders: dict[str, str]) -> str:
    """``os.path.realpath(folder)`` for a folder that holds an existing entry."""
    real = folders.get(folder)
    if real is None:
        parent, name = os.path.split(folder)
        if parent == folder or name in ("", ".", ".."):
            real = os.path.realpath(folder)
        else:
            try:
                linked = stat.S_ISLNK(os.lstat(folder).st_mode)
            except OSError:
                linked = True  # changed under us: resolve it the long way
            real = os.path.realpath(folder) if linked else os.path.join(_folder(parent, folders), name)
        folders[folder] = real
    return real


def within(path: str, folder: str) -> bool:
    """Whether resolved absolute ``path`` is ``folder`` or lies inside it (``Path.is_relative_to``
    on normalized strings, without building paths)."""
    return path == folder or path.startswith(folder if folder.endswith("/") else folder + "/")


def outermost(paths: Iterable[Path]) -> list[Path]:
    """``paths`` outermost first, without those inside another (a folder covered covers all
    below it)."""
    outer: list[Path] = []
    kept: list[str] = []
    for path in sorted(set(paths), key=lambda p: (len(p.parts), str(p))):
        text = str(path)
        if not any(within(text, o) for o in kept):
            outer.append(path)
            kept.append(text)
    return outer
