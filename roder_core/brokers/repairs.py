"""Roder's own repairs of a workspace, through directory descriptors and ``O_NOFOLLOW`` only.

When Roder moves something a command left behind into its quarantine, puts back a symlink a
command replaced, or restores a file, the workspace may still be changing under it: a
background task can swap any folder on the way for a symlink between Roder's check and its
move. A repair that re-resolves a path string would then follow that link out of the workspace
(and, say, move ``~/.bashrc`` into the quarantine). So every repair here opens the workspace
root, then each folder on the way one component at a time with ``O_NOFOLLOW | O_DIRECTORY``
relative to the previous one, and acts on the last name relative to that descriptor
(``renameat``, ``symlinkat``, ``unlinkat``). A component that is, or has just become, a symlink
fails the open; nothing outside the root is ever reached. Depth does not matter either: no path
longer than one component is handed to the kernel, so ``PATH_MAX`` never cuts a repair short.

The file tools work the same way (``fs.WorkspaceFileSystem``); ``tests/security/
test_repair_races.py`` fails when a repair goes around this module.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Bytes copied per read when a move crosses file systems.
_CHUNK = 1 << 20


class RepairRefused(OSError):
    """A repair found a symlink (or something else unexpected) where a folder must be."""


def _component(part: str) -> str:
    if not part or part in (".", "..") or "/" in part or "\0" in part:
        raise RepairRefused(errno.EINVAL, f"{part!r} is not a single path component")
    return part


def open_folder(root: Path, parts: Sequence[str]) -> int:
    """A descriptor of ``root/parts...``: each component opened relative to the last with
    ``O_NOFOLLOW``, so a symlink anywhere on the way is refused rather than followed."""
    fd = os.open(root, _DIR_FLAGS)
    for part in parts:
        try:
            following = os.open(_component(part), _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise RepairRefused(exc.errno, f"{part} is not a folder (a symlink or file took its place)") from None
            raise
        finally:
            os.close(fd)
        fd = following
    return fd


@contextlib.contextmanager
def parent_of(root: Path, relative: Path) -> Iterator[tuple[int, str]]:
    """(descriptor of the folder holding ``relative``, its last name), for the ``*at`` calls."""
    parts = relative.parts
    if not parts:
        raise RepairRefused(errno.EINVAL, "a repair needs a path inside the root, not the root itself")
    fd = open_folder(root, parts[:-1])
    try:
        yield fd, _component(parts[-1])
    finally:
        os.close(fd)


def make_folders(base: Path, relative: Path) -> int:
    """A descriptor of ``base/relative``, creating folders on the way (never through symlinks)."""
    fd = os.open(base, _DIR_FLAGS)
    for part in relative.parts:
        with contextlib.suppress(FileExistsError):
            os.mkdir(_component(part), 0o700, dir_fd=fd)
        try:
            following = os.open(part, _DIR_FLAGS, dir_fd=fd)
        finally:
            os.close(fd)
        fd = following
    return fd


def move_out(root: Path, relative: Path, destination: Path) -> None:
    """Move ``root/relative`` (whatever it is, never followed) to ``destination``, a path in
    Roder's own folder that does not exist yet. Across file systems it is copied through
    descriptors, then removed."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    target = os.open(destination.parent, _DIR_FLAGS)
    try:
        with parent_of(root, relative) as (folder, name):
            try:
                os.rename(name, destination.name, src_dir_fd=folder, dst_dir_fd=target)
                return
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
            _copy_at(folder, name, target, destination.name)
            remove_at(folder, name)
    finally:
        os.close(target)


def remove_at(folder: int, name: str) -> None:
    """Remove ``name`` in ``folder`` (a tree removed through descriptors, never following links)."""
    st = os.stat(name, dir_fd=folder, follow_symlinks=False)
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, dir_fd=folder)
    else:
        os.unlink(name, dir_fd=folder)


