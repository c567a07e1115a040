"""Git-based snapshots of a runner's workspace: tracked and untracked files, restorable.

A snapshot is a commit in a git directory of Roder's own, kept apart from the workspace (the
user's repository, if any, is never touched: no commits, no refs, no index changes). Taking one
stages every file git would see (tracked and untracked, minus ignored ones) into that git dir's
index, writes the tree and a commit, and names it ``refs/roder/snapshots/<id>``; the commit's
subject holds the snapshot's metadata as one JSON line (thread, item, label). Restoring stages
the current files again and then ``read-tree -u --reset`` to the snapshot: changed files get the
snapshot's content, files created since are removed, ignored files are left alone.

Git runs where the files are: on this machine for runners whose workspace is the local folder
(``local``, ``container``, which mounts it) and in the runner otherwise (ssh), always with the
program-running config switched off (``safe_git``). The git dir lives in Roder's data folder,
or, on an ssh host, under ``~/.cache/roder`` there.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roder_core.brokers.safe_git import git_argv, git_env
from roder_core.errors import RoderError
from roder_core.ir import new_id
from roder_core.kernel.services import InternalCommandResult, RunnerSession

REF_PREFIX = "refs/roder/snapshots/"
_IDENTITY = ("-c", "user.name=Roder", "-c", "user.email=roder@localhost", "-c", "core.quotepath=off")
_SNAPSHOT_ID = re.compile(r"^snap_[A-Za-z0-9]+$")

Exec = Callable[[list[str]], Awaitable[InternalCommandResult]]


@dataclass(frozen=True)
class Snapshot:
    id: str
    commit: str
    created_at: float
    files: int
    thread_id: str | None = None
    item_id: str | None = None
    label: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "commit": self.commit,
            "createdAt": self.created_at,
            "files": self.files,
            "threadId": self.thread_id,
            "itemId": self.item_id,
            "label": self.label,
        }


class SnapshotError(RoderError):
    """Git could not take, list or restore a snapshot; the message holds git's words."""


async def _local_exec(argv: list[str]) -> InternalCommandResult:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=git_env(),
    )
    out, err = await proc.communicate()
    return InternalCommandResult(proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))


class WorkspaceSnapshots:
    """Snapshots of one runner session's workspace."""

    def __init__(self, session: RunnerSession, runner: str, local_workspace: Path, data_dir: Path) -> None:
        key = hashlib.sha256(f"{runner}\0{local_workspace}\0{session.workspace}".encode()).hexdigest()[:20]
        self._files_local = session.files_local
        if self._files_local:
            self._git_dir = str(data_dir / "runner-snapshots" / f"{key}.git")
            self._exec: Exec = _local_exec
        else:
            self._git_dir = f"{session.state_dir}/snapshots/{key}.git"
            self._exec = lambda argv: session.run_internal(["env", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", *argv])
        self._workspace = session.workspace
        self._lock = asyncio.Lock()

    def _argv(self, *args: str) -> list[str]:
        base = ["--git-dir", self._git_dir, "--work-tree", self._workspace, *_IDENTITY, *args]
        return git_argv(base, cwd=Path(self._workspace) if self._files_local else None)

    async def _git(self, *args: str) -> str:
        result = await self._exec(await asyncio.to_thread(self._argv, *args))
        if result.exit_code != 0:
            detail = (result.stderr or result.stdout).strip()[:600]
            raise SnapshotError(f"git {args[0]} failed for the snapshot of {self._workspace}: {detail}")
        return result.stdout

    async def _init(self) -> None:
        if self._files_local:
            Path(self._git_dir).parent.mkdir(parents=True, exist_ok=True)
        else:
            made = await self._exec(["mkdir", "-p", self._git_dir.rsplit("/", 1)[0]])
            if made.exit_code != 0:
                raise SnapshotError(f"could not create the snapshot folder: {made.stderr.strip()}")
        result = await self._exec(git_argv(["init", "-q", "--bare", self._git_dir]))
        if result.exit_code != 0:
            raise SnapshotError(f"git init failed for the snapshot store: {(result.stderr or result.stdout).strip()[:600]}")

    async def create(self, *, thread_id: str | None = None, item_id: str | None = None, label: str = "") -> Snapshot:
        async with self._lock:
            await self._init()
            await self._git("add", "-A", "--", ".")
            tree = (await self._git("write-tree")).strip()
            snapshot_id = new_id("snap")
            created = time.time()
            meta = json.dumps(
                {"id": snapshot_id, "threadId": thread_id, "itemId": item_id, "label": label, "createdAt": created},
                separators=(",", ":"),
            )
            commit = (await self._git("commit-tree", tree, "-m", meta)).strip()
            await self._git("update-ref", REF_PREFIX + snapshot_id, commit)
            files = len((await self._git("ls-tree", "-r", "--name-only", "-z", tree)).split("\0")) - 1
            return Snapshot(snapshot_id, commit, created, files, thread_id, item_id, label)

    async def list(self) -> list[Snapshot]:
        async with self._lock:
            await self._init()
            out = await self._git(
                "for-each-ref", "--sort=creatordate", "--format=%(objectname) %(tree) %(contents:subject)", REF_PREFIX
            )
            rows = []
            for line in out.splitlines():
                parts = line.split(" ", 2)
                if len(parts) < 3:
                    continue
                commit, tree, subject = parts
                try:
                    meta = json.loads(subject)
                except ValueError:
                    continue
                listing = await self._git("ls-tree", "-r", "--name-only", "-z", tree)
                rows.append(
                    Snapshot(
                        meta["id"],
                        commit,
                        float(meta.get("createdAt") or 0),
                        len(listing.split("\0")) - 1,
                        meta.get("threadId"),
                        meta.get("itemId"),
                        meta.get("label") or "",
                    )
                )
            return rows

    async def get(self, snapshot_id: str) -> Snapshot:
        if not _SNAPSHOT_ID.match(snapshot_id):
            raise SnapshotError(f"{snapshot_id!r} is not a snapshot id")
        for snapshot in await self.list():
            if snapshot.id == snapshot_id:
                return snapshot
        raise SnapshotError(f"no snapshot {snapshot_id} of {self._workspace}")

    async def restore(self, snapshot_id: str) -> Snapshot:
        """Put the workspace back as it was when ``snapshot_id`` was taken."""
        snapshot = await self.get(snapshot_id)
        async with self._lock:
            await self._git("add", "-A", "--", ".")
            await self._git("read-tree", "-u", "--reset", snapshot.commit)
        return snapshot

    async def delete(self, snapshot_id: str) -> Snapshot:
        snapshot = await self.get(snapshot_id)
        async with self._lock:
            await self._git("update-ref", "-d", REF_PREFIX + snapshot.id)
        return snapshot
