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
from roder_core.brokers.safe_git import git_argv, git_env, host_git

GIT_TIMEOUT = 600.0
#: What ``git init`` writes in a new repository's config (see ``Baseline.record``).
_BASELINE_CONFIG = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n"


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
            git_argv(["-c", "core.autocrlf=false", "-c", "core.quotepath=false", *args], cwd=cwd, git=host_git() or "git"),
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
        """Snapshot the workspace: two git processes. The git directory is laid out here rather
        than by ``git init`` (a process saved per rollout); it is what ``git init --template=``
        makes: no hooks, description or info/exclude, which are never used here."""
        for folder in ("objects", "refs/heads", "refs/tags"):
            (self.git_dir / folder).mkdir(parents=True)
        (self.git_dir / "HEAD").write_text("ref: refs/heads/master\n")
        (self.git_dir / "config").write_text(_BASELINE_CONFIG)
        self._git("add", "--all")
        # No automatic maintenance: a commit would start ``git maintenance run --auto`` (a third
        # process) for a repository that lives for one rollout.
        self._git("-c", "maintenance.auto=false", "commit", "--quiet", "--allow-empty", "--no-verify", "-m", "baseline")

    def compare(self) -> tuple[str, list[tuple[str, str]]]:
        """Take in the workspace as it is now and describe what changed since ``record``, in two
        git processes: the unified diff (binary-safe) and (status letter, path) of every
        change, A added, M modified, D deleted, T type changed. The diff is git's default, so
        a renamed file shows as a rename; its change is the deletion and the addition."""
        self._git("add", "--all")
        out = self._git("diff", "--cached", "--binary", "--no-color", "--no-ext-diff", "--patch-with-raw", "-z", "HEAD")
        changes: list[tuple[str, str]] = []
        position = 0
        while out.startswith(":", position):  # the raw records: ":modes ids STATUS\0path\0[path\0]"
            meta_end = out.index("\0", position)
            status = out[position:meta_end].rsplit(" ", 1)[1][:1]
            path_end = out.index("\0", meta_end + 1)
            path = out[meta_end + 1 : path_end]
            position = path_end + 1
            if status in "RC":  # a rename (or copy) scored: its second path is the new one
                new_end = out.index("\0", position)
                new = out[position:new_end]
                position = new_end + 1
                changes += [("A", new)] if status == "C" else [("D", path), ("A", new)]
            else:
                changes.append((status, path))
        if out.startswith("\0", position):  # the raw records end with an empty field
            position += 1
        changes.sort(key=lambda change: change[1])  # as --no-renames orders them
        return out[position:], changes

    def diff(self, paths: list[str]) -> str:
        """Unified diff (binary-safe) of what changed in ``paths`` between ``record`` and
        the last ``compare``."""
        if not paths:
            return ""
        limit = ["--", *[f":(literal){p}" for p in paths]]
        return self._git("diff", "--cached", "--binary", "--no-color", "--no-ext-diff", "HEAD", *limit)

    def ignored(self) -> list[str]:
        """What the workspace holds that git ignores, as git lists it after ``record``: a wholly
        ignored folder as one entry ending in ``/``. None of it can be in a prediction."""
        out = self._git_bytes("ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory")
        return [entry.decode("utf-8", "surrogateescape") for entry in out.split(b"\0") if entry]

    def original(self, path: str) -> bytes | None:
        """A file's content when the baseline was recorded (None: it did not exist)."""
        try:
            return self._git_bytes("cat-file", "blob", f"HEAD:{path}")
        except WorkspaceError:
            return None
