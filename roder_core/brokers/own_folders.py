"""Roder's own folders inside the sandbox: hidden whole, with one thread's files shown back.

Roder keeps everything it knows under a few folders: config (config.toml, skills, agents), data
(threads' JSONL, stored credentials, the audit log, team channels, workflow journals, plugin
data, memories), cache (task logs, spilled command output, quarantine, MCP logs, installed
plugins) and the background host's folder (the attach socket). The sandbox's filesystem is
readable, so a command of one thread could read another thread's prompts, output and keys there.
Each of these folders is covered by an empty tmpfs instead, whatever it holds (even a workspace:
that is bound back on top), and only what a command legitimately needs is bound back read-only:
installed plugins' code, the user's skills, and the folders of its own thread.

Per-thread folders: spilled output and background-task logs live in ``<folder>/<thread id>/``
(``thread_folder``), so a thread's commands are shown exactly their own.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from roder_core.brokers.secret_paths import outermost
from roder_core.server.host_paths import HostPaths
from roder_core.settings.paths import RoderPaths

#: The folder of output that belongs to no thread (a client's command/exec, a task without a
#: thread): no sandboxed command is shown it.
NO_THREAD = "no-thread"
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,100}")


def thread_folder(base: Path, thread_id: str | None) -> Path:
    """``base``'s folder for one thread's files; an id that is not a plain file name (a stored
    or imported thread could carry anything) is replaced by its digest, never used as a path."""
    if not thread_id:
        return base / NO_THREAD
    if _SAFE_NAME.fullmatch(thread_id) and thread_id != NO_THREAD:
        return base / thread_id
    return base / ("id-" + hashlib.sha256(thread_id.encode("utf-8")).hexdigest()[:32])


@dataclass(frozen=True)
class OwnFolders:
    """What the sandbox hides of Roder and what it shows back of it."""

    #: Roder's folders, each covered by an empty read-only tmpfs.
    hidden: tuple[Path, ...] = ()
    #: Folders holding per-thread subfolders (spilled output, task logs): a command bound to a
    #: thread is shown its own subfolder of each, read-only.
    per_thread: tuple[Path, ...] = ()

    @classmethod
    def of(cls, paths: RoderPaths, env: Mapping[str, str] | None = None) -> OwnFolders:
        """Roder's folders for these paths: config, data, cache, and the background host's
        folder (attach socket, host log) of this data folder; spilled output and task logs kept
        per thread."""
        host = HostPaths.for_data_dir(paths.data_dir, env).directory
        return cls(
            hidden=(paths.config_dir, paths.data_dir, paths.cache_dir, host),
            per_thread=(paths.spill_dir, paths.task_logs_dir),
        )

    def for_thread(self, thread_id: str | None) -> tuple[Path, ...]:
        """The folders a command of ``thread_id`` is shown (created, private, when missing: a
        bind needs its source); none for a command of no thread."""
        if not thread_id:
            return ()
        shown = []
        for base in self.per_thread:
            folder = thread_folder(base, thread_id)
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            shown.append(folder)
        return tuple(shown)

    def existing(self) -> list[Path]:
        """The hidden folders on this machine, resolved (a symlink is hidden at its target),
        outermost first and without those inside another."""
        real = (Path(os.path.realpath(folder)) for folder in self.hidden)
        return outermost(path for path in real if path.is_dir() and path != Path("/"))


def visible(path: Path, hidden: Iterable[Path], roots: Iterable[Path]) -> bool:
    """Whether ``path`` is visible in the sandbox before anything is shown back: not inside a
    hidden folder, or inside a root (a workspace) bound back on top of that folder (the root is
    the folder itself or lies inside it)."""
    covering = [h for h in hidden if path == h or path.is_relative_to(h)]
    if not covering:
        return True
    deepest = max(len(h.parts) for h in covering)
    return any((path == r or path.is_relative_to(r)) and len(r.parts) >= deepest for r in roots)
