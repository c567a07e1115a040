"""The filesystem broker: workspace-scoped file access for tools.

Every path is resolved (``~``, ``..`` and symlinks, via ``realpath``) before any decision, so a
symlinked file or folder that points outside the workspace is refused like an absolute path
would be. Writes are refused for protected names at any depth (``protected_names``), for git
dirs and what git runs (``git_dirs``), and for hard-linked files, whose other names may live
anywhere.

Resolving is not enough against a process that swaps a folder for a symlink between the check
and the write, so every open, create, rename and unlink happens relative to a directory fd
reached by walking the resolved path from its root one component at a time with
``O_NOFOLLOW``: a component that has become a symlink fails the walk (ELOOP) instead of being
followed out of the workspace. Writes are atomic (temporary file in the same folder, then a
rename relative to that folder's fd), so a crash never leaves a half-written file. A path that
vanishes or changes while being written fails that call with a clear error.
"""

from __future__ import annotations

import contextlib
import errno
import heapq
import os
import secrets
import stat as stat_mod
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from roder_core.brokers import BrokerDenied, FileInfo, FileKind
from roder_core.brokers.content_gate import ContentGate
from roder_core.brokers.file_glob import (
    newest_keys,
    pattern_regex,
    ripgrep_files,
    ripgrep_query,
    walk_matches,
)
from roder_core.brokers.fs_policy import DEFAULT_GRANTS, FsPolicy
from roder_core.brokers.git_dirs import git_refusal, would_look_like_git_dir
from roder_core.brokers.gitignore import IgnoreMatcher
from roder_core.brokers.protected_names import PROTECTED_DIRS, PROTECTED_FILES, protected_reason

__all__ = ["PROTECTED_DIRS", "PROTECTED_FILES", "WorkspaceFileSystem", "protected_reason"]

AuditFn = Callable[[str, dict[str, Any]], None]
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
#: Errors a walk gets when a component is (or became) a symlink or a file.
_SWAPPED = (errno.ELOOP, errno.ENOTDIR, errno.EMLINK)


def settled_realpath(path: str | os.PathLike[str]) -> Path:
    """``realpath`` that survives a path changing under it: ``os.path.realpath`` raises when a
    component flips between a symlink and a folder mid-walk (EINVAL, ENOENT from readlink).
    Retries a few times, then raises a BrokerDenied that says the path keeps changing."""
    for _ in range(4):
        try:
            return Path(os.path.realpath(path))
        except OSError:
            continue
    raise BrokerDenied(f"{path}: the path keeps changing (a folder is being swapped for a symlink?); try again")


def _kind(mode: int) -> FileKind:
    if stat_mod.S_ISLNK(mode):
        return "symlink"
    if stat_mod.S_ISDIR(mode):
        return "dir"
    if stat_mod.S_ISREG(mode):
        return "file"
    return "other"


