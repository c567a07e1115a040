"""The file broker of a runner whose files are not on this machine (an ssh host).

A runner supplies a ``FileTransport``: plain file operations on absolute paths as the runner
sees them (SFTP for ssh). Everything that decides what a tool may touch stays in the core, in
the ``fs_policy.FsPolicy`` the local broker asks too, so the rules are the local broker's:
paths resolve on the runner (``..`` and symlinks) before any decision; escapes from the
workspace are refused; writes to protected names at any depth (``protected_names``), into
anything that looks like a git dir, or that would make a folder look like one, or of
``gitdir:`` pointers, or into program paths the workspace repository's config names, are
refused; hard-linked files are neither read (where the transport reports link counts) nor
written; writes are atomic (a temporary file, then a rename). Every write and refusal is
audited.

Absolute paths under the thread's *local* workspace are mapped to the runner's workspace, so a
model that copies a path from the environment block still lands in the runner.

What a transport cannot give is weaker than locally and is said so in docs/runners.md:
the checks and the operation are separate round trips (no directory-fd walk), a transport
that does not report link counts (SFTP version 3) cannot refuse reading a hard-linked file, and
the git-dir rules (``git_dirs``, read through ``TransportProbe``) do not know the remote user's
global git config.
"""

from __future__ import annotations

import io
import posixpath
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from roder_core.brokers import FileInfo, FileKind
from roder_core.brokers.content_gate import ContentGate
from roder_core.brokers.file_glob import walk_matches
from roder_core.brokers.fs_policy import DEFAULT_GRANTS, FsPolicy
from roder_core.brokers.git_dirs import git_refusal, would_look_like_git_dir
from roder_core.brokers.gitignore import IgnoreMatcher

AuditFn = Callable[[str, dict[str, Any]], None]
#: Larger files are refused by ``read_bytes``/``open_read`` (they are held in memory).
MAX_READ_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class RemoteStat:
    kind: FileKind
    size: int = 0
    mtime: float = 0.0
    #: None when the transport cannot tell (SFTP version 3).
    links: int | None = None


class FileTransport(Protocol):
    """Plain file operations on a runner, on absolute posix paths. Missing paths raise
    ``FileNotFoundError``; nothing here decides what is allowed."""

    def realpath(self, path: str) -> str: ...

    def lstat(self, path: str) -> RemoteStat: ...

    def read(self, path: str, max_bytes: int | None) -> bytes: ...

    def write_atomic(self, path: str, data: bytes) -> None: ...

    def mkdir(self, path: str) -> None: ...

    def unlink(self, path: str) -> None: ...

    def rename(self, source: str, target: str) -> None: ...

    def listdir(self, path: str) -> list[tuple[str, RemoteStat]]: ...


class TransportProbe:
    """``git_dirs.GitProbe`` of a runner's files, for one decision (answers are kept, so asking
    whether ``.git`` is a folder and then a file costs one round trip). The runner user's own
    git configs are not known here; the repositories' configs are read."""

    def __init__(self, transport: FileTransport) -> None:
        self._transport = transport
        self._kinds: dict[tuple[str, bool], FileKind | None] = {}

    def _kind(self, path: Path, *, follow: bool) -> FileKind | None:
        key = (path.as_posix(), follow)
        if key not in self._kinds:
            try:
                where = self._transport.realpath(key[0]) if follow else key[0]
                self._kinds[key] = self._transport.lstat(where).kind
            except OSError:
                self._kinds[key] = None
        return self._kinds[key]

    def exists(self, path: Path) -> bool:
        return self._kind(path, follow=False) is not None

    def is_dir(self, path: Path) -> bool:
        return self._kind(path, follow=True) == "dir"

    def is_file(self, path: Path) -> bool:
        return self._kind(path, follow=True) == "file"

    def read(self, path: Path, limit: int) -> str:
        try:
            return self._transport.read(path.as_posix(), limit).decode("utf-8", errors="replace")
        except OSError:
            return ""

    def user_configs(self) -> list[Path]:
        return []


