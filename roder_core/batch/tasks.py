"""The task file: one JSON object per line, validated up front with the line number of every error.

A line::

    {"id": "fix-add", "prompt": "Make the tests pass.", "workspace": "repos/calc",
     "setup": "pip install -e .", "score": "pytest -q", "deadline": 600, "mode": "bypass",
     "metadata": {"difficulty": "easy"}}

``workspace`` is a folder (copied fresh for every rollout), ``{"git": URL-or-path, "ref": REF}``
(cloned and checked out), or absent (an empty folder). Relative paths are relative to the task
file. Unknown keys are errors, so a typo never silently drops a setting.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic.alias_generators import to_camel

from roder_core.brokers.data_paths import component
from roder_core.ir import Mode, empty_list


class TaskFileError(ValueError):
    """The task file cannot be used; the message names the file and line."""


class TaskModel(BaseModel):
    """snake_case or camelCase keys (``task_ledger_required`` or ``taskLedgerRequired``)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class WorkspaceSource(TaskModel):
    """Where a rollout's workspace comes from: a folder, or a git repository at a ref."""

    path: str | None = None
    git: str | None = None
    ref: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> WorkspaceSource:
        if (self.path is None) == (self.git is None):
            raise ValueError("workspace needs exactly one of 'path' or 'git'")
        if self.ref is not None and self.git is None:
            raise ValueError("workspace 'ref' only applies to a 'git' source")
        return self

    def describe(self) -> str:
        return self.path if self.path is not None else f"{self.git}@{self.ref or 'HEAD'}"


class Task(TaskModel):
    id: str = Field(min_length=1, max_length=300)
    prompt: str = Field(min_length=1)
    workspace: WorkspaceSource | None = None
    #: Commands run in the fresh workspace before the agent starts (their changes are not in the diff).
    setup: list[str] = Field(default_factory=empty_list)
    #: Run after the agent; exit code 0 means the rollout passed.
    score: str | None = None
    #: Seconds the agent's turn may take (the batch's --deadline when absent).
    deadline: float | None = Field(default=None, gt=0)
    #: Seconds at the end of the deadline kept for finishing up (default: a tenth, 1-30 s).
    reserve: float | None = Field(default=None, ge=0)
    mode: Mode | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: Let the agent's commands reach the network (off by default under the eval-sandbox profile).
    network: bool = False
    #: Extra environment for setup, score and the runtime (e.g. RODER_MOCK_SCRIPT for a scripted model).
    env: dict[str, str] = Field(default_factory=dict)
    #: Environment for the score alone (Harbor's ``[verifier] env``): never given to setup, the
    #: runtime or the agent's commands, and its values are redacted from every output file.
    score_env: dict[str, str] = Field(default_factory=dict)
    #: Seed 004 taskLedgerRequired: ask the model to checkpoint scoreable work before the reserve.
    task_ledger_required: bool | None = None
    setup_timeout: float = Field(default=600.0, gt=0)
    score_timeout: float = Field(default=600.0, gt=0)
    #: The files that decide the score: globs hidden from the agent and put back for the score,
    #: or a unified diff (SWE-bench's ``test_patch``) applied after the agent finishes.
    tests: list[str] | str | None = None
    #: Globs reverted to their original content (or removed, when new) before the score runs.
    protect: list[str] = Field(default_factory=empty_list)
    #: Globs of runner files that are the agent's to change (``runner_guard``); ``["**"]``: none
    #: is reset (the guard is off).
    agent_files: list[str] = Field(default_factory=empty_list)
    #: How much of its environments and git-ignored content a rollout keeps a copy of, to put
    #: back what the agent changed (None: ``runner_guard.KEPT_COPY_*``); beyond it a change
    #: fails the score closed.
    keep_copy_files: int | None = Field(default=None, ge=0)
    keep_copy_mib: int | None = Field(default=None, ge=0)
    #: The interpreter the score must run with (made by setup, e.g. a venv under /tmp): its
    #: environment is shown to the score's sandbox, its bin folder leads PATH, and a score whose
    #: ``python`` is another one fails, saying so.
    python: str | None = None
    #: Folders outside the workspace that setup made and the score reads (shown read-only).
    score_paths: list[str] = Field(default_factory=empty_list)
    #: A folder of tests copied in only after the agent finishes; the score finds it in $TESTS_DIR.
    tests_folder: str | None = None
    #: SWE-bench's test lists: each test's status is recorded; all must pass for the rollout to pass.
    fail_to_pass: list[str] = Field(default_factory=empty_list)
    pass_to_pass: list[str] = Field(default_factory=empty_list)
    #: A Dockerfile the task's environment is built from (Podman, base images local): the agent's
    #: tools and the score run in a container of it (``containers``).
    container: str | None = Field(default=None, min_length=1)
    #: A local image the task runs in, instead of a Dockerfile.
    image: str | None = Field(default=None, min_length=1)
    #: Ask the model for its tokens' log probabilities with this many alternatives (0: sampled
    #: token only); recorded per model call in the trajectories (Chat Completions, Responses).
    logprobs: int | None = Field(default=None, ge=0, le=20)
    #: Ask the server for each call's prompt and answer token ids (vLLM's ``return_token_ids``);
    #: recorded per model call in the trajectories (``tokenIds``; ATIF's token id metrics).
    token_ids: bool = False

    @field_validator("python", mode="after")
    @classmethod
    def _absolute_python(cls, value: str | None) -> str | None:
        if value is not None and not Path(value).is_absolute():
            raise ValueError(f"{value!r} is not an absolute path to an interpreter")
        return value

    @field_validator("score_paths", mode="after")
    @classmethod
    def _absolute_paths(cls, value: list[str]) -> list[str]:
        for path in value:
            if not Path(path).is_absolute():
                raise ValueError(f"{path!r} is not an absolute path")
        return value

    @field_validator("tests", "protect", "agent_files", mode="before")
    @classmethod
    def _glob_list(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, list):
            for pattern in value:
                if (
                    not isinstance(pattern, str)
                    or not pattern.strip("/")
                    or ".." in Path(pattern).parts
                    or pattern.startswith("/")
                ):
                    raise ValueError(f"{pattern!r} is not a glob relative to the workspace")
        elif isinstance(value, str) and info.field_name != "tests":
            raise ValueError("expected a list of globs")
        elif isinstance(value, str) and "\n+++ " not in value and not value.startswith("+++ "):
            raise ValueError("a string must be a unified diff (SWE-bench's test_patch); use a list for globs")
        return value

    @field_validator("workspace", mode="before")
    @classmethod
    def _folder_shorthand(cls, value: Any) -> Any:
        return {"path": value} if isinstance(value, str) else value

    @field_validator("setup", mode="before")
    @classmethod
    def _one_command(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    def digest(self) -> str:
        """Identifies what this task asks; a rollout recorded for another digest is stale."""
        return _digest(self.model_dump(mode="json", by_alias=False))


def _digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,120}")


