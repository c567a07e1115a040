"""Tasks that need their own image (a Harbor task's ``environment/Dockerfile``, or a local image).

The image is built with Podman from the task's Dockerfile (never pulling: its base image must be
on this machine), tagged by the build context's content so each machine builds it once, or taken
as it is when the task names a local ``image``. The rollout's workspace is a copy of the image's
working folder (``WORKDIR``), made here, so the baseline, the diff, the runner guard and the
prediction work exactly as for host tasks; the container runner then mounts that folder at the
same path in a container of the image, and the agent's tools run there under the same policy.
The score runs in that container too (as Harbor runs its tests), with ``/tests`` and ``/logs``.

Where no container engine works, or the image cannot be built, the rollout is recorded as not
run with the reason (``ContainerUnavailable``), and summaries leave it out of the pass rate.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from roder_core.brokers.host_programs import system_program

if TYPE_CHECKING:
    from roder_core.kernel.services import RunnerSession

#: The runner a container task's tools run in (defined for the rollout's runtime only).
TASK_RUNNER = "task-container"


class ContainerUnavailable(RuntimeError):
    """The task's container cannot run on this machine; the message says why."""


@dataclass(frozen=True)
class TaskImage:
    tag: str
    #: The image's working folder: where the workspace is mounted and the agent starts.
    workdir: str
    #: How the image was obtained, for the record.
    source: str


def engine_argv(oci_runtime: str | None) -> list[str]:
    """``podman`` (with the OCI runtime the batch's container runner names), or why not."""
    binary = system_program("podman")
    if binary is None:
        raise ContainerUnavailable("this task needs a container and podman is not installed here")
    return [binary, "--runtime", oci_runtime] if oci_runtime else [binary]


def _run(argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        raise ContainerUnavailable(f"`{' '.join(argv[:3])} ...` did not finish within {timeout:.0f} s") from None


def _said(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in (done.stderr or done.stdout).strip().splitlines() if line.strip()]
    return lines[-1][-400:] if lines else f"exit {done.returncode}"


def context_digest(context: Path) -> str:
    """Identifies a build context by its files' paths, modes and contents."""
    digest = hashlib.sha256()
    for folder, dirs, files in sorted(os.walk(context)):
        dirs.sort()
        for name in sorted(files):
            path = Path(folder) / name
            digest.update(path.relative_to(context).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() if not path.is_symlink() else os.readlink(path).encode())
    return digest.hexdigest()[:16]


def prepare_image(dockerfile: str | None, image: str | None, engine: list[str], timeout: float) -> TaskImage:
    """The task's image: its local ``image``, or one built from its Dockerfile (once per
    machine: the tag follows the context's content)."""
    if image is not None:
        tag, source = image, f"local image {image}"
    else:
        assert dockerfile is not None
        context = Path(dockerfile).parent
        tag, source = f"localhost/roder-task-{context_digest(context)}:latest", f"built from {dockerfile}"
    if _run([*engine, "image", "exists", tag], 60).returncode != 0:
        if image is not None:
            raise ContainerUnavailable(f"image {image} is not on this machine; Roder never pulls images")
        built = _run(
            [*engine, "build", "--pull=never", "-q", "-t", tag, "-f", str(dockerfile), str(Path(str(dockerfile)).parent)], timeout
        )
        if built.returncode != 0:
            raise ContainerUnavailable(f"podman could not build {dockerfile} (base images must be local): {_said(built)}")
    inspected = _run([*engine, "image", "inspect", "--format", "{{.Config.WorkingDir}}", tag], 60)
    if inspected.returncode != 0:
        raise ContainerUnavailable(f"podman cannot inspect {tag}: {_said(inspected)}")
    workdir = inspected.stdout.strip() or "/"
    if workdir == "/":
        raise ContainerUnavailable(f"{source} has no WORKDIR: its workspace cannot be the whole filesystem")
    return TaskImage(tag, workdir, source)


def export_workdir(engine: list[str], image: TaskImage, workspace: Path) -> None:
    """Fill ``workspace`` with the image's working folder (what the Dockerfile put there)."""
    name = f"roder-export-{os.getpid()}-{os.urandom(4).hex()}"
    created = _run([*engine, "create", "--pull=never", "--name", name, image.tag, "true"], 120)
    if created.returncode != 0:
        raise ContainerUnavailable(f"podman cannot create a container of {image.tag}: {_said(created)}")
    try:
        workspace.mkdir(parents=True, exist_ok=True)
        copied = _run([*engine, "cp", f"{name}:{image.workdir.rstrip('/')}/.", str(workspace)], 300)
        if copied.returncode != 0:
            raise ContainerUnavailable(f"podman cannot copy {image.workdir} out of {image.tag}: {_said(copied)}")
    finally:
        _run([*engine, "rm", "-f", name], 60)


@dataclass(frozen=True)
class VerifierMounts:
    """Host folders bound into the task's container at ``/tests`` (read-only) and ``/logs``:
    empty while the agent works, filled just before the score, read back after it."""

    tests: Path
    logs: Path

    @classmethod
    def under(cls, scratch: Path) -> VerifierMounts:
        mounts = cls(scratch / "container-tests", scratch / "container-logs")
        mounts.tests.mkdir(parents=True)
        mounts.logs.mkdir(parents=True)
        return mounts

    def run_args(self) -> list[str]:
        return ["-v", f"{self.tests}:/tests:ro", "-v", f"{self.logs}:/logs"]

    def fill(self, tests: Path | None, env: dict[str, str]) -> None:
        """The task's tests and the score's environment in, whatever the agent left out."""
        for folder in (self.tests, self.logs):  # emptied in place: the container holds these folders
            for entry in folder.iterdir():
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
        if tests is not None:
            shutil.copytree(tests, self.tests, symlinks=True, dirs_exist_ok=True)
        (self.tests / ENV_FILE).write_text("".join(f"{k}={shlex.quote(v)}\n" for k, v in env.items()))
        (self.logs / "verifier").mkdir()
        # The container's root may run as another user: the score writes its logs there.
        os.chmod(self.logs, 0o777)
        os.chmod(self.logs / "verifier", 0o777)


#: The score's environment, in ``/tests`` (never on a command line other processes could read).
ENV_FILE = ".roder-env"


def score_script(workdir: str, command: str) -> str:
    """The score as it runs in the container: the verifier's environment read from its file,
    in the task's working folder."""
    return f"set -a && . /tests/{ENV_FILE} && set +a && cd {shlex.quote(workdir)} && {{ {command}\n}}"


async def run_in_container(
    session: RunnerSession,
    workdir: str,
    command: str,
    timeout: float,
    mounts: VerifierMounts,
    tests: Path | None,
    env: dict[str, str],
) -> tuple[int | None, str]:
    """Run the score in the task's container: first every process the agent left there is
    killed (none may watch or race the score), then the tests go in, then the score runs.
    Returns (exit code, None on timeout; output)."""
    await session.run_internal(["sh", "-c", "kill -9 -1 2>/dev/null; true"], timeout=60)
    mounts.fill(tests, env)
    result = await session.run_internal(["sh", "-c", score_script(workdir, command)], timeout=timeout)
    return result.exit_code, result.stdout + result.stderr
