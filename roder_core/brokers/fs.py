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
    pattern_regex,
    ripgrep_files,
    ripgrep_query,
    walk_matches,
)
from roder_core.brokers.git_dirs import git_refusal, would_look_like_git_dir
from roder_core.brokers.gitignore import IgnoreMatcher, parse_rules
from roder_core.brokers.own_folders import visible
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
    """``FileSystemBroker`` for one workspace (plus extra roots) and one extension's grants."""

    def __init__(
        self,
        workspace: Path,
        *,
        extra_roots: Iterable[Path] = (),
        capabilities: frozenset[str] = frozenset({"fs.read.workspace", "fs.write.workspace"}),
        audit: AuditFn | None = None,
        extension_id: str = "",
        hidden: Iterable[Path] = (),
        gate: ContentGate | None = None,
    ) -> None:
        self.workspace = Path(os.path.realpath(workspace))
        self.roots: tuple[Path, ...] = (
            self.workspace,
            *(Path(os.path.realpath(os.path.expanduser(r))) for r in extra_roots),
        )
        #: Roder's own folders (``own_folders``): out of the tools' reach even inside a root,
        #: unless a root lies inside one of them (a runner's worktree in the cache).
        self._hidden = tuple(Path(os.path.realpath(h)) for h in hidden)
        self._can_read = any(c.startswith(("fs.read.", "fs.readwrite.", "fs.write.")) for c in capabilities)
        self._can_write = any(c.startswith(("fs.write.", "fs.readwrite.")) for c in capabilities)
        self._audit = audit
        self._extension_id = extension_id
        #: What may reach the model (read rules, secret masks): ``content_gate``.
        self.gate = gate

    # ------------------------------------------------------------------ decisions

    def _record(self, kind: str, **fields: Any) -> None:
        if self._audit is not None:
            self._audit(kind, {"extension": self._extension_id, **fields})

    def _deny(self, message: str, path: str, action: str) -> BrokerDenied:
        self._record("fs.denied", path=path, action=action, reason=message)
        return BrokerDenied(message)

    def _lexical(self, path: str) -> Path:
        if not isinstance(path, str) or not path.strip():
            raise BrokerDenied("empty path")
        if "\x00" in path:
            raise BrokerDenied("path contains a NUL byte")
        expanded = Path(os.path.expanduser(path))
        return expanded if expanded.is_absolute() else self.workspace / expanded

    def _root_of(self, real: Path) -> Path | None:
        return next((root for root in self.roots if real == root or real.is_relative_to(root)), None)

    def _check_capability(self, write: bool, path: str) -> None:
        if write and not self._can_write:
            raise self._deny(f"{path}: this extension was not granted fs.write.workspace", path, "write")
        if not write and not self._can_read:
            raise self._deny(f"{path}: this extension was not granted fs.read.workspace", path, "read")

    def _inside(self, path: str, real: Path, action: str) -> Path:
        root = self._root_of(real)
        if root is None:
            where = "" if str(real) == os.path.normpath(self._lexical(path)) else f" (it resolves to {real})"
            raise self._deny(
                f"{path}: outside the workspace {self.workspace}{where}; Roder's file tools only reach the workspace",
                path,
                action,
            )
        return root

    def _check_protected(self, path: str, lexical: Path, real: Path, root: Path, action: str) -> None:
        reasons = [protected_reason(real.relative_to(root).parts)]
        normal = Path(os.path.normpath(lexical))
        if normal.is_relative_to(root):
            reasons.append(protected_reason(normal.relative_to(root).parts))
        reason = next((r for r in reasons if r), None)
        if reason:
            raise self._deny(
                f"{path}: {reason}; Roder's tools never write git internals, .roder/, agent and editor "
                "folders, or shell and tool dotfiles, at any depth (edit it yourself if you mean to)",
                path,
                action,
            )
        self._check_git(path, real, root, action)

    def _check_git(self, path: str, real: Path, root: Path, action: str, data: bytes | None = None) -> None:
        reason = git_refusal(real, root, data)
        if reason:
            raise self._deny(
                f"{path}: {reason}; git would run code from there, so Roder's tools never write it (git-dir protection)",
                path,
                action,
            )

    def _is_hidden(self, real: Path) -> bool:
        return bool(self._hidden) and not visible(real, self._hidden, self.roots)

    def _check_hidden(self, path: str, real: Path, action: str) -> None:
        if self._is_hidden(real):
            raise self._deny(
                f"{path}: inside Roder's own folders (threads, logs, credentials), which tools never reach", path, action
            )

    def resolve(self, path: str, *, write: bool = False) -> Path:
        """The real path for ``path``, or BrokerDenied (escape, Roder's own folders, protected
        for writes, no grant)."""
        self._check_capability(write, path)
        lexical = self._lexical(path)
        real = settled_realpath(lexical)
        root = self._inside(path, real, "write" if write else "read")
        self._check_hidden(path, real, "write" if write else "read")
        if write:
            self._check_protected(path, lexical, real, root, "write")
        elif self.gate is not None:
            # an explicit read of one path: the policy engine asked about it already
            reason = self.gate.refusal(lexical, asked=True)
            if reason is not None:
                raise self._deny(reason, path, "read")
        return real

    def may_withhold(self) -> bool:
        return self.gate is not None and self.gate.may_refuse()

    def withheld(self, path: str) -> str | None:
        """Why the content of ``path`` (as a search printed it) must not reach the model, or None
        (``content_gate``: read rules and secret masks; nobody was asked about this file)."""
        lexical = self._lexical(path)
        try:
            st = os.lstat(lexical)
        except OSError:
            st = None
        if st is not None and stat_mod.S_ISREG(st.st_mode) and st.st_nlink > 1:
            # another name of this file may be a withheld one (``ln .env notes.txt``), and the
            # read tool refuses hard-linked files too
            return f"{path}: hard-linked file ({st.st_nlink} names), which Roder does not read"
        return None if self.gate is None else self.gate.refusal(lexical)

    def _gated(self, info: FileInfo, withheld: list[str] | None) -> bool:
        """Whether a listed entry passes the content gate; a refused one is counted in ``withheld``."""
        if self.gate is None:
            return True
        if self.gate.refusal(info.path, resolved=info.kind != "symlink") is None:
            return True
        if withheld is not None:
            withheld.append(info.display)
        return False

    def _resolve_entry(self, path: str) -> Path:
        """For delete/move: the directory entry itself (a symlink is removed, not its target)."""
        self._check_capability(True, path)
        lexical = Path(os.path.normpath(self._lexical(path)))
        entry = settled_realpath(lexical.parent) / lexical.name
        root = self._inside(path, entry, "write")
        self._check_hidden(path, entry, "write")
        if entry == root:
            raise self._deny(f"{path}: refusing to remove or move a workspace root", path, "write")
        self._check_protected(path, lexical, entry, root, "write")
        return entry

    # ------------------------------------------------------------------ race-free walking

    @contextlib.contextmanager
    def _folder_fd(self, path: str, folder: Path, *, create: bool = False) -> Iterator[int]:
        """A directory fd for ``folder`` (a resolved path under a root), reached from the root
        one component at a time without following symlinks; missing folders are created when
        ``create`` (never one that would complete a git dir). A component swapped for a
        symlink or a file on the way is refused, not followed."""
        root = self._root_of(folder)
        if root is None:
            raise self._deny(f"{path}: outside the workspace {self.workspace}", path, "write")
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
        try:
            here = root
            for part in folder.relative_to(root).parts:
                try:
                    nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise FileNotFoundError(f"{path}: no such folder {self.display(here / part)}") from None
                    if would_look_like_git_dir(here, part):
                        raise self._deny(
                            f"{path}: creating {part}/ would make {self.display(here)} look like a git directory "
                            "(git-dir protection)",
                            path,
                            "write",
                        ) from None
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o755, dir_fd=fd)
                    nxt = self._open_child_dir(path, fd, part, here)
                except OSError as exc:
                    if exc.errno in _SWAPPED:
                        raise self._changed(path, here / part) from None
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
                raise self._changed(path, here / part) from None
            raise

    def _changed(self, path: str, where: Path) -> BrokerDenied:
        return self._deny(
            f"{path}: {self.display(where)} is not a plain folder any more (it changed into a symlink or a file "
            "while Roder was using it); nothing was written through it",
            path,
            "write",
        )

    def display(self, path: Path) -> str:
        real = Path(path)
        if real == self.workspace:
            return "."
        if real.is_relative_to(self.workspace):
            return real.relative_to(self.workspace).as_posix()
        return str(real)

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
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        try:
            with self._folder_fd(path, real.parent) as folder:
                fd = os.open(real.name, flags, dir_fd=folder)
        except FileNotFoundError:
            raise FileNotFoundError(f"{path}: no such file") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # the last component became a symlink after resolve
                raise self._deny(f"{path}: changed into a symlink while opening", path, "read") from None
            raise
        try:
            st = os.fstat(fd)
            if stat_mod.S_ISDIR(st.st_mode):
                raise IsADirectoryError(f"{path} is a folder; use ls or glob to list it")
            if not stat_mod.S_ISREG(st.st_mode):
                raise self._deny(f"{path}: not a regular file (device, socket or pipe)", path, "read")
            if st.st_nlink > 1:
                raise self._deny(
                    f"{path}: hard-linked file ({st.st_nlink} names); its other names may lie outside "
                    "the workspace, so Roder will not read or write through it",
                    path,
                    "read",
                )
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
        real = self.resolve(path, write=True)
        root = self._root_of(real) or self.workspace
        self._check_git(path, real, root, "write", data)
        with self._folder_fd(path, real.parent, create=True) as folder:
            st = self._entry_stat(path, folder, real.name)
            mode = 0o644
            if st is not None:
                if stat_mod.S_ISDIR(st.st_mode):
                    raise IsADirectoryError(f"{path} is a folder")
                if stat_mod.S_ISLNK(st.st_mode):
                    raise self._changed(path, real)
                if not stat_mod.S_ISREG(st.st_mode):
                    raise self._deny(f"{path}: not a regular file", path, "write")
                if st.st_nlink > 1:
                    raise self._deny(
                        f"{path}: hard-linked file ({st.st_nlink} names); Roder will not write through it",
                        path,
                        "write",
                    )
                mode = stat_mod.S_IMODE(st.st_mode)
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
        self._record("fs.write", path=self.display(real), bytes=len(data), created=st is None)
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
        self._record("fs.mkdir", path=self.display(real))
        return real

    def delete(self, path: str) -> Path:
        entry = self._resolve_entry(path)
        with self._folder_fd(path, entry.parent) as folder:
            st = self._entry_stat(path, folder, entry.name)
            if st is None:
                raise FileNotFoundError(f"{path}: no such file")
            if stat_mod.S_ISDIR(st.st_mode):
                raise IsADirectoryError(f"{path} is a folder; only files are deleted")
            with self._vanishing(path, entry.parent):
                os.unlink(entry.name, dir_fd=folder)
        self._record("fs.delete", path=self.display(entry))
        return entry

    def move(self, source: str, target: str) -> Path:
        src = self._resolve_entry(source)
        dst = self.resolve(target, write=True)
        with self._folder_fd(source, src.parent) as src_folder:
            if self._entry_stat(source, src_folder, src.name) is None:
                raise FileNotFoundError(f"{source}: no such file")
            with self._folder_fd(target, dst.parent, create=True) as dst_folder:
                found = self._entry_stat(target, dst_folder, dst.name)
                if found is not None and stat_mod.S_ISDIR(found.st_mode):
                    raise IsADirectoryError(f"{target} is a folder")
                try:
                    with self._vanishing(source, src.parent):
                        os.rename(src.name, dst.name, src_dir_fd=src_folder, dst_dir_fd=dst_folder)
                except OSError as exc:
                    if exc.errno != errno.EXDEV:
                        raise
                    self.write_bytes(target, self.read_bytes(source))
                    os.unlink(src.name, dir_fd=src_folder)
        self._record("fs.move", path=self.display(src), to=self.display(dst))
        return dst

    # ------------------------------------------------------------------ listing

    def _info(self, entry: os.DirEntry[str], folder: Path) -> FileInfo:
        st = entry.stat(follow_symlinks=False)
        real = folder / entry.name
        return FileInfo(real, self.display(real), _kind(st.st_mode), st.st_size, st.st_mtime, st.st_nlink)

    def _matcher_for(self, start: Path) -> tuple[Path, IgnoreMatcher]:
        """Ignore rules that apply at ``start``: root .git/info/exclude and every .gitignore on
        the way from the root down to ``start``."""
        root = self._root_of(start) or self.workspace
        rules = []
        for ignore_file, base in ((root / ".git" / "info" / "exclude", ""), (root / ".gitignore", "")):
            rules.extend(_read_rules(ignore_file, base))
        rel_parts = start.relative_to(root).parts if start != root else ()
        for depth in range(1, len(rel_parts) + 1):
            base = "/".join(rel_parts[:depth])
            rules.extend(_read_rules(root / base / ".gitignore", base))
        return root, IgnoreMatcher(rules)

    def list_dir(self, path: str, *, respect_gitignore: bool = True, withheld: list[str] | None = None) -> list[FileInfo]:
        """Entries of a folder, listed through a directory fd (a folder swapped for a symlink
        after the check is refused, not followed); entries the content gate refuses are left
        out (and named in ``withheld``)."""
        real = self.resolve(path)
        if not real.is_dir():
            raise NotADirectoryError(f"{path} is not a folder")
        root, matcher = self._matcher_for(real)
        entries: list[FileInfo] = []
        with self._folder_fd(path, real) as folder, os.scandir(folder) as scan:
            for entry in scan:
                if entry.name == ".git":
                    continue
                info = self._info(entry, real)
                if self._is_hidden(info.path):
                    continue
                rel = info.path.relative_to(root).as_posix()
                if respect_gitignore and matcher.excluded(rel, info.kind == "dir"):
                    continue
                if self._gated(info, withheld):
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
        if self._is_hidden(start):
            return [], 0
        listed = ripgrep_files(start, max_depth=query.max_depth, name=query.name)
        if listed is None:
            return walk_matches(self, path, pattern, limit, withheld)
        if not query.exact:
            regex, skip = pattern_regex(pattern), len(str(real)) + 1
            listed = [absolute for absolute in listed if regex.match(absolute[skip:])]
        if any(h == start or h.is_relative_to(start) or start.is_relative_to(h) for h in self._hidden):
            listed = [absolute for absolute in listed if not self._is_hidden(Path(absolute))]
        stamped: list[tuple[float, str]] = []
        for absolute in listed:
            if self.gate is not None and self.gate.refusal(Path(absolute)) is not None:
                if withheld is not None:
                    withheld.append(self.display(Path(absolute)))
                continue
            with contextlib.suppress(OSError):  # removed since it was listed
                stamped.append((-os.lstat(absolute).st_mtime, absolute))
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
            if entry.name == ".git":
                continue
            try:
                info = self._info(entry, folder)
            except OSError:
                continue
            if self._is_hidden(info.path):
                continue
            rel = info.path.relative_to(root).as_posix()
            if respect and matcher.excluded(rel, info.kind == "dir"):
                continue
            if not self._gated(info, withheld):
                continue
            if info.kind != "dir":
                yield info
                continue
            try:
                child = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue  # vanished, or swapped for a symlink: not followed
            try:
                inner = matcher.extend(_read_rules_at(child, rel)) if respect else matcher
                yield from self._walk(child, info.path, root, inner, respect, withheld)
            finally:
                os.close(child)


def _read_rules_at(folder: int, base: str) -> list[Any]:
    """A folder's .gitignore, opened relative to its fd (never through a symlink)."""
    try:
        fd = os.open(".gitignore", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    except OSError:
        return []
    try:
        if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
            return []
        with os.fdopen(os.dup(fd), "rb") as handle:
            text = handle.read(1024 * 1024).decode("utf-8", errors="replace")
    finally:
        os.close(fd)
    return parse_rules(text, base)


def _read_rules(path: Path, base: str) -> list[Any]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError):
        return []
    return parse_rules(text, base)
