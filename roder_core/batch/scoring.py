"""Scoring that does not trust the agent: hidden tests, reverted config files, a sandboxed score.

Before the agent starts, the files a task names in ``tests`` (globs) are moved out of the
workspace into the rollout's scratch folder, and the files named in ``protect`` are copied there.
After the agent has finished (its diff is already taken), the workspace becomes the scoring copy:
whatever the agent left at a test path or a protected path is replaced by the original (or
removed, when there was none), a SWE-bench ``test_patch`` is applied after the files it touches are
put back to their baseline content, and the score command runs under the command sandbox's
bubblewrap profile: the workspace (and the verifier folder) writable, the rest of the filesystem
read-only, credential folders hidden, no network unless the task grants it, an allowlisted
environment, and everything it starts killed with it. (Glob rules: ``globs``.)
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from roder_core.batch.globs import files_under, matches, remove_file
from roder_core.batch.runner_guard import RunnerGuard
from roder_core.batch.shell import ShellOutcome, run_shell
from roder_core.batch.workspace import Baseline, WorkspaceError, git
from roder_core.brokers import repairs, seccomp, tree_guard
from roder_core.brokers.sandbox import BubblewrapProbe, Confinement, bubblewrap_argv, sandbox_status
from roder_core.brokers.secret_paths import SecretAliased, default_deny_read, masks

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


@dataclass
class ScoreGuard:
    """The hidden tests and protected originals of one rollout, kept in its scratch folder."""

    workspace: Path
    store: Path
    tests: list[str] | str | None = None
    protect: list[str] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)
    originals: list[str] = field(default_factory=list)
    #: The runner's configuration and environment (None: the task has no score to guard).
    runner: RunnerGuard | None = None

    def hide(self) -> None:
        """Move the test files out and keep copies of the protected files (before the agent)."""
        if isinstance(self.tests, list) and self.tests:
            for relative in sorted(r for r in files_under(self.workspace) if matches(r, self.tests)):
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
        for relative in sorted(r for r in files_under(self.workspace) if matches(r, self.protect)) if self.protect else ():
            destination = self.store / "protected" / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(self.workspace / relative, destination, follow_symlinks=False)
            self.originals.append(relative)
        if self.runner is not None:
            self.runner.record()

    def settle(self, prediction: list[str], *, sweep: bool) -> tuple[list[str], list[str]]:
        """Make the workspace the base plus the prediction, minus what the score resets: the
        runner's files go back to their base version, and (``sweep``) every new file the
        prediction leaves out (scratch, ignored files) is removed, and so is every bytecode cache
        (``remove_bytecode_caches``). Returns the log lines and the prediction without the paths
        the score resets and what git ignored at the base, so the prediction is what was scored."""
        log: list[str] = []
        reset: set[str] = set()
        if self.runner is not None:
            log, reset = self.runner.reset()
            reset |= self.runner.ignored_at_base()
            if sweep:
                log += self._sweep(set(prediction))
        if sweep:
            log += remove_bytecode_caches(self.workspace)
        globs = [*(self.tests if isinstance(self.tests, list) else []), *self.protect]
        patched = set(self._patch_paths()) if isinstance(self.tests, str) else set()
        kept = [
            path
            for path in prediction
            if not matches(path, globs) and path not in patched and not any(path == r or path.startswith(r + "/") for r in reset)
        ]
        return log, kept

    def _sweep(self, prediction: set[str]) -> list[str]:
        assert self.runner is not None
        removed = [r for r in files_under(self.workspace) if r not in self.runner.before and r not in prediction]
        for relative in removed:
            remove_file(self.workspace, relative)
        if not removed:
            return []
        shown = ", ".join(sorted(removed)[:5]) + (f" and {len(removed) - 5} more" if len(removed) > 5 else "")
        return [f"removed {len(removed)} new file(s) the prediction leaves out (scratch or ignored): {shown}"]

    def restore(self, baseline: Baseline) -> list[str]:
        """Turn the agent's workspace into the scoring copy; returns what was put back."""
        restored: list[str] = []
        globs = self.tests if isinstance(self.tests, list) else []
        for relative in files_under(self.workspace) if globs or self.protect else ():
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

    def _patch_file(self) -> Path:
        self.store.mkdir(parents=True, exist_ok=True)
        patch = self.store / "test.patch"
        tests = self.tests if isinstance(self.tests, str) else ""
        patch.write_text(tests if tests.endswith("\n") else f"{tests}\n")
        return patch

    def _patch_paths(self) -> list[str]:
        """The files the test patch touches."""
        try:
            touched = [line for line in git("apply", "--numstat", "-z", str(self._patch_file())).split("\0") if line]
        except WorkspaceError as exc:
            raise ScoringError(f"the test patch is not a valid patch: {exc}") from exc
        return [line.split("\t", 2)[-1] for line in touched]

    def _apply_patch(self, baseline: Baseline) -> list[str]:
        paths = self._patch_paths()
        patch = self._patch_file()
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


