"""Rewind, undo and redo, all through control-plane methods a remote client has too.

Restoring the conversation forks the thread to just before a user message (``thread/fork`` with
``beforeItemId``; the original thread is never modified) and puts that message back in the
prompt. Restoring the code rolls back, newest first, every hunk Roder's edit tools recorded from
that message on (``hunk/list`` with ``sinceItemId``, then ``hunk/rollback``). Shell commands run
in that span changed files no hunk records: when the thread's runner took a snapshot as that
turn started (``snapshots = "turn"``, ``runners/snapshot``), the snapshot is restored instead,
shell changes included; otherwise they are named as not restorable, never skipped silently.
``/undo`` is a rewind of both to the last prompt; ``/redo`` re-applies the hunks (``hunk/apply``)
and returns to the thread that still holds the undone turn.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from roder_core.ir import UserMessageItem
from roder_core.server.protocol import THREAD_READ, ThreadReadParams
from roder_core.server.protocol_changes import (
    HUNK_APPLY,
    HUNK_LIST,
    HUNK_ROLLBACK,
    HunkListResult,
    HunkParams,
    ThreadChangesParams,
)
from roder_core.server.protocol_runners import RUNNERS_SNAPSHOT, RunnersSnapshotParams

if TYPE_CHECKING:
    from roder_core.server.app_client import AppClient

#: How a rewind restores: ids of the choices the rewind screen offers.
BOTH, CONVERSATION, CODE = "both", "conversation", "code"
#: Between a fork's title and the prompt its rewind went back before.
REWOUND = " · before "


@dataclass
class CodeRestore:
    """What restoring the code did: hunks rolled back (in order), files it could not change,
    and the commands whose changes are not restorable."""

    hunk_ids: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    unrestorable: list[str] = field(default_factory=list)
    #: The runner snapshot restored instead of hunks (it covers shell commands' changes too).
    snapshot: str | None = None

    def summary(self) -> str:
        files = sorted(set(self.paths))
        if self.snapshot is not None:
            return (
                f"restored the workspace snapshot {self.snapshot} taken when this message's turn started "
                "(shell commands' changes included)"
            )
        lines = [f"restored {len(self.hunk_ids)} change(s) in {len(files)} file(s)" + (f": {', '.join(files)}" if files else "")]
        lines += [f"could not restore: {problem}" for problem in self.failed]
        lines += [f"not restorable (changed by a shell command, not Roder's edit tools): $ {c}" for c in self.unrestorable]
        return "\n".join(lines)


@dataclass
class Undone:
    """One ``/undo``: the thread that still holds the undone turn, and the hunks rolled back."""

    thread_id: str
    hunk_ids: list[str]
    text: str


async def rewind_points(client: AppClient, thread_id: str) -> list[UserMessageItem]:
    """The thread's prompts (steer messages are part of their turn, and messages the user did not
    type, such as a team's, are no prompt of theirs: neither is a rewind point)."""
    return [item for item, _started in await _prompts(client, thread_id)]


async def rewind_rows(client: AppClient, thread_id: str) -> list[tuple[UserMessageItem, str]]:
    """The rewind points with their labels: number, prompt, and how long ago its turn began (the
    same prompt sent twice reads as two different rows)."""
    now = time.time()
    return [(item, label(item, index, now - started)) for index, (item, started) in enumerate(await _prompts(client, thread_id))]


async def _prompts(client: AppClient, thread_id: str) -> list[tuple[UserMessageItem, float]]:
    thread = (await client.call(THREAD_READ, ThreadReadParams(thread_id=thread_id, include_turns=True))).thread
    return [
        (item, turn.started_at)
        for turn in thread.turns
        for item in turn.items
        if isinstance(item, UserMessageItem) and not item.steer and not item.sender
    ]


async def fork_title(client: AppClient, thread_id: str, point_id: str) -> str:
    """The title of the fork a rewind (or /undo) makes: the thread's own, then which prompt (by
    number and text) it went back before, so each rewind's fork reads differently in the sidebar
    and the picker."""
    title = (await client.call(THREAD_READ, ThreadReadParams(thread_id=thread_id))).thread.title or "untitled"
    prompts = await _prompts(client, thread_id)
    number, text = next(((n + 1, item.text) for n, (item, _s) in enumerate(prompts) if item.id == point_id), (0, ""))
    first = " ".join(text.split())
    return f"{title.split(REWOUND)[0]}{REWOUND}{number}. “{first[:40]}{'…' if len(first) > 40 else ''}”"


async def changes_since(client: AppClient, thread_id: str, item_id: str) -> HunkListResult:
    """``hunk/list`` from one message on: the hunks, and the commands that left none."""
    return await client.call(HUNK_LIST, ThreadChangesParams(thread_id=thread_id, since_item_id=item_id))


def describe(changes: HunkListResult) -> str:
    """The note shown before choosing: what restoring the code would and would not revert."""
    files = sorted({h.path for h in changes.hunks})
    lines = [f"code: {len(changes.hunks)} change(s) in {len(files)} file(s) by Roder's edit tools"]
    lines += [f"not restorable (shell): $ {u.command}" for u in changes.unrestorable]
    return "\n".join(lines)


async def restore_code(client: AppClient, thread_id: str, item_id: str) -> CodeRestore:
    from roder_core.server.errors import RpcError

    changes = await changes_since(client, thread_id, item_id)
    if changes.unrestorable:
        # hunks cannot undo what shell commands did; a snapshot taken at that turn can
        snapshot = await turn_snapshot(client, thread_id, item_id)
        if snapshot is not None:
            await client.call(
                RUNNERS_SNAPSHOT, RunnersSnapshotParams(thread_id=thread_id, action="restore", snapshot_id=snapshot)
            )
            return CodeRestore(snapshot=snapshot)
    done = CodeRestore(unrestorable=[u.command for u in changes.unrestorable])
    for hunk in reversed(changes.hunks):
        try:
            result = await client.call(HUNK_ROLLBACK, HunkParams(thread_id=thread_id, hunk_id=hunk.hunk_id))
        except RpcError as exc:
            done.failed.append(exc.message)
            continue
        done.hunk_ids.append(hunk.hunk_id)
        done.paths.append(result.path)
    return done


async def turn_snapshot(client: AppClient, thread_id: str, item_id: str) -> str | None:
    """The id of the runner snapshot taken when the turn of ``item_id`` started (a runner with
    ``snapshots = "turn"``), or None."""
    from roder_core.server.errors import RpcError

    try:
        listed = await client.call(RUNNERS_SNAPSHOT, RunnersSnapshotParams(thread_id=thread_id, action="list", item_id=item_id))
    except RpcError:
        return None
    return listed.snapshots[-1].id if listed.snapshots else None


async def reapply(client: AppClient, undone: Undone) -> list[str]:
    """``/redo``: put the rolled-back hunks back (oldest first); returns the problems met."""
    from roder_core.server.errors import RpcError

    problems: list[str] = []
    for hunk_id in reversed(undone.hunk_ids):
        try:
            await client.call(HUNK_APPLY, HunkParams(thread_id=undone.thread_id, hunk_id=hunk_id))
        except RpcError as exc:
            problems.append(exc.message)
    return problems


def label(item: UserMessageItem, index: int, seconds_ago: float) -> str:
    from roder_tui.widgets.sidebar import age

    first = " ".join(item.text.split())
    return f"{index + 1}. {first[:100]}{'…' if len(first) > 100 else ''}  · {age(seconds_ago)} ago"
