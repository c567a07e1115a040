"""The file broker of a runner whose files are not on this machine (an ssh host).

A runner supplies a ``FileTransport``: plain file operations on absolute paths as the runner
sees them (SFTP for ssh). Everything that decides what a tool may touch stays here, in the
core, so the rules are the local broker's: paths resolve on the runner (``..`` and symlinks)
before any decision; escapes from the workspace are refused; writes to protected names at any
depth (``protected_names``), into anything that looks like a git dir, or that would make a
folder look like one, or of ``gitdir:`` pointers, or into program paths the workspace
repository's config names, are refused; writes are atomic (a temporary file, then a rename,
so a hard link is replaced, never written through). Every write and refusal is audited.

Absolute paths under the thread's *local* workspace are mapped to the runner's workspace, so a
model that copies a path from the environment block still lands in the runner.

What a transport cannot give is weaker than locally and is said so in docs/runners.md:
the checks and the operation are separate round trips (no directory-fd walk), and a transport
that does not report link counts (SFTP version 3) cannot refuse reading a hard-linked file.
"""

from __future__ import annotations

import io
import posixpath
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from roder_core.brokers import BrokerDenied, FileInfo, FileKind
from roder_core.brokers.content_gate import ContentGate
from roder_core.brokers.file_glob import walk_matches
from roder_core.brokers.git_dirs import config_programs, gitdir_pointer
from roder_core.brokers.gitignore import IgnoreMatcher, IgnoreRule, parse_rules
from roder_core.brokers.protected_names import protected_reason

AuditFn = Callable[[str, dict[str, Any]], None]
#: Larger files are refused by ``read_bytes``/``open_read`` (they are held in memory).
MAX_READ_BYTES = 64 * 1024 * 1024
_GIT_MARKERS = ("HEAD", "objects", "refs", "commondir")


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


def _is_git_dir_shape(names: set[str]) -> bool:
    return "HEAD" in names and ({"objects", "refs"} <= names or "commondir" in names)


