"""What a command must not change in the workspace tree, found before it runs and checked after.

Before a command, the writable roots are walked once, completely (never following symlinks):
every entry with a protected name at any depth (``protected_names``), every folder that looks
like a git dir (``HEAD`` + ``objects/`` + ``refs/``, whatever its name), the git dirs those refer
to (``commondir``, ``gitdir:`` pointer files, linked worktrees) and the folder ``core.hooksPath``
names (``.husky/``). The sandbox re-binds all of them read-only. After the command the tree is
walked again: anything protected that is new or was replaced (a new ``sub/.envrc``, a new
``.git``, a hand-made bare repository) is moved out of the workspace into Roder's quarantine
folder (``repairs``: through directory descriptors, never following a link), a replaced symlink
is put back, and the tool result says what happened.

The walk has no budget: protection does not depend on the size of the tree (a 200,000-file
``node_modules`` is walked like a ten-file project; ``bench/tree_guard.py`` measures the cost).
Where the walk cannot see, it fails closed: a folder the command could write but Roder cannot
list refuses the command before it runs (``TreeGuard.unlistable``), and one that appears after
it is quarantined whole. A path too long for the kernel is listed through descriptors instead.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from roder_core.brokers import repairs
from roder_core.brokers.next_action import VENV_MARK, is_next_action_name
from roder_core.brokers.protected_names import (
    PROTECTED_NAMES,
    config_paths,
    gitdir_pointer,
    looks_like_git_dir,
    referenced_git_dirs,
)

Identity = tuple[int, int, int, int, int]
_GIT_DIR_NAMES = frozenset({"HEAD", "objects", "refs"})
#: What makes a root folder a git dir git would read (a bare repository): ordinary names a project
#: may well have (``config/``, ``refs/``), so they are only guarded once the root looks like one.
_ROOT_GIT_ENTRIES = _GIT_DIR_NAMES | {"config"}


def _identity(st: os.stat_result) -> Identity:
    if stat.S_ISDIR(st.st_mode):
        return (st.st_dev, st.st_ino, stat.S_IFMT(st.st_mode), 0, 0)
    return (st.st_dev, st.st_ino, stat.S_IFMT(st.st_mode), st.st_mtime_ns, st.st_size)


@dataclass
class TreeGuard:
    """Protected entries of the roots (path -> identity), plus what else must stay read-only."""

    roots: tuple[Path, ...]
    #: Files that run code at the user's next action (``next_action``) are guarded too.
    next_action: bool = True
    entries: dict[Path, Identity] = field(default_factory=dict)
    #: Symlinks among the entries and where they point (restored if replaced).
    links: dict[Path, str] = field(default_factory=dict)
    #: Existing paths outside ``entries`` that must be read-only (referenced git dirs, hooksPath).
    extra: set[Path] = field(default_factory=set)
    #: Referenced paths that do not exist yet: created by a command, they are quarantined.
    watched: set[Path] = field(default_factory=set)
    #: Folders the command could write into but Roder could not list (permissions, an error):
    #: what is inside them is unknown, so before a command they refuse it and after one they are
    #: quarantined whole.
    unlistable: list[tuple[Path, str]] = field(default_factory=list)
    #: Identity of each root's ``HEAD``, ``objects``, ``refs`` and ``config``, whether or not the
    #: root looks like a git dir (to tell what a command added from what the project had).
    root_marks: dict[Path, Identity] = field(default_factory=dict)

    def readonly_paths(self) -> list[Path]:
        """Everything bubblewrap re-binds read-only (symlinks cannot be bound; they are checked
        after the command instead)."""
        paths = {p for p in self.entries if p not in self.links} | self.extra
        return sorted(paths, key=lambda p: (len(p.parts), str(p)))

    def _inside(self, path: Path) -> bool:
        return any(path == root or path.is_relative_to(root) for root in self.roots)

    def _add(self, path: Path, st: os.stat_result) -> None:
        self.entries[path] = _identity(st)
        if stat.S_ISLNK(st.st_mode):
            with contextlib.suppress(OSError):
                self.links[path] = os.readlink(path)

    def _refer(self, path: Path) -> None:
        if not self._inside(path):
            return  # outside every writable root: read-only in the sandbox already
        if os.path.lexists(path):
            if not os.path.islink(path):
                self.extra.add(path)
        else:
            self.watched.add(path)

    def _git_dir(self, git_dir: Path, worktree: Path) -> None:
        for target in [*referenced_git_dirs(git_dir), *config_paths(git_dir, worktree)]:
            self._refer(target)


def _could_write(folder: Path) -> bool:
    """Whether a command running as this user could change what ``folder`` holds (it owns it,
    so it may chmod it, or it may write and search it)."""
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    return st.st_uid == os.geteuid() or os.access(folder, os.W_OK | os.X_OK)


@contextlib.contextmanager
def _listing(folder: Path, root: Path) -> Iterator[list[os.DirEntry[str]]]:
    """The entries of ``folder``; a path longer than the kernel takes is opened one component
    at a time from ``root`` instead (the entries' ``stat`` stays valid inside the block)."""
    try:
        with os.scandir(folder) as it:
            yield list(it)
        return
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
    fd = repairs.open_folder(root, folder.relative_to(root).parts)
    try:
        with os.scandir(fd) as it:
            yield list(it)
    finally:
        os.close(fd)


def scan(roots: Iterable[Path], *, next_action: bool = True) -> TreeGuard:
    """Walk the roots completely and collect what must stay read-only; with ``next_action``
    (unless the person approved the command) the files of ``next_action`` as well."""
    guard = TreeGuard(tuple(roots), next_action)
    for root in guard.roots:
        _enclosing_repository(guard, root)
    stack = [(root, root) for root in guard.roots]
    while stack:
        folder, root = stack.pop()
        try:
            with _listing(folder, root) as entries:
                _visit(guard, folder, root, entries, stack)
        except FileNotFoundError:
            continue  # removed while the walk ran: nothing left to protect there
        except OSError as exc:
            if len(str(folder)) >= _PATH_MAX or _could_write(folder):  # unknown: fail closed
                guard.unlistable.append((folder, exc.strerror or str(exc)))
    return guard


def _visit(guard: TreeGuard, folder: Path, root: Path, entries: list[os.DirEntry[str]], stack: list[tuple[Path, Path]]) -> None:
    """One folder of the walk: note what it holds that is protected, queue its sub-folders."""
    names = {entry.name for entry in entries}
    if folder in guard.roots:
        _root_marks(guard, folder, entries, git_like=names >= _GIT_DIR_NAMES)
    elif names >= _GIT_DIR_NAMES and (len(str(folder)) >= _PATH_MAX or looks_like_git_dir(folder)):
        with contextlib.suppress(OSError):
            guard._add(folder, os.lstat(folder) if len(str(folder)) < _PATH_MAX else _long_lstat(root, folder))
            guard._git_dir(folder, folder.parent)
        return
    if guard.next_action and VENV_MARK in names and folder not in guard.roots:
        with contextlib.suppress(OSError):
            guard._add(folder, os.lstat(folder) if len(str(folder)) < _PATH_MAX else _long_lstat(root, folder))
        return  # a virtualenv, whatever it is called
    parent = folder.name
    for entry in entries:
        name = entry.name
        if name in PROTECTED_NAMES or (guard.next_action and is_next_action_name(name, parent)):
            path = folder / name
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            guard._add(path, st)
            if entry.name == ".git":
                if stat.S_ISDIR(st.st_mode):
                    guard._git_dir(path, folder)
                elif stat.S_ISREG(st.st_mode):
                    target = gitdir_pointer(path)
                    if target is not None:
                        guard._refer(target)
                        guard._git_dir(target, folder)
            continue
        try:
            if entry.is_dir(follow_symlinks=False):  # from the directory listing: no stat
                stack.append((folder / name, root))
        except OSError:
            continue


#: Paths at least this long are handed to the kernel one component at a time.
_PATH_MAX = os.pathconf("/", "PC_PATH_MAX") if hasattr(os, "pathconf") else 4096
#: bubblewrap takes mount paths whole: a protected entry this deep cannot be re-bound read-only,
#: so the command is refused instead (``HostProcessBroker._launch``).
BIND_MAX = _PATH_MAX - 1


def _long_lstat(root: Path, path: Path) -> os.stat_result:
    with repairs.parent_of(root, path.relative_to(root)) as (folder, name):
        return os.stat(name, dir_fd=folder, follow_symlinks=False)


def _root_marks(guard: TreeGuard, root: Path, entries: list[os.DirEntry[str]], *, git_like: bool) -> None:
    """Note the root's git-dir entries; when the root itself looks like a bare repository (git,
    run there, would read its ``config``), guard them like any git dir's."""
    for entry in entries:
        if entry.name not in _ROOT_GIT_ENTRIES:
            continue
        with contextlib.suppress(OSError):
            st = entry.stat(follow_symlinks=False)
            guard.root_marks[Path(entry.path)] = _identity(st)
            if git_like and looks_like_git_dir(root):
                guard._add(Path(entry.path), st)
    if git_like and looks_like_git_dir(root):
        guard._git_dir(root, root)


def _enclosing_repository(guard: TreeGuard, root: Path) -> None:
    """A root inside a repository (a sub-folder of a checkout): that repository's hooksPath or
    linked worktrees may still point into the root."""
    for folder in root.parents:
        dot_git = folder / ".git"
        if os.path.isdir(dot_git) and not os.path.islink(dot_git):
            guard._git_dir(dot_git, folder)
            return
        if os.path.isfile(dot_git):
            target = gitdir_pointer(dot_git)
            if target is not None:
                guard._git_dir(target, folder)
            return


def changed(before: TreeGuard, after: TreeGuard) -> list[Path]:
    """Protected entries that are new or were replaced, watched paths that now exist and
    folders that can no longer be listed; outermost first, without entries inside another one."""
    marks = {p for p, ident in after.root_marks.items() if before.root_marks.get(p) != ident}
    found = [
        p for p, ident in after.entries.items() if before.entries.get(p) != ident and (p not in after.root_marks or p in marks)
    ]
    found += [p for p in before.watched if _exists(after.roots, p)]
    found += [folder for folder, _why in after.unlistable if folder not in after.roots]
    found.sort(key=lambda p: (len(p.parts), str(p)))
    outer: list[Path] = []
    for path in found:
        if not any(path == o or path.is_relative_to(o) for o in outer):
            outer.append(path)
    return outer


#: Guards of commands still running (background tasks above all). A command that ends checks
#: the tree against each of them too, so what a long-running command changed is caught at the
#: next command's end, not only at its own.
RUNNING: list[TreeGuard] = []


def changed_while_running(before: TreeGuard, after: TreeGuard) -> list[Path]:
    """``changed`` since ``before``, and since the start of every command still running on
    the same roots."""
    found: list[Path] = []
    others = (g for g in RUNNING if g.roots == before.roots and g.next_action == before.next_action and g is not before)
    for guard in [before, *others]:
        found += [p for p in changed(guard, after) if p not in found]
    found.sort(key=lambda p: (len(p.parts), str(p)))
    return [p for i, p in enumerate(found) if not any(p.is_relative_to(o) for o in found[:i])]


def _root_of(roots: tuple[Path, ...], path: Path) -> Path | None:
    return next((r for r in roots if path != r and path.is_relative_to(r)), None)


def _exists(roots: tuple[Path, ...], path: Path) -> bool:
    root = _root_of(roots, path)
    return root is not None and repairs.lexists(root, path.relative_to(root))


def quarantine(paths: Iterable[Path], before: TreeGuard, quarantine_dir: Path) -> list[str]:
    """Move ``paths`` out of the workspace (kept, not deleted) and put replaced symlinks back;
    returns one line per path for the tool result. Every step goes through ``repairs``: a path
    whose folders were swapped for symlinks meanwhile is refused, never followed. What cannot be
    moved (a tree too deep to copy to another file system) is renamed where it is, so its name no
    longer runs anything; only what can be neither is left, and the line says so."""
    moved: list[str] = []
    stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}-{time.monotonic_ns() % 1_000_000}"
    for path in paths:
        root = _root_of(before.roots, path)
        if root is None:
            continue
        relative = path.relative_to(root)
        # a path too long to mirror (deeper than the kernel takes) is kept under a short name
        short = len(str(quarantine_dir / stamp / relative)) < _PATH_MAX // 2
        destination = quarantine_dir / stamp / (relative if short else Path(f"long-{len(moved)}", relative.name))
        shown = relative.as_posix()
        try:
            repairs.move_out(root, relative, destination)
            line = f"{shown} -> {destination}"
        except FileNotFoundError:
            continue  # gone already
        except repairs.RepairRefused as exc:
            moved.append(f"{shown}: not moved, nothing followed: {exc.strerror} while Roder moved it")
            continue
        except (OSError, RecursionError) as exc:
            # too deep to copy to another file system, say: defuse the name where it is
            aside = f"{relative.name}.roder-quarantined-{stamp}"
            try:
                repairs.rename_aside(root, relative, aside)
            except OSError as again:
                moved.append(f"{shown}: could neither be moved out ({exc}) nor renamed ({again}); remove it yourself")
                continue
            line = f"{shown}: renamed to {aside} where it was (it could not be moved out: {exc}); delete it yourself"
        if path in before.links:
            with contextlib.suppress(OSError):
                repairs.put_symlink(root, relative, before.links[path])
                line += " (the original symlink was put back)"
        moved.append(line)
    return moved
