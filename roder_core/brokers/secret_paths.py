"""Paths the sandbox hides from commands: credentials, histories, Roder's own data, host sockets.

The whole filesystem is readable inside the sandbox (builds need compilers, libraries, caches),
so what must not be read is masked instead: a folder becomes an empty read-only folder, a file an
empty read-only file. The built-in list covers the usual credential stores and shell histories
in the user's home, Roder's data folder (stored API keys, threads, the memory database, the
audit log) and its config.toml, and the sockets of host services (Docker, D-Bus, the user's
runtime folder with gpg-agent and ssh-agent), and the machine's own secrets a root command could
read (``/etc/shadow``, SSH host keys). ``[sandboxing] deny_read`` adds to it.

A mask covers a path, so ``masks`` also finds the other paths that reach the same file:

- a mount of the same filesystem elsewhere (a bind mount of the secret's folder or of one
  above it, read from ``/proc/self/mountinfo``): each such alias that is the same file (same
  device and inode) is masked too;
- another name of a masked file (a hard link, ``st_nlink`` above the names masked): it cannot be
  found without searching the whole disk, so the sandbox is refused (``SecretAliased``) with
  the file named, until the link is removed or its other name is in ``deny_read``. This is
  checked for masked files and the files directly inside masked folders.

Inside the sandbox ``/proc`` is the sandbox's own (its own process namespace), so
``/proc/<pid>/root``, ``/proc/<pid>/cwd`` and ``/dev/fd`` lead only to the sandbox's view.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from roder_core.brokers import BrokerDenied

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


class SecretAliased(BrokerDenied):
    """A masked file has another name the sandbox cannot find (a hard link): refused, never
    run with the secret reachable."""


def masks(candidates: Iterable[Path], roots: Iterable[Path]) -> list[Path]:
    """The candidates to mask on this machine: existing ones, resolved (a symlink is masked at
    its target, so the link leads to nothing), and every other mount's path to the same file;
    without those holding a writable root (the workspace must stay visible) and without those
    under ``/tmp`` (private in the sandbox). Raises ``SecretAliased`` when a masked file has
    more names than are masked.

    Computed for every sandboxed command (a secret may appear between two), so on resolved
    path strings, with each folder resolved once per call (``_resolved``): ``pathlib``'s
    comparisons and ``realpath``'s walk of every candidate's folders cost more than the file
    system's answers here."""
    real_roots = [os.path.realpath(root) for root in roots]
    folders: dict[str, str] = {}
    found: dict[str, None] = {}
    for candidate in candidates:
        real = _resolved(os.fspath(candidate), folders)
        if real is not None and real not in ("/", "/tmp"):
            found[real] = None
    _refuse_unmasked_links(outermost(Path(real) for real in found))
    chosen: dict[str, None] = {}
    for real in [*found, *mount_aliases(list(found))]:
        if within(real, "/tmp") or any(within(root, real) for root in real_roots):
            continue
        chosen[real] = None
    # a folder masked hides everything below it: no need to mask those again
    return outermost(Path(real) for real in chosen)


def mount_aliases(paths: list[str]) -> list[str]:
    """Other paths to the same files through this mount namespace's other mounts of the same
    filesystem (a bind mount of a secret's folder, or of a folder above it, elsewhere): each
    checked to be the same file (device and inode) before it is returned."""
    mounts = _mounts()
    if len(mounts) < 2:
        return []
    aliases: list[str] = []
    for path in paths:
        try:
            target = os.lstat(path)
        except OSError:
            continue
        home = _mount_of(path, mounts)
        if home is None:
            continue
        device, root, point = home
        inner = root.rstrip("/") + path[len(point.rstrip("/")) :] or "/"  # the path inside its filesystem
        for other_device, other_root, other_point in mounts:
            if other_device != device or other_point == point:
                continue
            if within(inner, other_root):
                alias = (other_point.rstrip("/") + inner[len(other_root.rstrip("/")) :]) or "/"
                try:
                    seen = os.lstat(alias)
                except OSError:
                    continue
                if (seen.st_dev, seen.st_ino) == (target.st_dev, target.st_ino) and alias != path:
                    aliases.append(alias)
            elif within(other_root, inner):
                aliases.append(other_point)  # a folder inside the secret, mounted whole elsewhere
    return aliases


def _mounts() -> list[tuple[str, str, str]]:
    """(device, root inside the filesystem, mount point) of every mount this process sees,
    in mount order (a later mount on the same point covers an earlier one)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as info:
            lines = info.read().splitlines()
    except OSError:
        return []
    mounts = []
    for line in lines:
        fields = line.split(" ")
        if len(fields) > 4:
            mounts.append((fields[2], _unescape(fields[3]), _unescape(fields[4])))
    return mounts


def _unescape(field: str) -> str:
    """mountinfo's octal escapes (``\040`` for a space, ``\134`` for a backslash) decoded."""
    if "\\" not in field:
        return field
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def _mount_of(path: str, mounts: list[tuple[str, str, str]]) -> tuple[str, str, str] | None:
    """The mount ``path`` lies on: the deepest mount point holding it, the latest of equals."""
    best: tuple[str, str, str] | None = None
    for mount in mounts:
        if within(path, mount[2]) and (best is None or len(mount[2]) >= len(best[2])):
            best = mount
    return best


def _refuse_unmasked_links(masked: list[Path]) -> None:
    """``SecretAliased`` when a masked file (or a file directly inside a masked folder) has more
    names (hard links) than the masks cover: the others could be anywhere on its filesystem."""
    names: dict[tuple[int, int], set[str]] = {}
    links: dict[tuple[int, int], int] = {}

    def note(path: str, info: os.stat_result) -> None:
        if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
            key = (info.st_dev, info.st_ino)
            names.setdefault(key, set()).add(path)
            links[key] = info.st_nlink

    for path in map(os.fspath, masked):
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode):
            try:
                with os.scandir(path) as entries:
                    for entry in entries:
                        try:
                            note(entry.path, entry.stat(follow_symlinks=False))
                        except OSError:
                            continue
            except OSError:
                continue
        else:
            note(path, info)
    for key, count in links.items():
        if len(names[key]) < count:
            name = min(names[key])
            raise SecretAliased(
                f"{name} is a file the sandbox hides, and it has {count - len(names[key])} more name(s) elsewhere "
                "(a hard link) that it cannot hide; the command was not run. Remove the other link, or add it to "
                "[sandboxing] deny_read."
            )


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
