"""The batch output folder, which is also the batch's memory: re-running skips what is done.

Layout::

    OUT/batch.json                      settings of the batch (a re-run must use the same ones)
    OUT/summary.json                    aggregate over every recorded rollout of the selected tasks
    OUT/results.csv                     one row per recorded rollout of the selected tasks
    OUT/preds.jsonl                     SWE-bench predictions (each task's rollout 0)
    OUT/rollouts/<task>/<k>/result.json the record (written last: its presence means finished)
                            thread.jsonl, trajectory.json, atif.json, workspace.diff,
                            model.patch, setup.log, score.log
    OUT/rollouts/<task>/<k>.attempts.json the discarded attempts of a rollout still to finish

A rollout folder is written under a temporary name and renamed into place, so a batch killed
at any moment leaves each rollout either finished or absent, never half-recorded. An attempt lost
to an infrastructure failure is written (and synced) to the rollout's attempts file before its
retry is scheduled, so a driver killed before the retry finishes loses no attempt: the resumed
batch carries the file's attempts into the rollout's record, which replaces the file.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import json
import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from roder_core.batch.summary import TABLE_COLUMNS
from roder_core.batch.tasks import Task, task_dir_name
from roder_core.batch.worker import RolloutOutcome, RolloutSpec, RunSettings

RESULT_FILE = "result.json"
PREDICTIONS_FILE = "preds.jsonl"
_TMP_MARK = ".tmp-"


class BatchFolderError(ValueError):
    """The output folder belongs to a different batch; the message says what differs."""


def _write_json(path: Path, data: Any) -> None:
    _write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _write_text(path: Path, text: str) -> None:
    """Replace ``path`` at once: a reader (or a killed batch) never sees half of it."""
    tmp = path.with_name(path.name + _TMP_MARK + str(os.getpid()))
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


class BatchFolder:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.batch_file = root / "batch.json"
        self.summary_file = root / "summary.json"
        self.table_file = root / "results.csv"
        self.rollouts = root / "rollouts"

    def rollout_dir(self, task_id: str, index: int) -> Path:
        return self.rollouts / task_dir_name(task_id) / str(index)

    def attempts_file(self, task_id: str, index: int) -> Path:
        return self.rollouts / task_dir_name(task_id) / f"{index}.attempts.json"

    def record_attempts(self, spec: RolloutSpec) -> None:
        """Durably keep the attempts a retry carries (``spec.discarded``), before it runs."""
        path = self.attempts_file(spec.task.id, spec.index)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {"task_digest": spec.task.digest(), "discarded": list(spec.discarded)}
        tmp = path.with_name(path.name + _TMP_MARK + str(os.getpid()))
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        _sync_folder(path.parent)

    def _discarded(self, task: Task, index: int) -> tuple[dict[str, Any], ...]:
        """The attempts an earlier run of the batch lost for this rollout (none for another task text)."""
        try:
            data = json.loads(self.attempts_file(task.id, index).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return ()
        if not isinstance(data, dict) or data.get("task_digest") != task.digest():
            return ()
        return tuple(d for d in data.get("discarded", []) if isinstance(d, dict))

    def claim(self, settings: RunSettings, tasks_file: str) -> None:
        """Create the folder for these settings, or check that an existing one used the same."""
        self.root.mkdir(parents=True, exist_ok=True)
        wanted = settings.as_dict()
        if self.batch_file.exists():
            try:
                recorded = json.loads(self.batch_file.read_text(encoding="utf-8")).get("settings", {})
            except (OSError, ValueError) as exc:
                raise BatchFolderError(f"{self.batch_file} is unreadable ({exc}); use another --out") from exc
            # A setting a batch folder predates was at its default then (older Roder versions).
            before = {**RunSettings().as_dict(), **recorded}
            differ = [f"{k}: {before.get(k)!r} before, {v!r} now" for k, v in wanted.items() if before.get(k) != v]
            if differ:
                raise BatchFolderError(
                    f"{self.root} holds a batch run with other settings ({'; '.join(differ)}); "
                    "re-run with the same settings to resume it, or choose another --out"
                )
            return
        _write_json(self.batch_file, {"settings": wanted, "tasks_file": tasks_file})

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the folder while a batch writes to it (the OS releases it if the process dies)."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise BatchFolderError(f"another roder batch is writing to {self.root}") from None
            yield
        finally:
            os.close(fd)

    def _sweep(self) -> None:
        """Remove half-written rollout folders left by a killed run."""
        if not self.rollouts.is_dir():
            return
        for task_dir in self.rollouts.iterdir():
            for entry in task_dir.iterdir() if task_dir.is_dir() else ():
                if _TMP_MARK in entry.name and entry.is_dir():
                    shutil.rmtree(entry, ignore_errors=True)
                elif _TMP_MARK in entry.name:
                    entry.unlink(missing_ok=True)

    def recorded(self, task: Task, index: int) -> dict[str, Any] | None:
        """The finished result for this task and rollout, unless missing or made for another task text."""
        try:
            result = json.loads((self.rollout_dir(task.id, index) / RESULT_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return result if result.get("task_digest") == task.digest() else None

    def plan(
        self, tasks: Iterable[Task], repeat: int, settings: RunSettings, env: dict[str, str], rerun: str | None = None
    ) -> tuple[list[RolloutSpec], list[dict[str, Any]]]:
        """Split the wanted rollouts into those still to run and the results already recorded.
        ``rerun``: ``"failed"`` runs recorded failures again, ``"all"`` every rollout."""
        self._sweep()
        todo: list[RolloutSpec] = []
        done: list[dict[str, Any]] = []
        for task in tasks:
            for index in range(repeat):
                result = self.recorded(task, index)
                if result is None or rerun == "all" or (rerun == "failed" and not result.get("passed")):
                    discarded = self._discarded(task, index)
                    todo.append(
                        RolloutSpec(
                            task=task, index=index, settings=settings, env=env, attempt=len(discarded) + 1, discarded=discarded
                        )
                    )
                else:
                    done.append(result)
        return todo, done

    def record(self, outcome: RolloutOutcome) -> Path:
        task_id, index = outcome.result["task_id"], outcome.result["rollout"]
        written = write_rollout(self.rollout_dir(task_id, index), outcome)
        self.attempts_file(task_id, index).unlink(missing_ok=True)  # the record holds them now
        return written

    def write_summary(self, summary: dict[str, Any], rows: list[dict[str, Any]]) -> None:
        """``summary.json``, and ``results.csv`` with one row per rollout (``summary.result_rows``)."""
        _write_json(self.summary_file, summary)
        table = io.StringIO()
        writer = csv.DictWriter(table, fieldnames=TABLE_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        _write_text(self.table_file, table.getvalue())

    def write_predictions(self, tasks: Iterable[Task], settings: RunSettings) -> Path:
        """``preds.jsonl`` in SWE-bench's prediction format, from each task's first rollout (its
        ``model.patch``: see ``swebench.patch_paths`` for which changes it keeps)."""
        model = f"roder/{settings.provider}/{settings.model}"
        lines = []
        for task in tasks:
            folder = self.rollout_dir(task.id, 0)
            if self.recorded(task, 0) is None:
                continue
            try:
                patch = (folder / "model.patch").read_text(encoding="utf-8")
            except OSError:
                patch = ""
            lines.append(
                json.dumps({"instance_id": task.id, "model_name_or_path": model, "model_patch": patch}, ensure_ascii=False) + "\n"
            )
        path = self.root / PREDICTIONS_FILE
        tmp = path.with_name(path.name + _TMP_MARK + str(os.getpid()))
        tmp.write_text("".join(lines), encoding="utf-8")
        os.replace(tmp, path)
        return path


def _sync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_rollout(final: Path, outcome: RolloutOutcome) -> Path:
    """Write a rollout's files and then its result.json into ``final``, atomically replacing an
    older record (the folder is staged under a temporary name and renamed into place)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = final.with_name(final.name + _TMP_MARK + str(os.getpid()))
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    for name, data in outcome.files.items():
        (staging / name).write_bytes(data)
    (staging / RESULT_FILE).write_text(json.dumps(outcome.result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if final.exists():
        shutil.rmtree(final)
    os.replace(staging, final)
    return final