class TransportFileSystem:
    """``FileSystemBroker`` over a ``FileTransport``, scoped to the runner's workspace."""

    def __init__(
        self,
        transport: FileTransport,
        workspace: str,
        *,
        local_workspace: Path | None = None,
        capabilities: frozenset[str] = frozenset({"fs.read.workspace", "fs.write.workspace"}),
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
        self._can_read = any(c.startswith(("fs.read.", "fs.readwrite.", "fs.write.")) for c in capabilities)
        self._can_write = any(c.startswith(("fs.write.", "fs.readwrite.")) for c in capabilities)
        self._audit = audit
        self._extension_id = extension_id

    # ------------------------------------------------------------------ decisions

    def _record(self, kind: str, **fields: Any) -> None:
        if self._audit is not None:
            self._audit(kind, {"extension": self._extension_id, "runner_path": True, **fields})

    def _deny(self, message: str, path: str, action: str) -> BrokerDenied:
        self._record("fs.denied", path=path, action=action, reason=message)
        return BrokerDenied(message)

    def _lexical(self, path: str) -> str:
        if not isinstance(path, str) or not path.strip():
            raise BrokerDenied("empty path")
        if "\x00" in path:
            raise BrokerDenied("path contains a NUL byte")
        if path == "~" or path.startswith("~/"):
            raise BrokerDenied(f"{path}: the home folder is outside the runner's workspace")
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
            except FileNotFoundError:
                parent, name = posixpath.split(current)
                if parent == current:
                    raise
                rest.insert(0, name)
                current = parent
        return posixpath.join(real, *rest) if rest else real

    def _inside(self, real: str) -> bool:
        return real == self._root or real.startswith(self._root.rstrip("/") + "/")

    def _relative(self, real: str) -> tuple[str, ...]:
        return tuple(p for p in posixpath.relpath(real, self._root).split("/") if p not in ("", "."))

    def _check_capability(self, write: bool, path: str) -> None:
        if write and not self._can_write:
            raise self._deny(f"{path}: this extension was not granted fs.write.workspace", path, "write")
        if not write and not self._can_read:
            raise self._deny(f"{path}: this extension was not granted fs.read.workspace", path, "read")

    def _check_write(self, path: str, lexical: str, real: str) -> None:
        reason = protected_reason(self._relative(real)) or (
            protected_reason(self._relative(lexical)) if self._inside(lexical) else None
        )
        if reason:
            raise self._deny(
                f"{path}: {reason}; Roder's tools never write git internals, .roder/, agent and editor "
                "folders, or shell and tool dotfiles, at any depth (edit it yourself if you mean to)",
                path,
                "write",
            )
        refusal = self._git_refusal(real)
        if refusal:
            raise self._deny(
                f"{path}: {refusal}; git would run code from there, so Roder's tools never write it (git-dir protection)",
                path,
                "write",
            )

    def _present_markers(self, folder: str) -> set[str]:
        present = set()
        for name in _GIT_MARKERS:
            try:
                self._transport.lstat(posixpath.join(folder, name))
                present.add(name)
            except (FileNotFoundError, NotADirectoryError):
                continue
        return present

    def _git_refusal(self, target: str) -> str | None:
        folder = posixpath.dirname(target)
        name = posixpath.basename(target)
        ancestor = folder
        while self._inside(ancestor):
            if _is_git_dir_shape(self._present_markers(ancestor)):
                return f"{ancestor} is a git directory (HEAD with objects/ and refs/, or with commondir)"
            if ancestor == self._root:
                break
            ancestor = posixpath.dirname(ancestor)
        if name in _GIT_MARKERS and _is_git_dir_shape(self._present_markers(folder) | {name}):
            return f"creating {name} would make {folder} look like a git directory"
        try:
            config = self._transport.read(posixpath.join(self._root, ".git", "config"), 256 * 1024)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError):
            config = b""
        for program in config_programs(config.decode("utf-8", errors="replace"), Path(self._root)):
            program_path = program.as_posix()
            if target == program_path or target.startswith(program_path.rstrip("/") + "/"):
                return f"{program_path} is a program path in the workspace repository's git config"
        return None

    def resolve(self, path: str, *, write: bool = False) -> Path:
        """The runner's real path for ``path``, or BrokerDenied."""
        self._check_capability(write, path)
        lexical = self._lexical(path)
        real = self._real(lexical)
        if not self._inside(real):
            where = "" if real == lexical else f" (it resolves to {real})"
            raise self._deny(
                f"{path}: outside the runner's workspace {self._root}{where}; Roder's file tools only reach the workspace",
                path,
                "write" if write else "read",
            )
        if write:
            self._check_write(path, lexical, real)
        elif self.gate is not None:
            reason = self.gate.refusal(Path(real), asked=True, resolved=True) or self.gate.refusal(
                Path(lexical), asked=True, resolved=True
            )
            if reason is not None:
                raise self._deny(reason, path, "read")
        return Path(real)

    def may_withhold(self) -> bool:
        return self.gate is not None and self.gate.may_refuse()

    def withheld(self, path: str) -> str | None:
        """Why the content of ``path`` (as a search printed it) must not reach the model, or None."""
        if self.gate is None:
            return None
        lexical = self._lexical(path)
        return self.gate.refusal(Path(lexical), resolved=True) or self.gate.refusal(Path(self._real(lexical)), resolved=True)

    def _gated(self, info: FileInfo, withheld: list[str] | None) -> bool:
        if self.gate is None or self.gate.refusal(info.path, resolved=True) is None:
            return True
        if withheld is not None:
            withheld.append(info.display)
        return False

    def _entry(self, path: str) -> str:
        """For delete/move: the entry itself (a symlink is removed, not its target)."""
        self._check_capability(True, path)
        lexical = self._lexical(path)
        parent = self._real(posixpath.dirname(lexical))
        entry = posixpath.join(parent, posixpath.basename(lexical))
        if not self._inside(entry) or entry == self._root:
            raise self._deny(f"{path}: outside the runner's workspace {self._root} (or the workspace itself)", path, "write")
        self._check_write(path, lexical, entry)
        return entry

    def display(self, path: Path) -> str:
        real = Path(path).as_posix()
        if real == self._root:
            return "."
        if self._inside(real):
            return posixpath.relpath(real, self._root)
        return real

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
        if st.kind == "dir":
            raise IsADirectoryError(f"{path} is a folder; use ls or glob to list it")
        if st.kind != "file":
            raise self._deny(f"{path}: not a regular file (device, socket or pipe)", path, "read")
        if st.links is not None and st.links > 1:
            raise self._deny(
                f"{path}: hard-linked file ({st.links} names); its other names may lie outside the workspace", path, "read"
            )
        if max_bytes is None and st.size > MAX_READ_BYTES:
            raise self._deny(f"{path}: {st.size} bytes is more than a runner file read holds; read it with bash", path, "read")
        return self._transport.read(real, max_bytes)

    def open_read(self, path: str) -> BinaryIO:
        return io.BytesIO(self.read_bytes(path))

    # ------------------------------------------------------------------ writing

    def write_bytes(self, path: str, data: bytes) -> Path:
        real = self.resolve(path, write=True)
        target = real.as_posix()
        if gitdir_pointer(data):
            raise self._deny(f"{path}: a file starting with 'gitdir:' points git at another git directory", path, "write")
        try:
            st: RemoteStat | None = self._transport.lstat(target)
        except FileNotFoundError:
            st = None
        if st is not None and st.kind == "dir":
            raise IsADirectoryError(f"{path} is a folder")
        if st is not None and st.kind not in ("file",):
            raise self._deny(f"{path}: not a regular file", path, "write")
        self._make_parents(path, posixpath.dirname(target))
        self._transport.write_atomic(target, data)
        self._record("fs.write", path=self.display(real), bytes=len(data), created=st is None)
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
                raise self._deny(f"{path}: {self.display(Path(current))} is not a folder", path, "write")
            break
        for folder_path in missing:
            if posixpath.basename(folder_path) in _GIT_MARKERS and _is_git_dir_shape(
                self._present_markers(posixpath.dirname(folder_path)) | {posixpath.basename(folder_path)}
            ):
                raise self._deny(f"{path}: creating {folder_path} would make a git directory (git-dir protection)", path, "write")
            self._transport.mkdir(folder_path)

    def mkdir(self, path: str) -> Path:
        real = self.resolve(path, write=True)
        self._make_parents(path, real.as_posix())
        self._record("fs.mkdir", path=self.display(real))
        return real

    def delete(self, path: str) -> Path:
        entry = self._entry(path)
        try:
            st = self._transport.lstat(entry)
        except FileNotFoundError:
            raise FileNotFoundError(f"{path}: no such file") from None
        if st.kind == "dir":
            raise IsADirectoryError(f"{path} is a folder; only files are deleted")
        self._transport.unlink(entry)
        self._record("fs.delete", path=self.display(Path(entry)))
        return Path(entry)

    def move(self, source: str, target: str) -> Path:
        src = self._entry(source)
        dst = self.resolve(target, write=True)
        try:
            self._transport.lstat(src)
        except FileNotFoundError:
            raise FileNotFoundError(f"{source}: no such file") from None
        try:
            if self._transport.lstat(dst.as_posix()).kind == "dir":
                raise IsADirectoryError(f"{target} is a folder")
        except FileNotFoundError:
            pass
        self._make_parents(target, posixpath.dirname(dst.as_posix()))
        self._transport.rename(src, dst.as_posix())
        self._record("fs.move", path=self.display(Path(src)), to=self.display(dst))
        return dst

    # ------------------------------------------------------------------ listing

    def _rules(self, folder: str, base: str, name: str = ".gitignore") -> list[IgnoreRule]:
        try:
            text = self._transport.read(posixpath.join(folder, name), 1024 * 1024)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError):
            return []
        return parse_rules(text.decode("utf-8", errors="replace"), base)

    def _matcher_for(self, start: str) -> IgnoreMatcher:
        rules = [*self._rules(posixpath.join(self._root, ".git", "info"), "", "exclude"), *self._rules(self._root, "")]
        parts = self._relative(start)
        for depth in range(1, len(parts) + 1):
            base = "/".join(parts[:depth])
            rules.extend(self._rules(posixpath.join(self._root, base), base))
        return IgnoreMatcher(rules)

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
        matcher = self._matcher_for(real)
        entries = []
        for name, st in self._transport.listdir(real):
            if name == ".git":
                continue
            info = self._info(real, name, st)
            if respect_gitignore and matcher.excluded(posixpath.relpath(info.path.as_posix(), self._root), st.kind == "dir"):
                continue
            if self._gated(info, withheld):
                entries.append(info)
        entries.sort(key=lambda e: (e.kind != "dir", e.display))
        return entries

    def walk(self, path: str, *, respect_gitignore: bool = True, withheld: list[str] | None = None) -> Iterator[FileInfo]:
        real = self.resolve(path).as_posix()
        st = self._transport.lstat(real)
        if st.kind == "file":
            yield self._info(posixpath.dirname(real), posixpath.basename(real), st)
            return
        yield from self._walk(real, self._matcher_for(real), respect_gitignore, withheld)

    def find_files(self, path: str, pattern: str, *, limit: int, withheld: list[str] | None = None) -> tuple[list[FileInfo], int]:
        """By this broker's walk (over the transport), from the pattern's literal folder."""
        return walk_matches(self, path, pattern, limit, withheld)

    def _walk(self, folder: str, matcher: IgnoreMatcher, respect: bool, withheld: list[str] | None) -> Iterator[FileInfo]:
        try:
            entries = sorted(self._transport.listdir(folder))
        except (FileNotFoundError, PermissionError, NotADirectoryError):
            return
        for name, st in entries:
            if name == ".git":
                continue
            info = self._info(folder, name, st)
            rel = posixpath.relpath(info.path.as_posix(), self._root)
            if respect and matcher.excluded(rel, st.kind == "dir"):
                continue
            if not self._gated(info, withheld):
                continue
            if st.kind != "dir":
                yield info
                continue
            inner = matcher.extend(self._rules(info.path.as_posix(), rel)) if respect else matcher
            yield from self._walk(info.path.as_posix(), inner, respect, withheld)
