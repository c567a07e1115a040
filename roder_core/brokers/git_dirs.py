"""Git directories a write must not touch or create, found without running git.

Git runs programs named in a repository's config (``core.fsmonitor``, hooks, ``core.hooksPath``,
filters, textconv...). A model that can write a git dir, or make a folder into one, gets code
run the next time anyone uses git there. So the file tools refuse:

- writes inside any folder that looks like a git dir (``HEAD`` + ``objects/`` + ``refs/``, or
  ``HEAD`` + ``commondir`` for a linked worktree's), at any depth: the workspace's ``.git``, a
  worktree's or submodule's git dir wherever a ``gitdir:`` file points, a bare repository, a
  ``commondir`` target;
- writes that would make a folder look like one (the last of ``HEAD``, ``objects``, ``refs``,
  ``commondir``);
- files whose text starts with ``gitdir:`` (a pointer git follows to a planted git dir);
- writes inside folders and to files a repository's config names as programs to run
  (``core.hooksPath``, and ``core.fsmonitor``, ``core.sshCommand``, filters, textconv, ...
  when their value is a path), for every repository that contains the target, and to the files
  it includes (``include.path``, ``includeIf.*.path``: config that can name programs too).

The tree is read through a ``GitProbe``: this machine's by default, a runner's files through
its transport (``runner_fs.TransportProbe``), so both file brokers refuse the same writes.

``.git`` itself is also a protected name (``protected_names``), so ``sub/.git/hooks`` is refused
by name before any of this runs.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Protocol

#: The names whose presence together makes a folder a git dir (``is_git_dir_shape``).
GIT_MARKERS = ("HEAD", "objects", "refs", "commondir")


@lru_cache(maxsize=1)
def _config_patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """Config keys whose value is a program (or folder of programs) git runs; a section header; a
    ``key = value`` line. Compiled when a config is first read, not at start-up (about 5 ms)."""
    program_keys = re.compile(
        r"^(core\.(hookspath|fsmonitor|sshcommand|editor|pager|askpass|gitproxy)|sequence\.editor|gpg\.program|"
        r"gpg\.\w+\.program|credential\.helper|credential\..*\.helper|diff\..*\.(textconv|command)|"
        r"merge\..*\.driver|filter\..*\.(clean|smudge|process)|uploadpack\.packobjectshook)$"
    )
    section = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\]\s*(.*)$')
    entry = re.compile(r"^\s*([A-Za-z][A-Za-z0-9-]*)\s*(?:=\s*(.*))?$")
    return program_keys, section, entry


class GitProbe(Protocol):
    """What the rules below need to know about a folder tree: this machine's (``LOCAL``), or a
    runner's through its file transport, so both file brokers refuse the same writes."""

    def exists(self, path: Path) -> bool:
        """Whether anything is there (a dangling symlink counts)."""
        ...

    def is_dir(self, path: Path) -> bool:
        """A folder, or a symlink to one."""
        ...

    def is_file(self, path: Path) -> bool:
        """A regular file, or a symlink to one."""
        ...

    def read(self, path: Path, limit: int) -> str:
        """The start of a file's text; empty when it cannot be read."""
        ...

    def user_configs(self) -> list[Path]:
        """The global and system git configs of the user git runs as there."""
        ...


class LocalProbe:
    """``GitProbe`` of this machine."""

    def exists(self, path: Path) -> bool:
        return os.path.lexists(path)

    def is_dir(self, path: Path) -> bool:
        return path.is_dir()

    def is_file(self, path: Path) -> bool:
        return path.is_file()

    def read(self, path: Path, limit: int) -> str:
        return read_git_file(path, limit)

    def user_configs(self) -> list[Path]:
        return _user_configs()


LOCAL = LocalProbe()


def is_git_dir_shape(names: set[str]) -> bool:
    """Git's test, minus parsing HEAD: a HEAD plus objects/ and refs/, or plus a ``commondir``
    file (a linked worktree's git dir, whose objects and refs live in the common dir)."""
    return "HEAD" in names and ({"objects", "refs"} <= names or "commondir" in names)


def _markers(folder: Path, probe: GitProbe) -> set[str]:
    try:
        return {name for name in GIT_MARKERS if probe.exists(folder / name)}
    except OSError:
        return set()


def looks_like_git_dir(folder: Path, probe: GitProbe = LOCAL) -> bool:
    return is_git_dir_shape(_markers(folder, probe))