def _copy_at(src_folder: int, name: str, dst_folder: int, dst_name: str) -> None:
    """Copy one entry between two folder descriptors: folders recursively, symlinks as links,
    regular files by content; devices, sockets and pipes are left out."""
    st = os.stat(name, dir_fd=src_folder, follow_symlinks=False)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(name, dir_fd=src_folder), dst_name, dir_fd=dst_folder)
    elif stat.S_ISDIR(st.st_mode):
        os.mkdir(dst_name, 0o700, dir_fd=dst_folder)
        src = os.open(name, _DIR_FLAGS, dir_fd=src_folder)
        try:
            dst = os.open(dst_name, _DIR_FLAGS, dir_fd=dst_folder)
            try:
                with os.scandir(src) as entries:
                    names = [entry.name for entry in entries]
                for child in names:
                    _copy_at(src, child, dst, child)
                os.fchmod(dst, stat.S_IMODE(st.st_mode) | stat.S_IRWXU)
            finally:
                os.close(dst)
        finally:
            os.close(src)
    elif stat.S_ISREG(st.st_mode):
        src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=src_folder)
        try:
            dst = os.open(dst_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dst_folder)
            try:
                while chunk := os.read(src, _CHUNK):
                    os.write(dst, chunk)
                os.fchmod(dst, stat.S_IMODE(st.st_mode) & 0o755)
            finally:
                os.close(dst)
        finally:
            os.close(src)


def rename_aside(root: Path, relative: Path, new_name: str) -> None:
    """Rename ``root/relative`` within its own folder (the one move that can neither cross file
    systems nor run out of depth), so a name that would run code stops being that name."""
    with parent_of(root, relative) as (folder, name):
        os.rename(name, _component(new_name), src_dir_fd=folder, dst_dir_fd=folder)


def put_symlink(root: Path, relative: Path, target: str) -> None:
    """Create the symlink ``root/relative`` -> ``target`` (the folder reached without links)."""
    with parent_of(root, relative) as (folder, name):
        os.symlink(target, name, dir_fd=folder)


def lexists(root: Path, relative: Path) -> bool:
    """Whether ``root/relative`` exists, reached without following any link on the way."""
    try:
        with parent_of(root, relative) as (folder, name):
            os.stat(name, dir_fd=folder, follow_symlinks=False)
    except (FileNotFoundError, RepairRefused, NotADirectoryError):
        return False
    return True


@contextlib.contextmanager
def place(root: Path, relative: Path) -> Iterator[tuple[int, str]]:
    """(folder descriptor, name) where ``root/relative`` is to be written afresh: every folder
    on the way made a real folder (a symlink or file put there instead is removed, never
    followed) and whatever held the name removed."""
    parts = relative.parts
    if not parts:
        raise RepairRefused(errno.EINVAL, "a repair needs a path inside the root, not the root itself")
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in parts[:-1]:
            _component(part)
            try:
                st: os.stat_result | None = os.stat(part, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and not stat.S_ISDIR(st.st_mode):
                os.unlink(part, dir_fd=fd)
                st = None
            if st is None:
                os.mkdir(part, 0o755, dir_fd=fd)
            following = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = following
        name = _component(parts[-1])
        with contextlib.suppress(FileNotFoundError):
            remove_at(fd, name)
        yield fd, name
    finally:
        os.close(fd)


def write_file(root: Path, relative: Path, data: bytes, mode: int = 0o644) -> None:
    """Write ``root/relative`` afresh (``place``), never through a link."""
    with place(root, relative) as (folder, name):
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=folder)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)


def copy_in(source: Path, root: Path, relative: Path) -> None:
    """Put a copy of ``source`` (a file or a symlink, from Roder's own folder) at
    ``root/relative`` (``place``)."""
    with place(root, relative) as (folder, name):
        source_folder = os.open(source.parent, _DIR_FLAGS)
        try:
            _copy_at(source_folder, source.name, folder, name)
        finally:
            os.close(source_folder)


def remove_file(root: Path, relative: Path) -> None:
    """Remove the file or symlink ``root/relative`` (folders are left alone); a folder on the
    way that became a link means there is nothing of the root's to remove."""
    try:
        with parent_of(root, relative) as (folder, name):
            st = os.stat(name, dir_fd=folder, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                os.unlink(name, dir_fd=folder)
    except (FileNotFoundError, RepairRefused):
        return
