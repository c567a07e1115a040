"""Scoring that does not trust the agent: hidden tests, reverted config files, a sandboxed score.

Before the agent starts, the files a task names in ``tests`` (globs) are moved out of the
workspace into the rollout's scratch folder, and the files named in ``protect`` are copied there.
After the agent has finished (its diff is already taken), the workspace becomes the scoring copy:
whatever the agent left at a test path or a protected path is replaced by the original (or
removed, when there was none), a SWE-bench ``test_patch`` is applied after the files it touches are
put back to their baseline content, and the score command runs under the command sandbox's
bubblewrap profile: the workspace (and the verifier folder) writable, the rest of the filesystem
read-only, credential folders hidden, no network unless the task grants it, an allowlisted
environment, and everything it starts killed with it.

Glob rules: a pattern without ``/`` matches a name at any depth (``conftest.py``); a pattern
with ``/`` matches from the workspace root (``tests/**``, ``src/pkg/test_*.py``); a pattern
that names a folder covers everything in it. ``.git`` is never matched.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from roder_core.batch.shell import ShellOutcome, run_shell
from roder_core.batch.workspace import Baseline, WorkspaceError, git
from roder_core.brokers import repairs, seccomp, tree_guard
from roder_core.brokers.sandbox import BubblewrapProbe, Confinement, bubblewrap_argv, sandbox_status
from roder_core.brokers.secret_paths import default_deny_read, masks

#: Folders under the operator's home that hold credentials; hidden from the score (tmpfs).
#: The agent's commands get the same treatment (``worker`` passes them to the runtime).
CREDENTIAL_DIRS = (
    ".ray",
    ".ssh",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".gnupg",
    ".config/gh",
    ".local/share/roder",
    ".config/roder",
)
#: Credential files under the operator's home; hidden from the score (bound to /dev/null).
CREDENTIAL_FILES = (".netrc", ".git-credentials", ".pypirc", ".npmrc")


class ScoringError(RuntimeError):
    """The scoring copy could not be prepared (a test patch that does not apply)."""


@functools.cache
def _glob_regex(pattern: str) -> re.Pattern[str]:
    body = pattern.strip("/")
    if "/" not in body:
        body = "**/" + body
    out = []
    i = 0
    while i < len(body):
        if body.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif body.startswith("**", i):
            out.append(".*")
            i += 2
        elif body[i] == "*":
            out.append("[^/]*")
            i += 1
        elif body[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(body[i]))
            i += 1
    return re.compile("".join(out) + "(?:/.*)?")


def matches(relative: str, patterns: Iterable[str]) -> bool:
    """Whether a workspace-relative POSIX path is covered by one of the globs."""
    return any(_glob_regex(p).fullmatch(relative) for p in patterns)


def _files(root: Path) -> Iterator[str]:
    """Every file and symlink under ``root`` as a relative POSIX path (``.git`` left out)."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git" or Path(folder) != root]
        base = Path(folder).relative_to(root)
        for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            yield (base / name).as_posix()