def would_look_like_git_dir(folder: Path, new_name: str, probe: GitProbe = LOCAL) -> bool:
    """Whether creating ``new_name`` in ``folder`` makes it look like a git dir."""
    return new_name in GIT_MARKERS and completes_git_dir(_markers(folder, probe), new_name)


def completes_git_dir(present: set[str], new_name: str) -> bool:
    """Whether adding ``new_name`` to a folder holding the markers ``present`` gives it a git
    dir's shape (the test of both file brokers, whatever reaches the folder's names)."""
    return new_name in GIT_MARKERS and is_git_dir_shape(present | {new_name})


def gitdir_pointer(data: bytes) -> bool:
    """A ``.git`` file's content (``gitdir: <path>``), whatever the file is called."""
    return data.lstrip()[:7].lower() == b"gitdir:"


def read_git_file(path: Path, limit: int = 256 * 1024) -> str:
    """The start of a git file's text (a config, an included file, ``commondir``, a ``.git``
    pointer); empty when it is missing or not a regular file. Opened without blocking: a FIFO
    planted where git config points (an include not made yet) would otherwise hang Roder in
    the open, before every command and file write."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb") as handle:
            fd = -1
            return handle.read(limit).decode("utf-8", errors="replace")
    except OSError:
        return ""
    finally:
        if fd >= 0:
            os.close(fd)


def _git_dir_of(worktree: Path, probe: GitProbe) -> Path | None:
    """The git dir of a folder holding ``.git`` (a folder, or a ``gitdir:`` file)."""
    dot_git = worktree / ".git"
    if probe.is_dir(dot_git):
        return dot_git
    if probe.is_file(dot_git):
        text = probe.read(dot_git, 4096).strip()
        if text.lower().startswith("gitdir:"):
            target = Path(text[7:].strip())
            return Path(os.path.normpath(worktree / target))
    return None


def config_entries(text: str) -> Iterator[tuple[str, str, str]]:
    """``(section, key, value)`` of every ``key = value`` of a git config; ``section`` is the
    lowercased section with its subsection (``filter.evil``, ``includeif.gitdir:~/w/``)."""
    _keys, section_line, entry_line = _config_patterns()
    section = ""
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].split(";", 1)[0] if '"' not in raw else raw
        header = section_line.match(line)
        if header:
            name, sub, rest = header.group(1), header.group(2), header.group(3)
            section = name.lower() + (f".{sub}" if sub is not None else "")
            line = rest
            if not line.strip():
                continue
        entry = entry_line.match(line)
        if entry and entry.group(2) is not None:
            yield section, entry.group(1).lower(), _config_value(entry.group(2))


def _config_value(raw: str) -> str:
    """A value as git reads it: quotes removed, backslash escapes read, an unquoted ``#`` or
    ``;`` starting a comment, outer blanks dropped."""
    out: list[str] = []
    quoted = False
    chars = iter(raw)
    for char in chars:
        if char == "\\":
            escaped = next(chars, "")
            out.append({"n": "\n", "t": "\t", "b": "\b"}.get(escaped, escaped))
        elif char == '"':
            quoted = not quoted
        elif char in "#;" and not quoted:
            break
        else:
            out.append(char)
    return "".join(out).strip()


def config_programs(text: str, base: Path) -> list[Path]:
    """Paths named by program-valued keys of a git config (relative ones resolved from ``base``)."""
    program_keys = _config_patterns()[0]
    found: list[Path] = []
    for section, name, value in config_entries(text):
        key = f"{section}.{name}"
        if not program_keys.match(key):
            continue
        program = value.lstrip("!").split()[0] if value.lstrip("!").split() else ""
        if not program or ("/" not in program and not key.endswith("hookspath")):
            continue
        found.append(Path(os.path.normpath(base / os.path.expanduser(program))))
    return found


def config_includes(text: str, config: Path) -> list[Path]:
    """Files a git config includes (``include.path``, ``includeIf.*.path``; relative ones from
    the including file's folder, as git reads them): config too, so as able to name programs."""
    found: list[Path] = []
    for section, name, value in config_entries(text):
        if name == "path" and section.split(".", 1)[0] in ("include", "includeif") and value:
            found.append(Path(os.path.normpath(config.parent / os.path.expanduser(value))))
    return found


@lru_cache(maxsize=256)
def _config_cached(config: str, base: str, _stamp: tuple[int, int]) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    text = read_git_file(Path(config))
    return tuple(config_programs(text, Path(base))), tuple(config_includes(text, Path(config)))


def _config_refs(config: Path, base: Path, probe: GitProbe) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """The program paths and the included files a config names."""
    if probe is not LOCAL:  # nothing to key a cache on: read it
        text = probe.read(config, 256 * 1024)
        return tuple(config_programs(text, base)), tuple(config_includes(text, config))
    try:
        st = os.stat(config)
    except OSError:
        return (), ()
    return _config_cached(str(config), str(base), (st.st_mtime_ns, st.st_size))


#: How deep git follows includes (its own limit).
MAX_INCLUDE_DEPTH = 10


def _user_configs() -> list[Path]:
    """The global and system git configs: a ``core.hooksPath = .githooks`` there names a folder
    in every repository."""
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return [Path(os.path.expanduser("~/.gitconfig")), Path(xdg) / "git" / "config", Path("/etc/gitconfig")]


def follow_includes(configs: Iterable[Path], included: Callable[[Path], Iterable[Path]]) -> list[Path]:
    """``configs`` and every file they include (``included`` lists a config's includes), each
    once, as deep as git follows includes."""
    reached: list[Path] = []
    pending = [(config, 0) for config in configs]
    while pending:
        config, depth = pending.pop(0)
        if config in reached:
            continue
        reached.append(config)
        if depth < MAX_INCLUDE_DEPTH:
            pending.extend((path, depth + 1) for path in included(config))
    return reached


def config_references(configs: Iterable[Path], worktree: Path, probe: GitProbe = LOCAL) -> list[tuple[Path, str]]:
    """What these git configs make git run or read as more config, as (path, why) pairs: the
    paths program-valued keys name (``core.hooksPath`` and the like; relative ones from
    ``worktree``) and the files they include, whose own references count in turn, as deep as
    git follows includes. The one reading of a repository's config for the file tools
    (``git_dirs_around``) and the sandbox (``protected_names.config_paths``)."""
    found: list[tuple[Path, str]] = []
    for config in follow_includes(configs, lambda config: _config_refs(config, worktree, probe)[1]):
        programs, included = _config_refs(config, worktree, probe)
        found.extend((program, f"a program path in {config}") for program in programs)
        found.extend((path, f"a config file {config} includes") for path in included)
    return found


def git_dirs_around(target: Path, root: Path, probe: GitProbe = LOCAL) -> list[tuple[Path, str]]:
    """Git dirs (and config-named program paths) that protect ``target``: for every folder from
    the filesystem root down to ``target``'s parent that holds a ``.git``, its git dir, that git
    dir's ``commondir``, the files its config includes (and theirs) and the paths any of them
    names as programs; plus every ancestor inside
    ``root`` that looks like a git dir itself. Returns (path, why) pairs."""
    found: list[tuple[Path, str]] = []
    folder = target.parent
    chain = [folder, *folder.parents]
    for ancestor in chain:
        git_dir = _git_dir_of(ancestor, probe)
        if git_dir is None:
            continue
        found.append((git_dir, f"the git dir of {ancestor}"))
        common = probe.read(git_dir / "commondir", 4096).strip()
        dirs = [git_dir]
        if common:
            common_dir = Path(os.path.normpath(git_dir / common))
            found.append((common_dir, f"the common git dir of {ancestor}"))
            dirs.append(common_dir)
        found.extend(config_references([*(d / "config" for d in dirs), *probe.user_configs()], ancestor, probe))
    for ancestor in chain:
        if ancestor == root or not ancestor.is_relative_to(root):
            break
        if looks_like_git_dir(ancestor, probe):
            found.append((ancestor, "a git directory (HEAD with objects/ and refs/, or with commondir)"))
    return found


def git_refusal(target: Path, root: Path, *, probe: GitProbe = LOCAL) -> str | None:
    """Why writing ``target`` (a real, absolute path under ``root``) would touch or plant a git
    dir or a program git runs, or None; ``probe`` reads the tree (this machine's by default).
    What the bytes written say is ``pointer_refusal``'s, which needs no walk."""
    for protected, why in git_dirs_around(target, root, probe):
        if target == protected or target.is_relative_to(protected):
            return f"{protected} is {why}"
    if would_look_like_git_dir(target.parent, target.name, probe):
        return f"creating {target.name} would make {target.parent} look like a git directory"
    return None


def pointer_refusal(data: bytes) -> str | None:
    """Why writing ``data`` anywhere would plant a git-dir pointer, or None."""
    if gitdir_pointer(data):
        return "a file starting with 'gitdir:' points git at another git directory"
    return None