def task_dir_name(task_id: str) -> str:
    """A folder name for a task id: the id itself when it is filesystem-safe, otherwise a
    cleaned id plus a short hash so two ids never share a folder."""
    if _SAFE_ID.fullmatch(task_id) and not task_id.endswith("."):
        return component(task_id, "task id")
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", task_id).strip("._")[:80] or "task"
    return f"{cleaned}-{hashlib.sha256(task_id.encode()).hexdigest()[:8]}"


def _looks_like_url(source: str) -> bool:
    return "://" in source or re.match(r"^[\w.-]+@[\w.-]+:", source) is not None


def _anchor(task: Task, base: Path) -> Task:
    """Resolve relative workspace paths against the task file's folder."""
    if task.tests_folder is not None:
        task = task.model_copy(update={"tests_folder": str((base / task.tests_folder).resolve())})
    if task.container is not None:
        task = task.model_copy(update={"container": str((base / task.container).resolve())})
    ws = task.workspace
    if ws is None:
        return task
    if ws.path is not None:
        ws = ws.model_copy(update={"path": str((base / Path(ws.path).expanduser()).resolve())})
    elif ws.git is not None and not _looks_like_url(ws.git):
        ws = ws.model_copy(update={"git": str((base / Path(ws.git).expanduser()).resolve())})
    return task.model_copy(update={"workspace": ws})


def _explain(error: ValidationError) -> str:
    parts = []
    for problem in error.errors():
        where = ".".join(str(p) for p in problem["loc"]) or "line"
        parts.append(f"{where}: {problem['msg']}")
    return "; ".join(parts)