@dataclass
class ScoreGuard:
    """The hidden tests and protected originals of one rollout, kept in its scratch folder."""

    workspace: Path
    store: Path
    tests: list[str] | str | None = None
    protect: list[str] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)
    originals: list[str] = field(default_factory=list)

    def hide(self) -> None:
        """Move the test files out and keep copies of the protected files (before the agent)."""
        if isinstance(self.tests, list) and self.tests:
            for relative in sorted(r for r in _files(self.workspace) if matches(r, self.tests)):
                destination = self.store / "tests" / relative
                destination.parent.mkdir(parents=True, exist_ok=True)
                os.replace(self.workspace / relative, destination)
                self.hidden.append(relative)
            for relative in sorted({str(Path(r).parent) for r in self.hidden}, key=len, reverse=True):
                for folder in [self.workspace / relative, *(self.workspace / relative).parents]:
                    if folder == self.workspace or not folder.is_relative_to(self.workspace):
                        break
                    try:
                        folder.rmdir()  # only folders the hiding emptied
                    except OSError:
                        break
        for relative in sorted(r for r in _files(self.workspace) if matches(r, self.protect)) if self.protect else ():
            destination = self.store / "protected" / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(self.workspace / relative, destination, follow_symlinks=False)
            self.originals.append(relative)

    def restore(self, baseline: Baseline) -> list[str]:
        """Turn the agent's workspace into the scoring copy; returns what was put back."""
        restored: list[str] = []
        globs = self.tests if isinstance(self.tests, list) else []
        for relative in _files(self.workspace) if globs or self.protect else ():
            if (matches(relative, globs) and relative not in self.hidden) or (
                matches(relative, self.protect) and relative not in self.originals
            ):
                repairs.remove_file(self.workspace, Path(relative))  # planted by the agent
                restored.append(f"removed {relative}")
        for kind, names in (("tests", self.hidden), ("protected", self.originals)):
            for relative in names:
                repairs.copy_in(self.store / kind / relative, self.workspace, Path(relative))
                restored.append(f"restored {relative}")
        if isinstance(self.tests, str):
            restored += self._apply_patch(baseline)
        return restored

    def _apply_patch(self, baseline: Baseline) -> list[str]:
        self.store.mkdir(parents=True, exist_ok=True)
        patch = self.store / "test.patch"
        tests = self.tests if isinstance(self.tests, str) else ""
        patch.write_text(tests if tests.endswith("\n") else f"{tests}\n")
        try:
            touched = [line for line in git("apply", "--numstat", "-z", str(patch)).split("\0") if line]
        except WorkspaceError as exc:
            raise ScoringError(f"the test patch is not a valid patch: {exc}") from exc
        paths = [line.split("\t", 2)[-1] for line in touched]
        restored = []
        for relative in paths:
            original = baseline.original(relative)
            if original is None:
                repairs.remove_file(self.workspace, Path(relative))
            else:
                repairs.write_file(self.workspace, Path(relative), original)
            restored.append(f"reset {relative}")
        try:
            git("apply", "--whitespace=nowarn", str(patch), cwd=self.workspace)
        except WorkspaceError as exc:
            raise ScoringError(f"the test patch does not apply: {exc}") from exc
        return [*restored, "applied the test patch"]


def credential_paths(home: str | None) -> tuple[Path, ...]:
    """The operator's credential folders and files, hidden from scores and the agent's commands."""
    if not home:
        return ()
    return tuple(Path(home) / name for name in (*CREDENTIAL_DIRS, *CREDENTIAL_FILES))


@dataclass(frozen=True)
class ScoreSandbox:
    """How a score command is wrapped: the confinement it runs under, or why it runs without one."""

    level: str
    bwrap: str | None = None
    probe: BubblewrapProbe | None = None
    plan: Confinement | None = None
    refused: str | None = None


def score_sandbox(requested: str | None, roots: list[Path], cwd: Path, *, network: bool, home: str | None) -> ScoreSandbox:
    """The command sandbox's profile, always writable in the scoring copy (the score needs to
    write caches and reports there). ``--sandbox off`` turns it off; a bubblewrap level that was
    asked for and is unavailable refuses the score, like the agent's commands."""
    status = sandbox_status(requested)
    if status.blocked:
        return ScoreSandbox("blocked", refused=status.notice)
    if status.effective == "off" or not status.bwrap:
        return ScoreSandbox("off")
    hidden = [*default_deny_read(Path(home)), *credential_paths(home)] if home else []
    plan = Confinement(
        level="workspace-write",
        roots=tuple(roots),
        cwd=cwd,
        readonly=tuple(tree_guard.scan(roots, next_action=False).readonly_paths()),  # the operator's own command
        masked=tuple(masks(hidden, roots)),
        network=network,
    )
    return ScoreSandbox("workspace-write", status.bwrap, status.probe, plan)


def run_score(command: str, cwd: Path, env: Mapping[str, str], timeout: float, sandbox: ScoreSandbox) -> ShellOutcome:
    """Run the score under its sandbox, with the seccomp filter when bubblewrap accepts one."""
    if sandbox.refused is not None:
        return ShellOutcome(command, None, f"score refused: {sandbox.refused}\n", 0.0)
    if sandbox.plan is None or sandbox.bwrap is None:
        return run_shell(command, cwd, env, timeout)
    fd = seccomp.filter_fd(allow_unix_sockets=False) if sandbox.probe is not None and sandbox.probe.seccomp else None
    try:
        plan = replace(sandbox.plan, seccomp_fd=fd)
        wrap = bubblewrap_argv(sandbox.bwrap, sandbox.probe, plan)
        return run_shell(command, cwd, env, timeout, wrap=wrap, pass_fds=(fd,) if fd is not None else ())
    finally:
        if fd is not None:
            os.close(fd)
