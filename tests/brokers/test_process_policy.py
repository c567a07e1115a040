"""The two process brokers share one policy half: the same refusal, the same environment, the
same audit records.

``HostProcessBroker`` starts commands on this machine; ``RunnerProcessBroker`` hands them to a
runner's transport. Here the runner's transport runs the argv on this machine too, so whatever
``command_broker.CommandBroker`` decides (grants, the working folder, the scrubbed environment,
redaction, the audit records) must come out the same through both. A structural check keeps
those decisions out of the two subclasses.
"""

from __future__ import annotations

import ast
import asyncio
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import roder_core.brokers.process as host_process
import roder_core.brokers.runner_process as runner_process
from roder_core.brokers import ProcessBroker
from roder_core.brokers.fs import WorkspaceFileSystem
from roder_core.brokers.runner_process import CommandExit, RunnerProcessBroker
from tests.tools.harness import make_brokers

SECRET = "sk-live-0123456789abcdefghij"
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent", "OPENAI_API_KEY": SECRET, "HARMLESS": "seen"}


class HereCommands:
    """A ``CommandTransport`` running the argv on this machine, in its own process group."""

    async def execute(
        self,
        argv: list[str],
        *,
        cwd: str,
        env: dict[str, str],
        timeout: float | None,
        on_stdout: Callable[[bytes], None],
        on_stderr: Callable[[bytes], None],
        on_group: Callable[[int], None] | None = None,
    ) -> CommandExit:
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True
        )
        assert proc.stdout is not None and proc.stderr is not None
        out, err = await proc.communicate()
        on_stdout(out)
        on_stderr(err)
        return CommandExit(proc.returncode)


Records = list[tuple[str, dict[str, Any]]]
Audited = tuple[ProcessBroker, Records]


def both(workspace: Path, tmp_path: Path, capabilities: frozenset[str]) -> tuple[Audited, Audited]:
    here: Records = []
    runner: Records = []
    local = make_brokers(
        workspace, tmp_path / "cache", capabilities=capabilities, env=ENV, audit=lambda k, f: here.append((k, f))
    ).process
    remote = RunnerProcessBroker(
        WorkspaceFileSystem(workspace, capabilities=capabilities, audit=lambda k, f: runner.append((k, f))),
        HereCommands(),
        base_env=ENV,
        spill_dir=tmp_path / "runner-spill",
        sandbox_level="off",
        shell=shutil.which("bash") or "/bin/sh",
        capabilities=capabilities,
        audit=lambda k, f: runner.append((k, f)),
    )
    return (local, here), (remote, runner)


SHELL = frozenset({"fs.read.workspace", "process.spawn.shell"})
REFUSALS: dict[str, tuple[frozenset[str], str | list[str], str | None]] = {
    "no spawn grant": (frozenset({"fs.read.workspace"}), ["true"], None),
    "a shell line without the shell grant": (frozenset({"fs.read.workspace", "process.spawn.exec"}), "true", None),
    "a working folder outside the workspace": (SHELL, "true", "/"),
    "a working folder that is a file": (SHELL, "true", "file.txt"),
    "a working folder that is missing": (SHELL, "true", "missing"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
async def test_the_same_refusal_through_both_brokers(workspace: Path, tmp_path: Path, case: str) -> None:
    capabilities, command, cwd = REFUSALS[case]
    (workspace / "file.txt").write_text("x")
    (local, here), (remote, runner) = both(workspace, tmp_path, capabilities)
    errors = []
    for broker in (local, remote):
        with pytest.raises((PermissionError, NotADirectoryError)) as caught:
            await broker.run(command, cwd=None if cwd is None else Path(cwd))
        errors.append((type(caught.value), str(caught.value)))
    assert errors[0] == errors[1]
    assert here == runner


async def test_the_same_environment_output_and_records(workspace: Path, tmp_path: Path) -> None:
    (local, here), (remote, runner) = both(workspace, tmp_path, SHELL)
    line = 'echo "key=$OPENAI_API_KEY harmless=$HARMLESS"; echo "typed: sk-live-0123456789abcdefghij" >&2; exit 3'
    results = [await broker.run(line, timeout=30) for broker in (local, remote)]
    assert results[0].output == results[1].output
    assert "harmless=seen" in results[0].output and SECRET not in results[0].output
    assert results[0].exit_code == results[1].exit_code == 3
    # the host adds what only it has (a shared loopback network, quarantined paths); the rest agrees
    host_only = {"shared_network", "quarantined", "duration_ms"}
    assert [(k, {n: v for n, v in f.items() if n not in host_only}) for k, f in here] == [
        (k, {n: v for n, v in f.items() if n not in host_only}) for k, f in runner
    ]
    assert [k for k, _f in here] == ["process.start", "process.exit"]
    assert here[0][1]["env_dropped"] == ["OPENAI_API_KEY"]


#: What only ``CommandBroker`` decides: the grants, the environment, the start and end records.
_DECISIONS_SAID = {"process.start", "process.exit", "process.spawn.shell"}


@pytest.mark.parametrize(("module", "name"), [(host_process, "HostProcessBroker"), (runner_process, "RunnerProcessBroker")])
def test_the_subclasses_keep_to_how_commands_run(module: Any, name: str) -> None:
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if called == "scrubbed_env":
                found.append(f"line {node.lineno}: {called}(...)")
        if isinstance(node, ast.Constant) and node.value in _DECISIONS_SAID:
            found.append(f"line {node.lineno}: {node.value!r}")
    assert not found, f"{module.__name__} decides for itself; move it to command_broker.CommandBroker: {found}"