def _rows(lines: list[str], source: str) -> Iterator[tuple[int, Any, str | None]]:
    """(line number, parsed value, problem) per entry: JSON Lines, or one JSON array (the form
    SWE-bench instance files often come in), where the number is the entry's position."""
    text = "\n".join(lines)
    if text.lstrip().startswith("["):
        try:
            entries = json.loads(text)
        except json.JSONDecodeError as exc:
            yield exc.lineno, None, f"{source}:{exc.lineno}: not valid JSON ({exc.msg})"
            return
        yield from ((number, entry, None) for number, entry in enumerate(entries, start=1))
        return
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            yield number, json.loads(line), None
        except json.JSONDecodeError as exc:
            yield number, None, f"{source}:{number}: not valid JSON ({exc.msg})"


def parse_tasks(lines: list[str], source: str, base: Path, repo_cache: Path | None = None) -> list[Task]:
    """Tasks from JSONL text lines (or a JSON array); blank lines and ``#`` comments are skipped.
    SWE-bench instances are converted (``swebench``), with their repositories in ``repo_cache``."""
    return validate_rows(_rows(lines, source), source, base, repo_cache)


def validate_rows(
    rows: Iterable[tuple[int, Any, str | None]], source: str, base: Path, repo_cache: Path | None = None
) -> list[Task]:
    from roder_core.batch import swebench

    tasks: list[Task] = []
    seen: dict[str, int] = {}
    problems: list[str] = []
    for number, data, problem in rows:
        if problem is not None:
            problems.append(problem)
            continue
        if not isinstance(data, dict):
            problems.append(f"{source}:{number}: expected a JSON object")
            continue
        try:
            if swebench.is_instance(data):
                data = swebench.instance_to_task(data, repo_cache)
            task = _anchor(Task.model_validate(data), base)
        except ValidationError as exc:
            problems.append(f"{source}:{number}: {_explain(exc)}")
            continue
        except ValueError as exc:
            problems.append(f"{source}:{number}: {exc}")
            continue
        if task.id in seen:
            problems.append(f"{source}:{number}: duplicate id {task.id!r} (first on line {seen[task.id]})")
            continue
        seen[task.id] = number
        tasks.append(task)
    if problems:
        shown = problems[:20]
        more = f"\n... and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
        raise TaskFileError("\n".join(shown) + more)
    if not tasks:
        raise TaskFileError(f"{source}: no tasks (expected one JSON object per line)")
    return tasks


def load_tasks(path: Path, repo_cache: Path | None = None) -> list[Task]:
    """Tasks from a task file, a SWE-bench instance file, or a folder of Harbor task folders."""
    if path.is_dir():
        return _load_task_folders(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TaskFileError(f"cannot read task file {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise TaskFileError(f"{path}:{line}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x})") from exc
    return parse_tasks(text.splitlines(), str(path), path.resolve().parent, repo_cache)


def _load_task_folders(path: Path) -> list[Task]:
    from roder_core.batch.harbor import HarborError, folder_to_task, task_folders

    rows: list[tuple[int, Any, str | None]] = []
    try:
        folders = task_folders(path.resolve())
    except HarborError as exc:
        raise TaskFileError(str(exc)) from exc
    for number, folder in enumerate(folders, start=1):
        try:
            rows.append((number, folder_to_task(folder), None))
        except HarborError as exc:
            rows.append((number, None, str(exc)))
    return validate_rows(rows, str(path), path.resolve())


def select_tasks(
    tasks: list[Task], *, pattern: str | None = None, window: str | None = None, shuffle: bool = False
) -> list[Task]:
    """The tasks a run covers, in mini-swe-agent's order: shuffle (fixed seed), filter, slice."""
    import random

    chosen = list(tasks)
    if shuffle:
        random.Random(42).shuffle(chosen)
    if pattern is not None:
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise TaskFileError(f"--filter {pattern!r} is not a regular expression ({exc})") from exc
        chosen = [t for t in chosen if regex.search(t.id)]
    if window is not None:
        bounds = window.split(":")
        try:
            if len(bounds) != 2:
                raise ValueError
            start, stop = (int(b) if b.strip() else None for b in bounds)
        except ValueError:
            raise TaskFileError(f"--slice {window!r} is not A:B (either may be empty)") from None
        chosen = chosen[start:stop]
    if not chosen:
        raise TaskFileError("no task is selected (check --filter and --slice)")
    return chosen
