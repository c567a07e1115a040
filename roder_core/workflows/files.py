"""Workflow files of a repository (``.roder/workflows/*.toml``) and the user's decisions on them.

TOML because Roder's own configuration is TOML (one format for people to learn, comments kept,
no indentation traps), and a workflow is a small table of steps with multi-line prompts, which
TOML's ``[[steps]]`` and ``'''`` strings write plainly::

    name = "release-notes"
    [[steps]]
    id = "log"
    run = "git log --oneline -20"
    [[steps]]
    id = "draft"
    depends_on = ["log"]
    prompt = '''Write release notes from the log.'''
    score = ["test -n {output}"]

A file is repository content, so it is treated as trust treats project config: it is read only
in a trusted folder, and it runs only after the user enabled it. The decision (enabled or
ignored) is kept in the user's data dir, never in the project, together with the file's
SHA-256: a file that changed after it was enabled is "changed" and must be enabled again, so a
pull cannot swap the commands someone approved.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from roder_core.brokers.project_reader import ProjectFileRefused, project_reader
from roder_core.workflows.model import WorkflowDefinition, WorkflowError

FOLDER = Path(".roder") / "workflows"
#: A workflow file larger than this is refused unread.
MAX_FILE_BYTES = 256 * 1024

Decision = Literal["enabled", "ignored", "undecided", "changed"]


@dataclass
class WorkflowFile:
    path: Path
    sha256: str
    definition: WorkflowDefinition | None
    error: str
    decision: Decision


def workflow_paths(workspace: Path) -> list[Path]:
    """The workflow files of ``workspace``, listed through the project reader (a linked folder
    is not entered)."""
    return project_reader(workspace).files(workspace / FOLDER, "*.toml")


def read_definition(path: Path) -> tuple[str, WorkflowDefinition | None, str]:
    """(sha256, definition, error): a file that does not parse or validate has the error. Read
    through the project reader rooted at its folder: a link out of it, a FIFO, a hard link or
    an oversized file is an error naming why, never read."""
    try:
        raw = project_reader(path.parent).read_bytes(path, max_bytes=MAX_FILE_BYTES)
    except ProjectFileRefused as exc:
        return "", None, f"not read: {exc}"
    except OSError as exc:
        return "", None, f"unreadable: {exc.strerror or exc}"
    digest = hashlib.sha256(raw).hexdigest()
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return digest, None, f"not valid TOML: {exc}"
    data.setdefault("name", path.stem)
    try:
        return digest, WorkflowDefinition.model_validate(data), ""
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc']) or 'workflow'}: {e['msg']}" for e in exc.errors()[:6]]
        return digest, None, "; ".join(problems)


class WorkflowDecisions:
    """The user's enable/ignore decisions, per canonical file path, with the content's hash."""

    def __init__(self, file: Path) -> None:
        self._file = file

    def _load(self) -> dict[str, dict[str, str]]:
        try:
            data = json.loads(self._file.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {str(k): v for k, v in data.items() if isinstance(v, dict)}

    def _save(self, data: dict[str, dict[str, str]]) -> None:
        self._file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._file.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self._file)

    @staticmethod
    def canonical(path: Path) -> str:
        return str(Path(path).expanduser().resolve())

    def decision(self, path: Path, sha256: str) -> Decision:
        entry = self._load().get(self.canonical(path))
        if entry is None:
            return "undecided"
        if entry.get("decision") == "ignored":
            return "ignored"
        return "enabled" if entry.get("sha256") == sha256 else "changed"

    def set(self, path: Path, decision: Literal["enabled", "ignored"], sha256: str) -> None:
        data = self._load()
        data[self.canonical(path)] = {"decision": decision, "sha256": sha256}
        self._save(data)

    def forget(self, path: Path) -> bool:
        data = self._load()
        found = data.pop(self.canonical(path), None) is not None
        if found:
            self._save(data)
        return found

    def forget_missing(self, workspace: Path) -> list[str]:
        """Drop decisions about files of ``workspace`` that no longer exist; their paths."""
        data = self._load()
        root = self.canonical(workspace / FOLDER)
        gone = [p for p in data if p.startswith(root + os.sep) and not Path(p).exists()]
        for path in gone:
            del data[path]
        if gone:
            self._save(data)
        return gone


class WorkflowFiles:
    """Scan, preview and decide on a workspace's workflow files (``workflow/*``)."""

    def __init__(self, decisions: WorkflowDecisions) -> None:
        self.decisions = decisions

    def scan(self, workspace: Path) -> list[WorkflowFile]:
        return [self.read(path) for path in workflow_paths(workspace)]

    def read(self, path: Path) -> WorkflowFile:
        sha, definition, error = read_definition(path)
        decision = self.decisions.decision(path, sha) if sha else "undecided"
        return WorkflowFile(path=path, sha256=sha, definition=definition, error=error, decision=decision)

    def locate(self, workspace: Path, raw: str) -> Path:
        """A workflow file of ``workspace`` named by path (absolute, or relative to the
        workspace) or by its name; anything outside ``.roder/workflows`` is refused."""
        folder = (workspace / FOLDER).resolve()
        candidate = Path(raw)
        if not candidate.is_absolute():
            candidate = folder / candidate if "/" not in raw else workspace / candidate
        if candidate.suffix != ".toml":
            candidate = candidate.with_name(candidate.name + ".toml")
        resolved = candidate.resolve()
        if resolved.parent != folder:
            raise WorkflowError(f"{raw} is not a workflow file of {workspace / FOLDER}")
        if not resolved.is_file():
            raise WorkflowError(f"no workflow file {resolved}")
        return resolved

    def enable(self, path: Path) -> WorkflowFile:
        found = self.read(path)
        if found.definition is None:
            raise WorkflowError(f"{path} is not a valid workflow: {found.error}")
        self.decisions.set(path, "enabled", found.sha256)
        return self.read(path)

    def ignore(self, path: Path) -> WorkflowFile:
        found = self.read(path)
        self.decisions.set(path, "ignored", found.sha256)
        return self.read(path)

    def runnable(self, path: Path) -> WorkflowDefinition:
        """The definition of an enabled, unchanged, valid file (what ``workflows/create`` runs)."""
        found = self.read(path)
        if found.definition is None:
            raise WorkflowError(f"{path} is not a valid workflow: {found.error}")
        if found.decision != "enabled":
            why = "it changed since it was enabled" if found.decision == "changed" else f"it is {found.decision}"
            raise WorkflowError(f"{path.name} cannot run: {why}; enable it with workflow/enable first")
        return found.definition
