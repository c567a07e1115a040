"""git/changes/*, workspace/changes/list and hunk/*: reviewing (and undoing) what changed.

Git runs through the workspace's process broker; hunks come from the thread's fileChange items
(the unified diffs the edit tools recorded), and a rollback writes through the fs broker after
the policy engine allowed an edit of that path.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from pathlib import Path

from roder_core.brokers import ProcessResult
from roder_core.brokers.safe_git import env_argv_prefix, git_argv
from roder_core.ir import CommandExecutionItem, FileChangeItem, Item, Thread
from roder_core.kernel.tools import PolicySubject
from roder_core.policy.commandline import changes_nothing
from roder_core.server.dispatcher import CallContext, Dispatcher, handles
from roder_core.server.errors import RUNTIME_ERROR, InvalidParams, RpcError
from roder_core.server.methods.core import absolute_path
from roder_core.server.methods.host import _Probe, check_policy, workspace_of
from roder_core.server.protocol_changes import (
    GIT_CHANGES_LIST,
    GIT_CHANGES_READ,
    HUNK_APPLY,
    HUNK_LIST,
    HUNK_READ,
    HUNK_ROLLBACK,
    WORKSPACE_CHANGES_LIST,
    GitChangesListParams,
    GitChangesListResult,
    GitChangesReadParams,
    GitChangesReadResult,
    GitFileChange,
    HunkApplyResult,
    HunkInfo,
    HunkListResult,
    HunkParams,
    HunkReadResult,
    HunkRollbackResult,
    ThreadChangesParams,
    UnrestorableChange,
    WorkspaceChangesListResult,
    WorkspaceFileChange,
)

_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")
BINARY_SNIFF = 8000

# --------------------------------------------------------------------------- git


async def _run_git(app: Dispatcher, workspace: Path, *args: str) -> ProcessResult:
    """Git through the process broker, with config-driven programs and outside GIT_* switched off."""
    process = app.brokers(workspace).process
    env, _dropped = process.child_env()
    argv = [*env_argv_prefix(env), *await asyncio.to_thread(git_argv, list(args), cwd=workspace)]
    return await process.run(argv, cwd=workspace, timeout=30)


async def _git(app: Dispatcher, workspace: Path, *args: str) -> str:
    result = await _run_git(app, workspace, "-c", "core.quotepath=off", *args)
    if result.exit_code != 0:
        raise RpcError(RUNTIME_ERROR, f"git {args[0]} failed in {workspace}: {result.output.strip()[:500]}")
    return result.output


def _unquote(path: str) -> str:
    if len(path) >= 2 and path.startswith('"') and path.endswith('"'):
        return (
            path[1:-1]
            .encode("latin-1", "backslashreplace")
            .decode("unicode_escape")
            .encode("latin-1")
            .decode("utf-8", errors="replace")
        )
    return path


def _numstat(output: str) -> dict[str, tuple[int, int, bool]]:
    stats: dict[str, tuple[int, int, bool]] = {}
    for line in output.splitlines():
        parts = line.split("\t")
        if len(parts) < 3:
            continue
        added, removed, path = parts[0], parts[1], _unquote(parts[-1])
        binary = added == "-" and removed == "-"
        stats[path] = (0 if binary else int(added), 0 if binary else int(removed), binary)
    return stats


def _sniff(app: Dispatcher, workspace: Path, path: str) -> tuple[bool, bytes]:
    data = app.brokers(workspace).fs.read_bytes(str(workspace / path), max_bytes=2 * 1024 * 1024)
    return b"\0" in data[:BINARY_SNIFF], data


async def _has_head(app: Dispatcher, workspace: Path) -> bool:
    result = await _run_git(app, workspace, "rev-parse", "--verify", "-q", "HEAD")
    return result.exit_code == 0


def _git_workspace(app: Dispatcher, value: str) -> Path:
    path = absolute_path(value, "workspace")
    workspace_of(app, path)
    if not path.is_dir():
        raise InvalidParams(f"workspace {value!r} is not a directory")
    return path


@handles(GIT_CHANGES_LIST)
async def git_changes_list(app: Dispatcher, params: GitChangesListParams, ctx: CallContext) -> GitChangesListResult:
    workspace = _git_workspace(app, params.workspace)
    status = await _git(app, workspace, "status", "--porcelain=v1", "--untracked-files=all")
    base = ["HEAD"] if await _has_head(app, workspace) else ["--cached"]
    stats = _numstat(await _git(app, workspace, "diff", *base, "--numstat"))
    files = []
    for line in status.splitlines():
        if len(line) < 4 or line[2] != " ":
            continue
        code, rest = line[:2], line[3:]
        original = None
        if " -> " in rest:
            original, rest = (_unquote(p) for p in rest.split(" -> ", 1))
        path = _unquote(rest)
        if code == "??":
            binary, data = _sniff(app, workspace, path)
            additions = 0 if binary else len(data.decode("utf-8", errors="replace").splitlines())
            files.append(GitFileChange(path=path, status="??", additions=additions, binary=binary))
            continue
        added, removed, binary = stats.get(path, (0, 0, False))
        files.append(
            GitFileChange(
                path=path, status=code.strip() or code, additions=added, deletions=removed, binary=binary, original_path=original
            )
        )
    return GitChangesListResult(workspace=str(workspace), files=files)


@handles(GIT_CHANGES_READ)
async def git_changes_read(app: Dispatcher, params: GitChangesReadParams, ctx: CallContext) -> GitChangesReadResult:
    workspace = _git_workspace(app, params.workspace)
    relative = params.path
    if Path(relative).is_absolute():
        relative = str(Path(relative).relative_to(workspace)) if Path(relative).is_relative_to(workspace) else relative
    tracked = await _run_git(app, workspace, "ls-files", "--error-unmatch", "--", relative)
    if tracked.exit_code != 0:
        binary, data = _sniff(app, workspace, relative)
        if binary:
            return GitChangesReadResult(path=relative, binary=True, patch=f"Binary file {relative} added ({len(data)} bytes)\n")
        lines = data.decode("utf-8", errors="replace").splitlines()
        patch = f"--- /dev/null\n+++ b/{relative}\n@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{ln}\n" for ln in lines)
        return GitChangesReadResult(path=relative, binary=False, patch=patch)
    base = ["HEAD"] if await _has_head(app, workspace) else ["--cached"]
    patch = await _git(app, workspace, "diff", *base, "--", relative)
    binary = "Binary files " in patch and "\n@@" not in patch
    return GitChangesReadResult(path=relative, binary=binary, patch=patch)


# --------------------------------------------------------------------------- thread changes, hunks


@dataclass
class Hunk:
    info: HunkInfo
    lines: list[str] = field(default_factory=list)

    @property
    def old(self) -> list[str]:
        return [ln[1:] for ln in self.lines if ln[:1] in (" ", "-") or ln == ""]

    @property
    def new(self) -> list[str]:
        return [ln[1:] for ln in self.lines if ln[:1] in (" ", "+") or ln == ""]


def parse_hunks(diff: str, path: str, turn_id: str, item_id: str, change_index: int) -> list[Hunk]:
    hunks: list[Hunk] = []
    current: Hunk | None = None
    for line in diff.splitlines():
        match = _HUNK.match(line)
        if match:
            current = Hunk(
                HunkInfo(
                    hunk_id=f"{item_id}:{change_index}:{len(hunks)}",
                    path=path,
                    turn_id=turn_id,
                    item_id=item_id,
                    header=line,
                    old_start=int(match[1]),
                    new_start=int(match[2]),
                )
            )
            hunks.append(current)
            continue
        if line.startswith(("--- ", "+++ ", "diff ", "index ", "\\")):
            continue
        if current is None:
            if not line.startswith(("+", "-", " ")):
                continue
            current = Hunk(
                HunkInfo(hunk_id=f"{item_id}:{change_index}:0", path=path, turn_id=turn_id, item_id=item_id, header="@@")
            )
            hunks.append(current)
        current.lines.append(line)
    for hunk in hunks:
        hunk.info.additions = sum(1 for ln in hunk.lines if ln.startswith("+"))
        hunk.info.deletions = sum(1 for ln in hunk.lines if ln.startswith("-"))
    return hunks


async def _thread(app: Dispatcher, thread_id: str) -> Thread:
    return await app.runtime.full_thread((await app.runtime.resume_thread(thread_id)).id)


def _span(thread: Thread, turn_id: str | None, since_item_id: str | None = None) -> list[tuple[str, Item]]:
    """(turn id, item) of a thread, of one turn, or from one item on."""
    rows = [(turn.id, item) for turn in thread.turns if turn_id is None or turn.id == turn_id for item in turn.items]
    if since_item_id is not None:
        start = next((i for i, (_, item) in enumerate(rows) if item.id == since_item_id), None)
        if start is None:
            raise InvalidParams(f"no item {since_item_id!r} in thread {thread.id}")
        rows = rows[start:]
    return rows


def _file_changes(thread: Thread, turn_id: str | None, since_item_id: str | None = None) -> list[tuple[str, FileChangeItem]]:
    return [(tid, item) for tid, item in _span(thread, turn_id, since_item_id) if isinstance(item, FileChangeItem)]


def thread_hunks(thread: Thread, turn_id: str | None, since_item_id: str | None = None) -> list[Hunk]:
    hunks: list[Hunk] = []
    for tid, item in _file_changes(thread, turn_id, since_item_id):
        for index, change in enumerate(item.changes):
            hunks += parse_hunks(change.diff, change.move_path or change.path, tid, item.id, index)
    return hunks


@handles(WORKSPACE_CHANGES_LIST)
async def workspace_changes(app: Dispatcher, params: ThreadChangesParams, ctx: CallContext) -> WorkspaceChangesListResult:
    thread = await _thread(app, params.thread_id)
    files = []
    for tid, item in _file_changes(thread, params.turn_id, params.since_item_id):
        for index, change in enumerate(item.changes):
            hunks = parse_hunks(change.diff, change.path, tid, item.id, index)
            files.append(
                WorkspaceFileChange(
                    path=change.move_path or change.path,
                    kind=change.kind,
                    turn_id=tid,
                    item_id=item.id,
                    call_id=item.call_id,
                    additions=sum(h.info.additions for h in hunks),
                    deletions=sum(h.info.deletions for h in hunks),
                )
            )
    return WorkspaceChangesListResult(files=files)


@handles(HUNK_LIST)
async def hunk_list(app: Dispatcher, params: ThreadChangesParams, ctx: CallContext) -> HunkListResult:
    thread = await _thread(app, params.thread_id)
    unrestorable = [
        UnrestorableChange(call_id=item.call_id, turn_id=tid, item_id=item.id, command=item.command)
        for tid, item in _span(thread, params.turn_id, params.since_item_id)
        # a command that certainly changes no file (echo, ls, git status) has nothing to restore
        if isinstance(item, CommandExecutionItem) and not changes_nothing(item.command)
    ]
    return HunkListResult(
        hunks=[h.info for h in thread_hunks(thread, params.turn_id, params.since_item_id)], unrestorable=unrestorable
    )


async def _hunk(app: Dispatcher, params: HunkParams) -> tuple[Thread, Hunk]:
    thread = await _thread(app, params.thread_id)
    hunk = next((h for h in thread_hunks(thread, None) if h.info.hunk_id == params.hunk_id), None)
    if hunk is None:
        raise InvalidParams(f"no hunk {params.hunk_id!r} in thread {params.thread_id}")
    return thread, hunk


@handles(HUNK_READ)
async def hunk_read(app: Dispatcher, params: HunkParams, ctx: CallContext) -> HunkReadResult:
    _, hunk = await _hunk(app, params)
    return HunkReadResult(
        hunk=hunk.info, patch="\n".join([hunk.info.header, *hunk.lines]) + "\n", old_lines=hunk.old, new_lines=hunk.new
    )


def _find(lines: list[str], block: list[str], near: int) -> int | None:
    """Index where ``block`` occurs in ``lines``, the occurrence closest to ``near``."""
    if not block:
        return min(max(near, 0), len(lines))
    starts = [i for i in range(len(lines) - len(block) + 1) if lines[i : i + len(block)] == block]
    return min(starts, key=lambda i: abs(i - near)) if starts else None


async def _writable(app: Dispatcher, thread: Thread, hunk: Hunk) -> Path:
    """The hunk's file, once the policy engine allowed editing it (as for the edit tool)."""
    workspace = Path(thread.cwd)
    path = Path(hunk.info.path) if Path(hunk.info.path).is_absolute() else workspace / hunk.info.path
    probe = _Probe("edit", "edit", PolicySubject(tool="edit", value=str(path), kind="path", writes=True), read_only=False)
    await check_policy(app, workspace_of(app, path), "edit", {"path": str(path)}, probe)
    return path