class WorkspaceFileSystem:
    """``FileSystemBroker`` for one workspace (plus extra roots) and one extension's grants:
    the I/O on this machine; every decision is its ``FsPolicy``'s (``fs_policy``)."""

    def __init__(
        self,
        workspace: Path,
        *,
        extra_roots: Iterable[Path] = (),
        capabilities: frozenset[str] = DEFAULT_GRANTS,
        audit: AuditFn | None = None,
        extension_id: str = "",
        hidden: Iterable[Path] = (),
        gate: ContentGate | None = None,
    ) -> None:
        self.workspace = Path(os.path.realpath(workspace))
        self.policy = FsPolicy(
            self.workspace,
            roots=(Path(os.path.realpath(os.path.expanduser(r))) for r in extra_roots),
            capabilities=capabilities,
            audit=audit,
            extension_id=extension_id,
            hidden=(Path(os.path.realpath(h)) for h in hidden),
            gate=gate,
        )
        self.roots = self.policy.roots
        self.gate = gate

    def _lexical(self, path: str) -> Path:
        expanded = Path(self.policy.check_text(path))
        return expanded if expanded.is_absolute() else self.workspace / expanded

    def resolve(self, path: str, *, write: bool = False) -> Path:
        """The real path for ``path``, or BrokerDenied (escape, Roder's own folders, protected
        for writes, no grant, the content gate for reads)."""
        return self._admit(path, write=write)

    def _admit(self, path: str, *, write: bool, data: bytes | None = None) -> Path:
        """``resolve``, with the bytes a write would put there (refused if a git-dir pointer)."""
        self.policy.check_capability(path, write=write)
        lexical = self._lexical(path)
        return self.policy.admit(path, lexical, settled_realpath(lexical), write=write, git=git_refusal, data=data)

    def may_withhold(self) -> bool:
        return self.policy.may_withhold()

    def withheld(self, path: str) -> str | None:
        """Why the content of ``path`` (as a search printed it) must not reach the model, or None."""
        lexical = self._lexical(path)
        try:
            st = os.lstat(lexical)
        except OSError:
            st = None
        links = st.st_nlink if st is not None and stat_mod.S_ISREG(st.st_mode) else None
        return self.policy.withheld(path, lexical, None, links)

    def _resolve_entry(self, path: str) -> Path:
        """For delete/move: the directory entry itself (a symlink is removed, not its target)."""
        self.policy.check_capability(path, write=True)
        lexical = Path(os.path.normpath(self._lexical(path)))
        return self.policy.admit_entry(path, lexical, settled_realpath(lexical.parent) / lexical.name, git=git_refusal)

    # ------------------------------------------------------------------ race-free walking

    @contextlib.contextmanager
    def _folder_fd(self, path: str, folder: Path, *, create: bool = False) -> Iterator[int]:
        """A directory fd for ``folder`` (a resolved path under a root), reached from the root
        one component at a time without following symlinks; missing folders are created when
        ``create`` (never one that would complete a git dir). A component swapped for a
        symlink or a file on the way is refused, not followed."""
        root = self.policy.inside(path, folder, folder, "write")
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
        try:
            here = root
            for part in folder.relative_to(root).parts:
                try:
                    nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise FileNotFoundError(f"{path}: no such folder {self.display(here / part)}") from None
                    self.policy.check_new_folder(path, here, part, would_look_like_git_dir(here, part))
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o755, dir_fd=fd)
                    nxt = self._open_child_dir(path, fd, part, here)
                except OSError as exc:
                    if exc.errno in _SWAPPED:
                        raise self.policy.changed(path, here / part) from None
                    raise
                os.close(fd)
                fd, here = nxt, here / part
            yield fd
        finally:
            os.close(fd)

    def _open_child_dir(self, path: str, fd: int, part: str, here: Path) -> int:
        try:
            return os.open(part, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            raise FileNotFoundError(f"{path}: {self.display(here / part)} vanished while being created") from None
        except OSError as exc:
            if exc.errno in _SWAPPED:
                raise self.policy.changed(path, here / part) from None
            raise

    def display(self, path: Path) -> str:
        return self.policy.display(path)

    # ------------------------------------------------------------------ reading

    def exists(self, path: str) -> bool:
        return self.resolve(path).exists()

    def stat(self, path: str) -> FileInfo:
        real = self.resolve(path)
        try:
            st = real.stat()
        except FileNotFoundError:
            raise FileNotFoundError(f"{path}: no such file or folder") from None
        return FileInfo(real, self.display(real), _kind(st.st_mode), st.st_size, st.st_mtime, st.st_nlink)

    def open_read(self, path: str) -> BinaryIO:
        """Open a regular file for reading (no FIFOs or devices, no hard-linked files), through
        directory fds so a folder swapped for a symlink after the check is not followed."""
        real = self.resolve(path)
        if real.is_dir():  # said before opening its parent, which for a granted root is outside
            self.policy.check_readable(path, "dir", None)
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        try:
            with self._folder_fd(path, real.parent) as folder:
                fd = os.open(real.name, flags, dir_fd=folder)
        except FileNotFoundError:
            raise FileNotFoundError(f"{path}: no such file") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # the last component became a symlink after resolve
                self.policy.check_readable(path, "symlink", None)
            if exc.errno == errno.ENXIO:  # a socket (open never takes one): said as for a FIFO
                self.policy.check_readable(path, "other", None)
            raise
        try:
            st = os.fstat(fd)
            self.policy.check_readable(path, _kind(st.st_mode), st.st_nlink)
            os.set_blocking(fd, True)
            return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise

    def read_bytes(self, path: str, *, max_bytes: int | None = None) -> bytes:
        with self.open_read(path) as handle:
            return handle.read() if max_bytes is None else handle.read(max_bytes)

    # ------------------------------------------------------------------ writing

    def write_bytes(self, path: str, data: bytes) -> Path:
        real = self._admit(path, write=True, data=data)
        with self._folder_fd(path, real.parent, create=True) as folder:
            st = self._entry_stat(path, folder, real.name)
            if st is None:
                self.policy.check_writable(path, real, None, None)
            else:
                self.policy.check_writable(path, real, _kind(st.st_mode), st.st_nlink)
            mode = 0o644 if st is None else stat_mod.S_IMODE(st.st_mode)
            tmp = f".{real.name}.roder-{secrets.token_hex(4)}.tmp"
            with self._vanishing(path, real.parent):
                fd = os.open(
                    tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600, dir_fd=folder
                )
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fchmod(handle.fileno(), mode)
                    os.fsync(handle.fileno())
                with self._vanishing(path, real.parent):
                    os.replace(tmp, real.name, src_dir_fd=folder, dst_dir_fd=folder)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=folder)
                raise
        self.policy.wrote(real, len(data), created=st is None)
        return real

    @contextlib.contextmanager
    def _vanishing(self, path: str, folder: Path) -> Iterator[None]:
        """Name the folder when it was removed or replaced while Roder held it open (creating
        or renaming in a deleted folder fails with ENOENT)."""
        try:
            yield
        except FileNotFoundError:
            raise FileNotFoundError(
                f"{path}: the folder {self.display(folder)} was removed or replaced while Roder was writing; nothing was written"
            ) from None

    def _entry_stat(self, path: str, folder: int, name: str) -> os.stat_result | None:
        try:
            return os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def mkdir(self, path: str) -> Path:
        real = self.resolve(path, write=True)
        with self._folder_fd(path, real, create=True):
            pass
        self.policy.made_folder(real)
        return real

    def delete(self, path: str) -> Path:
        entry = self._resolve_entry(path)
        with self._folder_fd(path, entry.parent) as folder:
            st = self._entry_stat(path, folder, entry.name)
            if st is None:
                raise FileNotFoundError(f"{path}: no such file")
            self.policy.check_deletable(path, _kind(st.st_mode))
            with self._vanishing(path, entry.parent):
                os.unlink(entry.name, dir_fd=folder)
        self.policy.deleted(entry)
        return entry

    def move(self, source: str, target: str) -> Path:
        src = self._resolve_entry(source)
        dst = self.resolve(target, write=True)
        with self._folder_fd(source, src.parent) as src_folder:
            if self._entry_stat(source, src_folder, src.name) is None:
                raise FileNotFoundError(f"{source}: no such file")
            with self._folder_fd(target, dst.parent, create=True) as dst_folder:
                found = self._entry_stat(target, dst_folder, dst.name)
                self.policy.check_move_target(target, None if found is None else _kind(found.st_mode))
                try:
                    with self._vanishing(source, src.parent):
                        os.rename(src.name, dst.name, src_dir_fd=src_folder, dst_dir_fd=dst_folder)
                except OSError as exc:
                    if exc.errno != errno.EXDEV:
                        raise
                    self.write_bytes(target, self.read_bytes(source))
                    os.unlink(src.name, dir_fd=src_folder)
        self.policy.moved(src, dst)
        return dst

    # ------------------------------------------------------------------ listing

    def _info(self, entry: os.DirEntry[str], folder: Path) -> FileInfo:
        st = entry.stat(follow_symlinks=False)
        real = folder / entry.name
        return FileInfo(real, self.display(real), _kind(st.st_mode), st.st_size, st.st_mtime, st.st_nlink)

    def _matcher_for(self, start: Path) -> tuple[Path, IgnoreMatcher]:
        """Ignore rules that apply at ``start``: root .git/info/exclude and every .gitignore on
        the way from the root down to ``start``."""
        root = self.policy.root_of(start) or self.workspace
        return root, self.policy.ignore_matcher(root, start, lambda name: _read_text(root / name))

    def list_dir(self, path: str, *, respect_gitignore: bool = True, withheld: list[str] | None = None) -> list[FileInfo]:
        """Entries of a folder, listed through a directory fd (a folder swapped for a symlink
        after the check is refused, not followed); entries the content gate refuses are left
        out (and named in ``withheld``)."""
        real = self.resolve(path)
        if not real.is_dir():
            raise NotADirectoryError(f"{path} is not a folder" if real.exists() else f"{path}: no such folder")
        root, matcher = self._matcher_for(real)
        entries: list[FileInfo] = []
        with self._folder_fd(path, real) as folder, os.scandir(folder) as scan:
            for entry in scan:
                info = self._info(entry, real)
                if self.policy.shown(info, root, matcher if respect_gitignore else None, withheld):
                    entries.append(info)
        entries.sort(key=lambda e: (e.kind != "dir", e.display))
        return entries

    def walk(self, path: str, *, respect_gitignore: bool = True, withheld: list[str] | None = None) -> Iterator[FileInfo]:
        """Files below ``path`` (depth first, sorted), skipping .git, ignored paths and never
        following symlinked folders: the walk descends by directory fds with ``O_NOFOLLOW``.
        Files and folders the content gate refuses are left out (and named in ``withheld``)."""
        real = self.resolve(path)
        if real.is_file():
            yield FileInfo(real, self.display(real), "file", real.stat().st_size, real.stat().st_mtime)
            return
        root, matcher = self._matcher_for(real)
        with self._folder_fd(path, real) as folder:
            yield from self._walk(folder, real, root, matcher, respect_gitignore, withheld)

    def find_files(self, path: str, pattern: str, *, limit: int, withheld: list[str] | None = None) -> tuple[list[FileInfo], int]:
        """Files below ``path`` matching ``pattern``, newest first: ripgrep lists the candidates
        from the pattern's literal folder (``file_glob``), only the matches are stat'ed, and only
        the ``limit`` shown become ``FileInfo``s. Without ripgrep, the broker's own walk. Files the
        content gate refuses are left out and named in ``withheld``."""
        real = self.resolve(path)
        query = ripgrep_query(pattern)
        start = real / query.literal if query.literal else real
        if not real.is_dir() or (query.literal and os.path.realpath(start) != str(start)):
            # a file, or a literal folder that is missing or a symlink (never followed)
            return walk_matches(self, path, pattern, limit, withheld)
        root, matcher = self._matcher_for(start)
        below = real.relative_to(root).as_posix()
        if query.literal and matcher.ignored(start.relative_to(root).as_posix(), True, below=below):
            return [], 0  # the pattern names an ignored folder (the folder asked for is searched as asked)
        if self.policy.is_hidden(start):
            return [], 0
        listed = ripgrep_files(start, max_depth=query.max_depth, name=query.name)
        if listed is None:
            return walk_matches(self, path, pattern, limit, withheld)
        if not query.exact:
            regex, skip = pattern_regex(pattern), len(str(real)) + 1
            listed = [absolute for absolute in listed if regex.match(absolute[skip:])]
        if any(h == start or h.is_relative_to(start) or start.is_relative_to(h) for h in self.policy.hidden):
            listed = [absolute for absolute in listed if not self.policy.is_hidden(Path(absolute))]
        if self.policy.may_withhold():  # asked once: with no mask or read rule, nothing is refused
            # ripgrep lists regular files only, never through a symlink
            listed = [absolute for absolute in listed if self.policy.gated(absolute, "file", withheld)]
        stamped = newest_keys(listed)
        shown = []
        for _, absolute in heapq.nsmallest(limit, stamped):
            with contextlib.suppress(OSError):
                full = Path(absolute)
                st = os.lstat(full)
                shown.append(FileInfo(full, self.display(full), _kind(st.st_mode), st.st_size, st.st_mtime, st.st_nlink))
        return shown, len(stamped)

    def _walk(
        self, fd: int, folder: Path, root: Path, matcher: IgnoreMatcher, respect: bool, withheld: list[str] | None
    ) -> Iterator[FileInfo]:
        try:
            with os.scandir(fd) as scan:
                entries = sorted(scan, key=lambda e: e.name)
        except (PermissionError, FileNotFoundError):
            return
        for entry in entries:
            try:
                info = self._info(entry, folder)
            except OSError:
                continue
            if not self.policy.shown(info, root, matcher if respect else None, withheld):
                continue
            if info.kind != "dir":
                yield info
                continue
            try:
                child = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue  # vanished, or swapped for a symlink: not followed
            try:
                rel = info.path.relative_to(root).as_posix()
                inner = self.policy.ignore_below(matcher, rel, _read_text_at(child)) if respect else matcher
                yield from self._walk(child, info.path, root, inner, respect, withheld)
            finally:
                os.close(child)


def _read_text_at(folder: int) -> str | None:
    """A folder's .gitignore, opened relative to its fd (never through a symlink)."""
    try:
        fd = os.open(".gitignore", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    except OSError:
        return None
    try:
        if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read(1024 * 1024).decode("utf-8", errors="replace")
    finally:
        os.close(fd)


def _read_text(path: Path) -> str | None:
    """An ignore file's text, or None where there is none to read."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError):
        return None
