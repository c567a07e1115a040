"""What the file brokers decide, written once for every place a workspace's files live.

``fs.WorkspaceFileSystem`` reaches files on this machine through directory fds;
``runner_fs.TransportFileSystem`` reaches a runner's files through its transport (SFTP). How
they touch files differs; what a tool may touch must not, so every decision is made here and
only here: the ``fs.*`` grants, the refusals and their messages, the audit records, Roder's own
folders, the git ignore rules a listing honours, the content gate, protected names and git
dirs, and which kinds of file a read or a write accepts. A broker resolves paths and moves
bytes; it asks its ``FsPolicy`` before it acts and reports to it after.

A broker never builds a ``BrokerDenied`` or writes an audit record itself
(``tests/brokers/test_fs_policy.py`` checks both brokers' source, and that the same refusal
reached through each gives the same message and the same audit record).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from roder_core.brokers import BrokerDenied, FileInfo, FileKind
from roder_core.brokers.content_gate import ContentGate
from roder_core.brokers.git_dirs import pointer_refusal
from roder_core.brokers.gitignore import IgnoreMatcher, parse_rules
from roder_core.brokers.own_folders import visible
from roder_core.brokers.protected_names import protected_reason

AuditFn = Callable[[str, dict[str, Any]], None]
#: The ignore files that apply at a folder: (file relative to the root, the folder its rules
#: are relative to). Below the root, each folder's own ``.gitignore`` follows.
_ROOT_IGNORE_FILES = ((".git/info/exclude", ""), (".gitignore", ""))
#: What a file broker is granted when nobody says otherwise.
DEFAULT_GRANTS = frozenset({"fs.read.workspace", "fs.write.workspace"})
_GRANT_READ = ("fs.read.", "fs.readwrite.", "fs.write.")
_GRANT_WRITE = ("fs.write.", "fs.readwrite.")


class FsPolicy:
    """The decisions of one file broker: one workspace (plus extra roots), one extension's grants.

    ``local``: the broker's paths are this machine's, so ``~`` is the home folder here and the
    content gate may resolve a symlink itself. A runner's are not: ``~`` is refused (the
    runner's home is never its workspace) and only the paths the runner resolved count."""

    def __init__(
        self,
        workspace: Path,
        *,
        roots: Iterable[Path] = (),
        capabilities: frozenset[str],
        audit: AuditFn | None,
        extension_id: str,
        hidden: Iterable[Path] = (),
        gate: ContentGate | None = None,
        audit_fields: Mapping[str, Any] | None = None,
        local: bool = True,
    ) -> None:
        self.workspace = workspace
        self.roots: tuple[Path, ...] = (workspace, *roots)
        #: Roder's own folders (``own_folders``): out of the tools' reach even inside a root,
        #: unless a root lies inside one of them (a runner's worktree in the cache).
        self.hidden: tuple[Path, ...] = tuple(hidden)
        #: What may reach the model (read rules, secret masks): ``content_gate``.
        self.gate = gate
        self._can_read = any(c.startswith(_GRANT_READ) for c in capabilities)
        self._can_write = any(c.startswith(_GRANT_WRITE) for c in capabilities)
        self._audit = audit
        self._extension_id = extension_id
        self._audit_fields = dict(audit_fields or {})
        self._local = local

    # ------------------------------------------------------------------ audit and refusals

    def record(self, kind: str, **fields: Any) -> None:
        if self._audit is not None:
            self._audit(kind, {"extension": self._extension_id, **self._audit_fields, **fields})

    def deny(self, message: str, path: str, action: str) -> BrokerDenied:
        """The refusal of ``action`` on ``path``, audited (``fs.denied``); the caller raises it."""
        self.record("fs.denied", path=path, action=action, reason=message)
        return BrokerDenied(message)

    def wrote(self, real: Path, size: int, *, created: bool) -> None:
        self.record("fs.write", path=self.display(real), bytes=size, created=created)

    def made_folder(self, real: Path) -> None:
        self.record("fs.mkdir", path=self.display(real))

    def deleted(self, entry: Path) -> None:
        self.record("fs.delete", path=self.display(entry))

    def moved(self, source: Path, target: Path) -> None:
        self.record("fs.move", path=self.display(source), to=self.display(target))

    # ------------------------------------------------------------------ paths

    def display(self, path: Path) -> str:
        """Workspace-relative (posix) inside the workspace, absolute elsewhere."""
        real = Path(path)
        if real == self.workspace:
            return "."
        if real.is_relative_to(self.workspace):
            return real.relative_to(self.workspace).as_posix()
        return str(real)

    def check_text(self, path: str) -> str:
        """``path`` when it can name a file at all (a non-empty string without NUL), with ``~``
        expanded to the home folder here (refused on a runner)."""
        if not isinstance(path, str) or not path.strip():
            raise BrokerDenied("empty path")
        if "\x00" in path:
            raise BrokerDenied("path contains a NUL byte")
        if self._local:
            return os.path.expanduser(path)
        if path != "~" and not path.startswith("~/"):
            return path
        raise self.deny(f"{path}: the home folder is outside the runner's workspace {self.workspace}", path, "read")

    def root_of(self, real: Path) -> Path | None:
        return next((root for root in self.roots if real == root or real.is_relative_to(root)), None)

    def check_capability(self, path: str, *, write: bool) -> None:
        if write and not self._can_write:
            raise self.deny(f"{path}: this extension was not granted fs.write.workspace", path, "write")
        if not write and not self._can_read:
            raise self.deny(f"{path}: this extension was not granted fs.read.workspace", path, "read")

    def inside(self, path: str, lexical: Path, real: Path, action: str) -> Path:
        """The root ``real`` lies in, or the refusal of a path outside every root."""
        root = self.root_of(real)
        if root is None:
            where = "" if real == Path(os.path.normpath(lexical)) else f" (it resolves to {real})"
            raise self.deny(
                f"{path}: outside the workspace {self.workspace}{where}; Roder's file tools only reach the workspace",
                path,
                action,
            )
        return root

    def is_hidden(self, real: Path) -> bool:
        return bool(self.hidden) and not visible(real, self.hidden, self.roots)

    def check_hidden(self, path: str, real: Path, action: str) -> None:
        if self.is_hidden(real):
            raise self.deny(
                f"{path}: inside Roder's own folders (threads, logs, credentials), which tools never reach", path, action
            )

    def admit(
        self,
        path: str,
        lexical: Path,
        real: Path,
        *,
        write: bool,
        git: Callable[[Path, Path], str | None],
        data: bytes | None = None,
    ) -> Path:
        """After the broker resolved ``lexical`` to ``real``: refuse anything outside every root
        or in Roder's own folders; a write of a protected name or a git dir (``git(real, root)``
        says why, read by the broker's own means: the one walk of the git-dir rules a write
        costs) or of ``data`` that is a git-dir pointer; a read the content gate withholds."""
        action = "write" if write else "read"
        root = self.inside(path, lexical, real, action)
        self.check_hidden(path, real, action)
        if write:
            self.check_protected(path, lexical, real, root)
            self.check_git(path, git(real, root) or (None if data is None else pointer_refusal(data)))
        else:
            self.check_read(path, lexical, real)
        return real

    def admit_entry(self, path: str, lexical: Path, entry: Path, *, git: Callable[[Path, Path], str | None]) -> Path:
        """For delete and move: the entry itself (a symlink, not its target) below a root,
        never a root, never a protected name or a git dir."""
        root = self.inside(path, lexical, entry, "write")
        self.check_hidden(path, entry, "write")
        if entry == root:
            raise self.deny(f"{path}: refusing to remove or move a workspace root", path, "write")
        self.check_protected(path, lexical, entry, root)
        self.check_git(path, git(entry, root))
        return entry

    def check_protected(self, path: str, lexical: Path, real: Path, root: Path) -> None:
        """Refuse writing a protected name (``protected_names``) at any depth, as the path
        resolves or as it was written."""
        reasons = [protected_reason(real.relative_to(root).parts)]
        normal = Path(os.path.normpath(lexical))
        if normal.is_relative_to(root):
            reasons.append(protected_reason(normal.relative_to(root).parts))
        reason = next((r for r in reasons if r), None)
        if reason:
            raise self.deny(
                f"{path}: {reason}; Roder's tools never write git internals, .roder/, agent and editor "
                "folders, or shell and tool dotfiles, at any depth (edit it yourself if you mean to)",
                path,
                "write",
            )

    def check_git(self, path: str, reason: str | None) -> None:
        """Refuse a write that would touch or plant a git dir (``git_dirs``: ``reason`` is why)."""
        if reason:
            raise self.deny(
                f"{path}: {reason}; git would run code from there, so Roder's tools never write it (git-dir protection)",
                path,
                "write",
            )

    def changed(self, path: str, where: Path) -> BrokerDenied:
        """A folder on the way turned into a symlink or a file while the broker used it."""
        return self.deny(
            f"{path}: {self.display(where)} is not a plain folder any more (it changed into a symlink or a file "
            "while Roder was using it); nothing was written through it",
            path,
            "write",
        )

    # ------------------------------------------------------------------ what a file may be

    def check_readable(self, path: str, kind: FileKind, links: int | None) -> None:
        """A read takes a regular file with one name (``links`` None: the broker cannot tell)."""
        if kind == "dir":
            raise IsADirectoryError(f"{path} is a folder; use ls or glob to list it")
        if kind == "symlink":  # resolved a moment ago: it was swapped since
            raise self.deny(f"{path}: changed into a symlink while opening", path, "read")
        if kind != "file":
            raise self.deny(f"{path}: not a regular file (device, socket or pipe)", path, "read")
        if links is not None and links > 1:
            raise self.deny(
                f"{path}: hard-linked file ({links} names); its other names may lie outside "
                "the workspace, so Roder will not read or write through it",
                path,
                "read",
            )

    def check_writable(self, path: str, real: Path, kind: FileKind | None, links: int | None) -> None:
        """A write replaces a regular file with one name, or creates one (``kind`` None)."""
        if kind is None:
            return
        if kind == "dir":
            raise IsADirectoryError(f"{path} is a folder")
        if kind == "symlink":  # resolved a moment ago: it was swapped since
            raise self.changed(path, real)
        if kind != "file":
            raise self.deny(f"{path}: not a regular file", path, "write")
        if links is not None and links > 1:
            raise self.deny(f"{path}: hard-linked file ({links} names); Roder will not write through it", path, "write")

    def check_held(self, path: str, size: int, limit: int) -> None:
        """A broker that holds a whole file in memory to read it takes ``limit`` bytes at most."""
        if size > limit:
            raise self.deny(f"{path}: {size} bytes is more than a runner file read holds; read it with bash", path, "read")

    def check_deletable(self, path: str, kind: FileKind) -> None:
        """Delete takes a file (or a symlink, never its target), never a folder."""
        if kind == "dir":
            raise IsADirectoryError(f"{path} is a folder; only files are deleted")

    def check_move_target(self, path: str, kind: FileKind | None) -> None:
        """A move never lands on a folder (``kind`` None: nothing there yet)."""
        if kind == "dir":
            raise IsADirectoryError(f"{path} is a folder")

    def check_new_folder(self, path: str, parent: Path, name: str, makes_git_dir: bool) -> None:
        """Refuse creating ``name`` in ``parent`` when that completes a git dir's shape."""
        if makes_git_dir:
            raise self.deny(
                f"{path}: creating {name}/ would make {self.display(parent)} look like a git directory (git-dir protection)",
                path,
                "write",
            )

    # ------------------------------------------------------------------ the content gate

    def may_withhold(self) -> bool:
        return self.gate is not None and self.gate.may_refuse()

    def _refusal(self, lexical: Path, real: Path | None, *, asked: bool) -> str | None:
        if self.gate is None:
            return None
        if real is None and self._local:
            return self.gate.refusal(lexical, asked=asked)  # the gate resolves it here
        forms = [lexical] if real is None else [lexical, real]
        return next((r for form in forms if (r := self.gate.refusal(form, asked=asked, resolved=True))), None)

    def check_read(self, path: str, lexical: Path, real: Path) -> None:
        """An explicit read of one path: the policy engine asked about it already."""
        reason = self._refusal(lexical, None if self._local else real, asked=True)
        if reason is not None:
            raise self.deny(reason, path, "read")

    def withheld(self, path: str, lexical: Path, real: Path | None, links: int | None) -> str | None:
        """Why the content of ``path`` (as a search printed it) must not reach the model, or
        None; nobody was asked about this file."""
        if links is not None and links > 1:
            # another name of this file may be a withheld one (``ln .env notes.txt``), and the
            # read tool refuses hard-linked files too
            return f"{path}: hard-linked file ({links} names), which Roder does not read"
        return self._refusal(lexical, real, asked=False)

    def gated(self, path: str | Path, kind: str, withheld: list[str] | None) -> bool:
        """Whether a listed entry (``path`` as the listing reached it, of ``kind``) passes the
        content gate; a refused one is named in ``withheld``, as listings display it."""
        if self.gate is None:
            return True
        resolved = kind != "symlink" or not self._local
        if self.gate.refusal(path, resolved=resolved) is None:
            return True
        if withheld is not None:
            withheld.append(self.display(Path(path)))
        return False

    # ------------------------------------------------------------------ listings

    def ignore_matcher(self, root: Path, start: Path, read: Callable[[str], str | None]) -> IgnoreMatcher:
        """The ignore rules that apply at ``start`` (below ``root``): the root's
        ``.git/info/exclude`` and every ``.gitignore`` from the root down to ``start``.
        ``read`` gives an ignore file's text (by its path relative to the root), or None."""
        parts = start.relative_to(root).parts if start != root else ()
        bases = ["/".join(parts[:depth]) for depth in range(1, len(parts) + 1)]
        matcher = IgnoreMatcher()
        for name, base in [*_ROOT_IGNORE_FILES, *((f"{base}/.gitignore", base) for base in bases)]:
            matcher = self.ignore_below(matcher, base, read(name))
        return matcher

    def ignore_below(self, matcher: IgnoreMatcher, base: str, text: str | None) -> IgnoreMatcher:
        """``matcher`` with the rules of the ``.gitignore`` text found in folder ``base``."""
        return matcher if text is None else matcher.extend(parse_rules(text, base))

    def shown(self, info: FileInfo, root: Path, matcher: IgnoreMatcher | None, withheld: list[str] | None) -> bool:
        """Whether a listing shows an entry: never ``.git`` or Roder's own folders, not what the
        ignore rules exclude (``matcher`` None: ignore rules not honoured), not what the
        content gate refuses (named in ``withheld``)."""
        if info.path.name == ".git" or self.is_hidden(info.path):
            return False
        if matcher is not None and matcher.excluded(info.path.relative_to(root).as_posix(), info.kind == "dir"):
            return False
        return self.gated(info.path, info.kind, withheld)