def _replace(text: str, path: Path, find: list[str], put: list[str], near: int) -> str:
    """``text`` with the block ``find`` (the occurrence nearest line ``near``) replaced by ``put``."""
    lines = text.splitlines()
    at = _find(lines, find, near)
    if at is None:
        raise RpcError(RUNTIME_ERROR, f"cannot change {path}: it changed since this hunk was written")
    changed = lines[:at] + put + lines[at + len(find) :]
    ending = "\n" if text.endswith("\n") or not text else ""
    return "\n".join(changed) + (ending if changed else "")


@handles(HUNK_ROLLBACK)
async def hunk_rollback(app: Dispatcher, params: HunkParams, ctx: CallContext) -> HunkRollbackResult:
    thread, hunk = await _hunk(app, params)
    path = await _writable(app, thread, hunk)
    fs = app.brokers(Path(thread.cwd)).fs
    try:
        text = fs.read_bytes(str(path)).decode("utf-8")
    except FileNotFoundError:
        raise RpcError(RUNTIME_ERROR, f"cannot roll back: {path} no longer exists") from None
    restored = _replace(text, path, hunk.new, hunk.old, hunk.info.new_start - 1)
    if not restored and not hunk.old and all(ln.startswith("+") for ln in hunk.lines):
        fs.delete(str(path))
        return HunkRollbackResult(hunk=hunk.info, path=str(path), deleted=True)
    fs.write_bytes(str(path), restored.encode("utf-8"))
    return HunkRollbackResult(hunk=hunk.info, path=str(path))


@handles(HUNK_APPLY)
async def hunk_apply(app: Dispatcher, params: HunkParams, ctx: CallContext) -> HunkApplyResult:
    """The inverse of hunk/rollback (``/redo``): put the hunk's new lines back in place."""
    thread, hunk = await _hunk(app, params)
    path = await _writable(app, thread, hunk)
    fs = app.brokers(Path(thread.cwd)).fs
    try:
        text = fs.read_bytes(str(path)).decode("utf-8")
    except FileNotFoundError:
        if hunk.old:
            raise RpcError(RUNTIME_ERROR, f"cannot re-apply: {path} no longer exists") from None
        fs.write_bytes(str(path), ("\n".join(hunk.new) + "\n").encode("utf-8"))
        return HunkApplyResult(hunk=hunk.info, path=str(path), created=True)
    fs.write_bytes(str(path), _replace(text, path, hunk.old, hunk.new, hunk.info.old_start - 1).encode("utf-8"))
    return HunkApplyResult(hunk=hunk.info, path=str(path))
