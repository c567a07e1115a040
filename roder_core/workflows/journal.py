"""Workflow journals: one append-only JSONL file per workflow, folded back into its state.

Like a thread's file, a journal is only ever appended to, one JSON record a line, flushed and
fsynced as it is written (records are few: one per step start and end), so a process killed at
any instant leaves every finished step on disk. Loading folds the records in order; a torn last
line (the kill came mid-write) is ignored and cut off before the next append. A lock file next
to the journal, held (``flock``) by the process running the workflow, tells "cut off by a crash"
from "running elsewhere"; the kernel drops it when that process dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from pathlib import Path
from typing import Any

from roder_core.brokers.data_paths import component
from roder_core.ir import now
from roder_core.workflows.model import StepState, WorkflowDefinition, WorkflowError, WorkflowRun, WorkflowStatus, fresh_steps

log = logging.getLogger(__name__)


class WorkflowJournal:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        #: Lock files this process holds, by workflow id.
        self._locks: dict[str, int] = {}

    def path(self, workflow_id: str) -> Path:
        if not workflow_id or "/" in workflow_id or workflow_id.startswith("."):
            raise WorkflowError(f"invalid workflow id {workflow_id!r}")
        return self.folder / (component(workflow_id, "workflow id") + ".jsonl")

    # ------------------------------------------------------------------ writing

    def create(self, run: WorkflowRun) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        state = run.model_dump(mode="json", by_alias=True, exclude={"live", "elsewhere"})  # of this moment only
        self._append(run.id, {"kind": "created", "run": state})

    def edited(self, run: WorkflowRun) -> None:
        """A new definition (a client's edit before approval): the steps start over."""
        self._append(run.id, {"kind": "edited", "definition": run.definition.model_dump(mode="json", by_alias=True)})

    def status(self, run: WorkflowRun) -> None:
        self._append(run.id, {"kind": "status", "status": run.status.value, "mode": run.mode, "error": run.error})

    def step(self, run: WorkflowRun, state: StepState) -> None:
        self._append(run.id, {"kind": "step", "step": state.model_dump(mode="json", by_alias=True)})

    def _append(self, workflow_id: str, record: dict[str, Any]) -> None:
        path = self.path(workflow_id)
        record = {"at": now(), **record}
        line = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            _cut_torn_tail(fd)
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    # ------------------------------------------------------------------ reading

    def ids(self) -> list[str]:
        if not self.folder.is_dir():
            return []
        return sorted(p.stem for p in self.folder.glob("*.jsonl"))

    def load(self, workflow_id: str) -> WorkflowRun:
        path = self.path(workflow_id)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise WorkflowError(f"no workflow {workflow_id!r}") from None
        run: WorkflowRun | None = None
        lines = raw.split(b"\n")
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                run = _fold(run, record)
            except (ValueError, TypeError, KeyError) as exc:
                if number < len(lines):  # not the torn tail of a kill mid-write
                    log.warning("workflow %s: skipping bad record on line %d: %s", workflow_id, number, exc)
        if run is None:
            raise WorkflowError(f"workflow {workflow_id!r} has an empty or unreadable journal")
        return run

    # ------------------------------------------------------------------ who runs it

    def claim(self, workflow_id: str) -> None:
        """Become the one process running this workflow; refused while another one does."""
        if workflow_id in self._locks:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path(workflow_id).with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise WorkflowError(f"workflow {workflow_id} is being run by another Roder process") from None
        self._locks[workflow_id] = fd

    def release(self, workflow_id: str) -> None:
        fd = self._locks.pop(workflow_id, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def held_elsewhere(self, workflow_id: str) -> bool:
        """Whether another process runs this workflow now."""
        if workflow_id in self._locks:
            return False
        lock = self.path(workflow_id).with_suffix(".lock")
        if not lock.exists():
            return False
        fd = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing drops a lock taken just now
        return False

    def close(self) -> None:
        for workflow_id in list(self._locks):
            self.release(workflow_id)


def _fold(run: WorkflowRun | None, record: dict[str, Any]) -> WorkflowRun:
    kind = record["kind"]
    if kind == "created":
        return WorkflowRun.model_validate(record["run"])
    if run is None:
        raise ValueError(f"a {kind!r} record before the workflow was created")
    if kind == "edited":
        run.definition = WorkflowDefinition.model_validate(record["definition"])
        run.steps = fresh_steps(run.definition)
    elif kind == "status":
        run.status = WorkflowStatus(record["status"])
        run.mode = record.get("mode")
        run.error = record.get("error") or ""
    elif kind == "step":
        state = StepState.model_validate(record["step"])
        run.steps = [state if s.id == state.id else s for s in run.steps]
    else:
        raise ValueError(f"unknown record kind {kind!r}")
    run.updated_at = float(record.get("at") or run.updated_at)
    return run


def _cut_torn_tail(fd: int) -> None:
    """Drop a last line without its newline (a write cut short by a kill) before appending."""
    size = os.lseek(fd, 0, os.SEEK_END)
    if size == 0:
        return
    os.lseek(fd, size - 1, os.SEEK_SET)
    if os.read(fd, 1) == b"\n":
        return
    os.lseek(fd, 0, os.SEEK_SET)
    data = b""
    while chunk := os.read(fd, 1 << 20):
        data += chunk
    os.ftruncate(fd, data.rfind(b"\n") + 1)