class TransportFileSystem:
    """``FileSystemBroker`` over a ``FileTransport``, scoped to the runner's workspace: the I/O
    through the transport; every decision is its ``FsPolicy``'s (``fs_policy``), the one the
    local broker asks."""

    def __init__(
        self,
        transport: FileTransport,
        workspace: str,
        *,
        local_workspace: Path | None = None,
        capabilities: frozenset[str] = DEFAULT_GRANTS,
        audit: AuditFn | None = None,
        extension_id: str = "",
        gate: ContentGate | None = None,
    ) -> None:
        self._transport = transport
        #: What may reach the model (``content_gate``); paths here are the runner's.
        self.gate = gate
        self.workspace = Path(transport.realpath(workspace))
        self._root = self.workspace.as_posix()
        self._local = local_workspace.as_posix() if local_workspace is not None else None
        self.policy = FsPolicy(
            self.workspace,
            capabilities=capabilities,
            audit=audit,
            extension_id=extension_id,
            gate=gate,
            audit_fields={"runner_path": True},
            local=False,
        )

    def _lexical(self, path: str) -> str:
        path = self.policy.check_text(path)
        if self._local is not None and (path == self._local or path.startswith(self._local + "/")):
            path = self._root + path[len(self._local) :]
        joined = path if path.startswith("/") else posixpath.join(self._root, path)
        return posixpath.normpath(joined)

    def _real(self, lexical: str) -> str:
        """The runner's realpath of ``lexical``; for a path that does not exist yet, the
        realpath of its nearest existing ancestor plus the rest."""
        rest: list[str] = []
        current = lexical
        while True:
            try:
                real = self._transport.realpath(current)
                break
            except (FileNotFoundError, NotADirectoryError):  # missing, or below a file
                parent, name = posixpath.split(current)
                if parent == current:
                    raise
                rest.insert(0, name)
                current = parent
        return posixpath.join(real, *rest) if rest else real

    def _inside(self, real: str) -> bool:
        return real == self._root or real.startswith(self._root.rstrip("/") + "/")

    def _git_refusal(self, target: Path, root: Path) -> str | None:
        """``git_dirs.git_refusal``, the local broker's rules, read through the transport."""
        return git_refusal(target, root, probe=TransportProbe(self._transport))

    def resolve(self, path: str, *, write: bool = False) -> Path:
        """The runner's real path for ``path``, or BrokerDenied."""
        return self._admit(path, write=write)

    def _admit(self, path: str, *, write: bool, data: bytes | None = None) -> Path:
        """``resolve``, with the bytes a write would put there (refused if a git-dir pointer)."""
        self.policy.check_capability(path, write=write)
        lexical = self._lexical(path)
        real = Path(self._real(lexical))
        return self.policy.admit(path, Path(lexical), real, write=write, git=self._git_refusal, data=data)

    def may_withhold(self) -> bool:
        return self.policy.may_withhold()

    def withheld(self, path: str) -> str | None:
        """Why the content of ``path`` (as a search printed it) must not reach the model, or None."""
        if not self.policy.may_withhold():
            return None  # nothing could be refused: spare the round trip
        lexical = self._lexical(path)
        return self.policy.withheld(path, Path(lexical), Path(self._real(lexical)), None)

    def _entry(self, path: str) -> str:
        """For delete/move: the entry itself (a symlink is removed, not its target)."""
        self.policy.check_capability(path, write=True)
        lexical = self._lexical(path)
        entry = Path(self._real(posixpath.dirname(lexical))) / posixpath.basename(lexical)
        return self.policy.admit_entry(path, Path(lexical), entry, git=self._git_refusal).as_posix()

    def display(self, path: Path) -> str:
        return self.policy.display(path)

    # ------------------------------------------------------------------ reading

    def exists(self, path: str) -> bool:
        try:
            self._transport.lstat(self.resolve(path).as_posix())
            return True
        except FileNotFoundError:
            return False

    def stat(self, path: str) -> FileInfo:
        real = self.resolve(path)
        try:
            st = self._transport.lstat(real.as_posix())
        except FileNotFoundError:
            raise FileNotFoundError(f"{path}: no such file or folder") from None
        return FileInfo(real, self.display(real), st.kind, st.size, st.mtime, st.links or 1)

    def read_bytes(self, path: str, *, max_bytes: int | None = None) -> bytes:
        real = self.resolve(path).as_posix()
        try:
            st = self._transport.lstat(real)
        except FileNotFoundError:
            raise FileNotFoundError(f"{path}: no such file") from None
        self.policy.check_readable(path, st.kind, st.links)
        if max_bytes is None:
            self.policy.check_held(path, st.size, MAX_READ_BYTES)
        return self._transport.read(real, max_bytes)

    def open_read(self, path: str) -> BinaryIO:
        return io.BytesIO(self.read_bytes(path))

    # ------------------------------------------------------------------ writing

    def write_bytes(self, path: str, data: bytes) -> Path:
        real = self._admit(path, write=True, data=data)
        target = real.as_posix()
        try:
            st: RemoteStat | None = self._transport.lstat(target)
        except FileNotFoundError:
            st = None
        self.policy.check_writable(path, real, None if st is None else st.kind, None if st is None else st.links)
        self._make_parents(path, posixpath.dirname(target))
        self._transport.write_atomic(target, data)
        self.policy.wrote(real, len(data), created=st is None)
        return real

    def _make_parents(self, path: str, folder: str) -> None:
        missing: list[str] = []
        current = folder
        while self._inside(current):
            try:
                st = self._transport.lstat(current)
            except FileNotFoundError:
                missing.insert(0, current)
                current = posixpath.dirname(current)
                continue
            if st.kind != "dir":
                raise self.policy.changed(path, Path(current))
            break
        for folder_path in missing:
            parent, name = posixpath.split(folder_path)
            makes_git_dir = would_look_like_git_dir(Path(parent), name, TransportProbe(self._transport))
            self.policy.check_new_folder(path, Path(parent), name, makes_git_dir)
            self._transport.mkdir(folder_path)

    def mkdir(self, path: str) -> Path:
        real = self.resolve(path, write=True)
        self._make_parents(path, real.as_posix())
        self.policy.made_folder(real)
        return real

    def delete(self, path: str) -> Path:
        entry = self._entry(path)
        try:
            st = self._transport.lstat(entry)
        except FileNotFoundError:
            raise FileNotFoundError(f"{path}: no such file") from None
        self.policy.check_deletable(path, st.kind)
        self._transport.unlink(entry)
        self.policy.deleted(Path(entry))
        return Path(entry)

    def move(self, source: str, target: str) -> Path:
        src = self._entry(source)
        dst = self.resolve(target, write=True)
        try:
            self._transport.lstat(src)
        except FileNotFoundError:
            raise FileNotFoundError(f"{source}: no such file") from None
        try:
            found: FileKind | None = self._transport.lstat(dst.as_posix()).kind
        except FileNotFoundError:
            found = None
        self.policy.check_move_target(target, found)
        self._make_parents(target, posixpath.dirname(dst.as_posix()))
        self._transport.rename(src, dst.as_posix())
        self.policy.moved(Path(src), dst)
        return dst

    # ------------------------------------------------------------------ listing

    def _read_text(self, path: str, limit: int = 1024 * 1024) -> str | None:
        try:
            return self._transport.read(path, limit).decode("utf-8", errors="replace")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError):
            return None

    def _matcher_for(self, start: str) -> IgnoreMatcher:
        return self.policy.ignore_matcher(
            self.workspace, Path(start), lambda name: self._read_text(posixpath.join(self._root, name))
        )

    def _info(self, folder: str, name: str, st: RemoteStat) -> FileInfo:
        real = Path(posixpath.join(folder, name))
        return FileInfo(real, self.display(real), st.kind, st.size, st.mtime, st.links or 1)

    def list_dir(self, path: str, *, respect_gitignore: bool = True, withheld: list[str] | None = None) -> list[FileInfo]:
        real = self.resolve(path).as_posix()
        try:
            if self._transport.lstat(real).kind != "dir":
                raise NotADirectoryError(f"{path} is not a folder")
        except FileNotFoundError:
            raise FileNotFoundError(f"{path}: no such folder") from None
        matcher = self._matcher_for(real) if respect_gitignore else None
        entries = []
        for name, st in self._transport.listdir(real):
            info = self._info(real, name, st)
            if self.policy.shown(info, self.workspace, matcher, withheld):
                entries.append(info)
        entries.sort(key=lambda e: (e.kind != "dir", e.display))
        return entries

    def walk(self, path: str, *, respect_gitignore: bool = True, withheld: list[str] | None = None) -> Iterator[FileInfo]:
        real = self.resolve(path).as_posix()
        st = self._transport.lstat(real)
        if st.kind == "file":
            yield self._info(posixpath.dirname(real), posixpath.basename(real), st)
            return
        yield from self._walk(real, self._matcher_for(real) if respect_gitignore else None, withheld)

    def find_files(self, path: str, pattern: str, *, limit: int, withheld: list[str] | None = None) -> tuple[list[FileInfo], int]:
        """By this broker's walk (over the transport), from the pattern's literal folder."""
        return walk_matches(self, path, pattern, limit, withheld)

    def _walk(self, folder: str, matcher: IgnoreMatcher | None, withheld: list[str] | None) -> Iterator[FileInfo]:
        try:
            entries = sorted(self._transport.listdir(folder))
        except (FileNotFoundError, PermissionError, NotADirectoryError):
            return
        for name, st in entries:
            info = self._info(folder, name, st)
            if not self.policy.shown(info, self.workspace, matcher, withheld):
                continue
            if st.kind != "dir":
                yield info
                continue
            below = info.path.as_posix()
            inner = (
                None
                if matcher is None
                else self.policy.ignore_below(matcher, self.display(info.path), self._read_text(below + "/.gitignore"))
            )
            yield from self._walk(below, inner, withheld)