def remove_bytecode_caches(workspace: Path) -> list[str]:
    """Remove every ``__pycache__`` of the scoring copy (a link by that name included).

    Python runs a cached compiled file instead of its source when the file's header matches the
    source's size and time, which the agent can forge for a source it leaves unchanged. The
    workspace is the only place the agent can write, so without its caches the score runs
    sources only, and keeps the interpreter's own installed caches (compiling the standard
    library and the test runner again for every score cost more than the score itself)."""
    removed = 0
    for folder, dirs, files in os.walk(workspace):
        for name in ("__pycache__",) if "__pycache__" in dirs or "__pycache__" in files else ():
            path = os.path.join(folder, name)
            if os.path.islink(path) or not os.path.isdir(path):
                os.unlink(path)
            else:
                shutil.rmtree(path)
            removed += 1
            if name in dirs:
                dirs.remove(name)
    return [f"removed {removed} bytecode cache folder(s): the score compiles the sources"] if removed else []


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


def score_sandbox(
    requested: str | None, roots: list[Path], cwd: Path, *, network: bool, home: str | None, shown: tuple[Path, ...] = ()
) -> ScoreSandbox:
    """The command sandbox's profile, always writable in the scoring copy (the score needs to
    write caches and reports there). ``--sandbox off`` turns it off; a bubblewrap level that was
    asked for and is unavailable refuses the score, like the agent's commands."""
    status = sandbox_status(requested)
    if status.blocked:
        return ScoreSandbox("blocked", refused=status.notice)
    if status.effective == "off" or not status.bwrap:
        return ScoreSandbox("off")
    hidden = [*default_deny_read(Path(home)), *credential_paths(home)] if home else []
    try:
        masked = tuple(masks(hidden, roots))
    except SecretAliased as exc:  # a secret the sandbox could not hide: never scored unconfined
        return ScoreSandbox("blocked", refused=str(exc))
    plan = Confinement(
        level="workspace-write",
        roots=tuple(roots),
        cwd=cwd,
        readonly=tuple(tree_guard.scan(roots, next_action=False).readonly_paths()),  # the operator's own command
        masked=masked,
        shown=shown,
        network=network,
    )
    return ScoreSandbox("workspace-write", status.bwrap, status.probe, plan)


def score_environment(env: Mapping[str, str], private: Path, *, caches_removed: bool) -> dict[str, str]:
    """The score's environment: relative ``PATH`` entries dropped (they would find the runner in
    the workspace). Unless the scoring copy's bytecode caches were removed (``ScoreGuard.settle``;
    not in a folder scored in place), Python's bytecode cache moves to the score's own folder, so
    a compiled file the agent left in a ``__pycache__`` is never run in place of the source."""
    clean = dict(env)
    if "PATH" in clean:
        clean["PATH"] = os.pathsep.join(p for p in clean["PATH"].split(os.pathsep) if os.path.isabs(p))
    if not caches_removed:
        clean["PYTHONPYCACHEPREFIX"] = str(private / "pycache")
    return clean


def python_check(python: str) -> str:
    """A shell prefix that stops the score, saying why, when ``python`` is not the interpreter
    the task named (its environment hidden from the score, or shadowed on PATH)."""
    quoted = shlex.quote(python)
    return (
        '_roder_python="$(command -v python)"; '
        f'if [ "$_roder_python" != {quoted} ]; then '
        f'echo "roder: the score\'s python is ${{_roder_python:-missing}}, not {python} that the task names" >&2; exit 125; fi; '
    )


def run_score(
    command: str,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    sandbox: ScoreSandbox,
    private: Path,
    python: str | None = None,
    *,
    caches_removed: bool,
) -> ShellOutcome:
    """Run the score under its sandbox, with the seccomp filter when bubblewrap accepts one.
    ``private`` is a folder of the score's own; ``python`` the interpreter the task names;
    ``caches_removed``: the scoring copy holds no bytecode caches (``score_environment``)."""
    if sandbox.refused is not None:
        return ShellOutcome(command, None, f"score refused: {sandbox.refused}\n", 0.0)
    env = score_environment(env, private, caches_removed=caches_removed)
    if python is not None and not os.path.exists(python):
        return ShellOutcome(command, 125, f"roder: the task's python {python} does not exist (did setup make it?)\n", 0.0)
    if python is not None:
        env["PATH"] = os.pathsep.join([str(Path(python).parent), env.get("PATH", "")])
    outcome = _run_sandboxed(python_check(python) + command if python else command, cwd, env, timeout, sandbox)
    return replace(outcome, command=command)


def _run_sandboxed(command: str, cwd: Path, env: Mapping[str, str], timeout: float, sandbox: ScoreSandbox) -> ShellOutcome:
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
