"""Fresh workspaces for rollouts, and the diff of what the agent changed in them.

Every rollout gets its own copy (a folder copy, or a clone checked out at the task's ref), so
rollouts never see each other's edits and the source is never touched. The diff is taken
against a baseline snapshot recorded in a git directory *outside* the workspace: the agent
cannot see or rewrite it, the workspace's own ``.git`` (if any) is left alone, and files the
workspace's ``.gitignore`` ignores (build output, caches) stay out of the diff.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from roder_core.batch.tasks import WorkspaceSource
from roder_core.brokers.safe_git import git_argv, git_env

GIT_TIMEOUT = 600.0


class WorkspaceError(RuntimeError):
    """The workspace could not be prepared; the message says what git or the copy reported."""


def _git_env() -> dict[str, str]:
    """Git without the operator's global/system config (hooks, signing, excludes) or GIT_* overrides."""
    return {**git_env(), "GIT_CONFIG_GLOBAL": os.devnull}


def git(*args: str, cwd: Path | None = None) -> str:
    return git_bytes(*args, cwd=cwd).decode("utf-8", "replace")


def git_bytes(*args: str, cwd: Path | None = None) -> bytes:
    try:
        done = subprocess.run(
            git_argv(["-c", "core.autocrlf=false", "-c", "core.quotepath=false", *args], cwd=cwd),
            cwd=cwd,
            env=_git_env(),
            capture_output=True,
            timeout=GIT_TIMEOUT,
            check=False,
        )
    except FileNotFoundError as exc:
        raise WorkspaceError("git is not installed (needed for workspaces and diffs)") from exc
    except subprocess.TimeoutExpired as exc:
        raise WorkspaceError(f"git {args[0]} took longer than {GIT_TIMEOUT:.0f}s") from exc
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip() or f"exit {done.returncode}"
        raise WorkspaceError(f"git {args[0]} failed: {message}")
    return done.stdout


def prepare_workspace(source: WorkspaceSource | None, dest: Path) -> Path:
    """Create ``dest`` as a fresh copy of ``source`` (an empty folder when there is none)."""
    if source is None:
        dest.mkdir(parents=True)
    elif source.path is not None:
        origin = Path(source.path)
        if not origin.is_dir():
            raise WorkspaceError(f"workspace folder {origin} does not exist")
        try:
            shutil.copytree(origin, dest, symlinks=True)
        except (OSError, shutil.Error) as exc:
            raise WorkspaceError(f"could not copy workspace {origin}: {exc}") from exc
    else:
        assert source.git is not None
        git("clone", "--quiet", "--no-checkout", source.git, str(dest))
        ref = source.ref or "HEAD"
        try:
            git("checkout", "--quiet", "--detach", ref, cwd=dest)
        except WorkspaceError as not_found:
            # A branch other than the default exists only as origin/<branch> in a fresh clone.
            try:
                git("checkout", "--quiet", "--detach", f"origin/{ref}", cwd=dest)
            except WorkspaceError:
                raise not_found from None
    return dest


class Baseline:
    """A snapshot of a workspace in a separate git directory, to diff the agent's changes against."""

    def __init__(self, git_dir: Path, work_tree: Path) -> None:
        self.git_dir = git_dir
        self.work_tree = work_tree

    def _git(self, *args: str) -> str:
        return self._git_bytes(*args).decode("utf-8", "replace")

    def _git_bytes(self, *args: str) -> bytes:
        return git_bytes(
            f"--git-dir={self.git_dir}",
            f"--work-tree={self.work_tree}",
            "-c",
            "user.name=roder",
            "-c",
            "user.email=roder@localhost",
            "-c",
            "commit.gpgsign=false",
            *args,
        )

    def record(self) -> None:
        # No template: the sample hooks, description and info/exclude it copies are never used
        # here, and skipping them halves `git init` and the scratch folder's removal per rollout.
        self._git("init", "--quiet", "--template=")
        self._git("add", "--all")
        self._git("commit", "--quiet", "--allow-empty", "--no-verify", "-m", "baseline")

    def stage(self) -> None:
        """Take in the workspace as it is now; ``diff`` and ``changes`` describe this state."""
        self._git("add", "--all")

    def diff(self, paths: list[str] | None = None) -> str:
        """Unified diff (binary-safe) of everything added, changed or deleted between ``record``
        and ``stage`` (only of ``paths`` when given)."""
        if paths is not None and not paths:
            return ""
        limit = ["--", *[f":(literal){p}" for p in paths]] if paths is not None else []
        return self._git("diff", "--cached", "--binary", "--no-color", "--no-ext-diff", "HEAD", *limit)

    def changes(self) -> list[tuple[str, str]]:
        """(status letter, path) of every change between ``record`` and ``stage``: A added,
        M modified, D deleted."""
        fields = self._git("diff", "--cached", "--name-status", "--no-renames", "-z", "HEAD").split("\0")
        return [(fields[i], fields[i + 1]) for i in range(0, len(fields) - 1, 2)]

    def original(self, path: str) -> bytes | None:
        """A file's content when the baseline was recorded (None: it did not exist)."""
        try:
            return self._git_bytes("cat-file", "blob", f"HEAD:{path}")
        except WorkspaceError:
            return None
