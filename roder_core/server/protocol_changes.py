"""Protocol models of change review (seed 004): git changes, a thread's workspace changes and
the hunks of its file edits, which can be rolled back one by one."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from roder_core.ir import empty_list
from roder_core.server.protocol import MethodSpec, ProtocolModel, register


class GitChangesListParams(ProtocolModel):
    workspace: str


class GitFileChange(ProtocolModel):
    path: str
    #: Porcelain status letters (``M``, ``A``, ``D``, ``R``, ``??`` for untracked).
    status: str
    additions: int = 0
    deletions: int = 0
    binary: bool = False
    original_path: str | None = None


class GitChangesListResult(ProtocolModel):
    workspace: str
    files: list[GitFileChange]


class GitChangesReadParams(ProtocolModel):
    workspace: str
    path: str


class GitChangesReadResult(ProtocolModel):
    path: str
    binary: bool
    patch: str


class ThreadChangesParams(ProtocolModel):
    thread_id: str
    turn_id: str | None = None
    #: Only what was done from this item on (a user message: what rewinding to it reverts).
    since_item_id: str | None = None


class WorkspaceFileChange(ProtocolModel):
    path: str
    kind: Literal["add", "delete", "update", "move"]
    turn_id: str
    item_id: str
    call_id: str | None = None
    additions: int = 0
    deletions: int = 0


class WorkspaceChangesListResult(ProtocolModel):
    files: list[WorkspaceFileChange]


class HunkInfo(ProtocolModel):
    hunk_id: str
    path: str
    turn_id: str
    item_id: str
    header: str
    old_start: int = 1
    new_start: int = 1
    additions: int = 0
    deletions: int = 0


class UnrestorableChange(ProtocolModel):
    """A shell command run in the same span: whatever it changed left no hunk to revert."""

    call_id: str | None = None
    turn_id: str
    item_id: str
    command: str


class HunkListResult(ProtocolModel):
    hunks: list[HunkInfo]
    #: Commands (bash) run in the listed span; their file changes cannot be restored from hunks.
    unrestorable: list[UnrestorableChange] = Field(default_factory=empty_list)


class HunkParams(ProtocolModel):
    thread_id: str
    hunk_id: str


class HunkReadResult(ProtocolModel):
    hunk: HunkInfo
    patch: str
    old_lines: list[str] = Field(default_factory=empty_list)
    new_lines: list[str] = Field(default_factory=empty_list)


class HunkRollbackResult(ProtocolModel):
    hunk: HunkInfo
    path: str
    rolled_back: bool = True
    deleted: bool = False


class HunkApplyResult(ProtocolModel):
    hunk: HunkInfo
    path: str
    #: The hunk created the file (it did not exist when re-applied).
    created: bool = False


GIT_CHANGES_LIST = MethodSpec(
    "git/changes/list",
    "changes",
    GitChangesListParams,
    GitChangesListResult,
    "Uncommitted git changes of a workspace (untracked binary files marked binary, 0 additions).",
)

GIT_CHANGES_READ = MethodSpec(
    "git/changes/read",
    "changes",
    GitChangesReadParams,
    GitChangesReadResult,
    "The patch of one changed file (a binary-file summary for binary files).",
)

WORKSPACE_CHANGES_LIST = MethodSpec(
    "workspace/changes/list",
    "changes",
    ThreadChangesParams,
    WorkspaceChangesListResult,
    "Files a thread's turns changed (from its fileChange items).",
)

HUNK_LIST = MethodSpec(
    "hunk/list",
    "changes",
    ThreadChangesParams,
    HunkListResult,
    "Hunks of a thread's (or turn's, or since one item) edits, and the commands whose changes have none.",
)

HUNK_READ = MethodSpec("hunk/read", "changes", HunkParams, HunkReadResult, "One hunk with its old and new lines.")

HUNK_ROLLBACK = MethodSpec(
    "hunk/rollback",
    "changes",
    HunkParams,
    HunkRollbackResult,
    "Undo one hunk in the file on disk (policy applies; refused if the file changed since).",
)

HUNK_APPLY = MethodSpec(
    "hunk/apply",
    "changes",
    HunkParams,
    HunkApplyResult,
    "Re-apply a rolled-back hunk (redo; policy applies; refused if the file changed since).",
)

_SPECS: list[MethodSpec[Any, Any]] = [
    GIT_CHANGES_LIST,
    GIT_CHANGES_READ,
    WORKSPACE_CHANGES_LIST,
    HUNK_LIST,
    HUNK_READ,
    HUNK_ROLLBACK,
    HUNK_APPLY,
]
for _spec in _SPECS:
    register(_spec)
