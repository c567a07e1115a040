"""The process broker without a sandbox: what is enforced even when bubblewrap is missing
(scrubbed environment, resource limits, workspace-only working folder, capability checks,
output caps and spill files, process-group kills on timeout, completion and cancellation)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import roder_core.brokers.process as process_module
from roder_core.brokers import BrokerDenied
from roder_core.brokers.command_output import MAX_BYTES
from roder_core.brokers.process import HostProcessBroker, ResourceLimits
from tests.brokers.helpers import assert_gone, marker
from tests.builders import until
from tests.tools.harness import make_brokers


def process(workspace: Path, tmp_path: Path, **kw: Any) -> HostProcessBroker:
    return make_brokers(workspace, tmp_path / "cache", **kw).process  # type: ignore[return-value]


async def test_merged_output_exit_code_and_duration(workspace: Path, tmp_path: Path) -> None:
    result = await process(workspace, tmp_path).run("echo out; echo err >&2; exit 3")
    assert result.exit_code == 3
    assert not result.timed_out
    assert "out" in result.output
    assert "err" in result.output
    assert result.duration_ms >= 0
    assert result.sandbox == "off"


async def test_environment_is_scrubbed(workspace: Path, tmp_path: Path) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/root",
        "OPENAI_API_KEY": "sk-abcdefghijklmnop1234",
        "GITHUB_TOKEN": "ghp_secretvalue123",
        "DB_PASSWORD": "hunter2hunter2",
        "AWS_SECRET_ACCESS_KEY": "x" * 20,
        "MY_CREDENTIALS": "creds-creds",
        "SSH_AUTH_SOCK": "/tmp/agent.sock",
        "HARMLESS": "visible",
    }
    result = await process(workspace, tmp_path, env=env).run("env")
    assert "HARMLESS=visible" in result.output
    for name in ("OPENAI_API_KEY", "GITHUB_TOKEN", "DB_PASSWORD", "AWS_SECRET_ACCESS_KEY", "MY_CREDENTIALS", "SSH_AUTH_SOCK"):
        assert name not in result.output


async def test_secret_granted_by_name_is_passed(workspace: Path, tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "DEPLOY_TOKEN": "tok-123456789", "OTHER_TOKEN": "tok-987654321"}
    caps = frozenset({"fs.read.workspace", "process.spawn.shell", "secret.read.DEPLOY_TOKEN"})
    result = await process(workspace, tmp_path, env=env, capabilities=caps).run(
        'test "$DEPLOY_TOKEN" = tok-123456789 && echo granted; env'
    )
    assert "granted" in result.output
    assert "OTHER_TOKEN" not in result.output
    # the child has it, but its value is still redacted from what the model and transcript see
    assert "DEPLOY_TOKEN=[redacted:DEPLOY_TOKEN]" in result.output
    assert "tok-123456789" not in result.output


async def test_resource_limits_are_applied(workspace: Path, tmp_path: Path) -> None:
    limits = ResourceLimits(cpu_seconds=200, address_space_mb=4096, file_size_mb=1, processes=64)
    proc = process(workspace, tmp_path, limits=limits)
    result = await proc.run("ulimit -t; ulimit -v; ulimit -f", timeout=30)
    cpu, vmem, fsize = result.output.split()
    assert int(cpu) == 200
    assert int(vmem) == 4096 * 1024
    assert int(fsize) == 1024  # bash counts -f in 1 KB blocks
    big = await proc.run("head -c 3000000 /dev/zero > big.bin; echo rc=$?", timeout=30)
    assert "rc=153" in big.output or "File size limit exceeded" in big.output
    assert (workspace / "big.bin").stat().st_size <= 1024 * 1024


async def test_cpu_limit_covers_a_long_timeout(workspace: Path, tmp_path: Path) -> None:
    proc = process(workspace, tmp_path, limits=ResourceLimits(cpu_seconds=60))
    result = await proc.run("ulimit -t", timeout=900)
    assert int(result.output) >= 900


async def test_working_folder_must_be_inside_workspace(workspace: Path, tmp_path: Path) -> None:
    proc = process(workspace, tmp_path)
    with pytest.raises(BrokerDenied, match="outside the workspace"):
        await proc.run("pwd", cwd=tmp_path)
    (workspace / "sub").mkdir()
    result = await proc.run("pwd", cwd=workspace / "sub")
    assert result.output.strip() == str((workspace / "sub").resolve())


async def test_spawn_needs_the_capability(workspace: Path, tmp_path: Path) -> None:
    proc = process(workspace, tmp_path, capabilities=frozenset({"fs.read.workspace"}))
    with pytest.raises(BrokerDenied, match=r"process\.spawn\.shell"):
        await proc.run("echo hi")


async def test_large_output_keeps_head_and_tail_and_spills(workspace: Path, tmp_path: Path) -> None:
    result = await process(workspace, tmp_path).run("seq 1 100000")
    assert result.truncated
    assert result.total_lines == 100000
    lines = result.output.splitlines()
    assert lines[0] == "1"
    assert lines[-1] == "100000"
    assert len(result.output.encode()) <= MAX_BYTES + 1000
    spilled = Path(result.full_output_path or "").read_text().splitlines()
    assert len(spilled) == 100000
    assert spilled[50000] == "50001"
    assert str(result.full_output_path) in result.output


async def test_more_than_2000_short_lines_is_truncated_too(workspace: Path, tmp_path: Path) -> None:
    result = await process(workspace, tmp_path).run("seq 1 3000")
    assert result.truncated
    assert len(result.output.splitlines()) < 2100


async def test_output_flood_stays_bounded(workspace: Path, tmp_path: Path) -> None:
    live: list[str] = []
    result = await process(workspace, tmp_path).run("head -c 30000000 /dev/zero | tr '\\0' 'y'", on_output=live.append)
    assert result.exit_code == 0
    assert result.total_bytes == 30_000_000
    assert len(result.output) < MAX_BYTES + 1000
    assert sum(len(x) for x in live) < 300_000  # live output stops after its budget


async def test_timeout_kills_the_whole_group(workspace: Path, tmp_path: Path) -> None:
    mark = marker()
    command = f"(exec -a {mark} sleep 300) & (exec -a {mark} sleep 300) & exec -a {mark} sleep 300"
    result = await process(workspace, tmp_path).run(command, timeout=1)
    assert result.timed_out
    assert result.exit_code is None
    assert_gone(mark)


async def test_background_processes_end_with_the_command(workspace: Path, tmp_path: Path) -> None:
    mark = marker()
    result = await process(workspace, tmp_path).run(f"(exec -a {mark} sleep 300) & echo started", timeout=30)
    assert result.exit_code == 0
    assert "started" in result.output
    assert not result.timed_out  # it did not wait for the background sleep (its 30 s would run out)
    assert_gone(mark)


async def test_cancellation_kills_the_group(workspace: Path, tmp_path: Path) -> None:
    mark = marker()
    proc = process(workspace, tmp_path)
    started = asyncio.Event()
    command = f"(exec -a {mark} sleep 300) & echo started; exec -a {mark} sleep 300"
    task = asyncio.create_task(proc.run(command, timeout=60, on_output=lambda text: started.set()))
    async with asyncio.timeout(30):
        await started.wait()  # the group is running
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert_gone(mark)


async def test_cancellation_while_the_command_starts_kills_the_group(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn interrupt may land after the command started but before the broker owns its
    pipes (a loaded machine widens that window): the command must not outlive the call."""
    mark = marker()
    pipes_wanted, go_on = asyncio.Event(), asyncio.Event()
    real = process_module._pipe_pump

    async def held(*args: Any) -> Any:
        pipes_wanted.set()
        await go_on.wait()
        return await real(*args)

    monkeypatch.setattr(process_module, "_pipe_pump", held)
    command = f"(exec -a {mark} sleep 300) & touch started; exec -a {mark} sleep 300"
    task = asyncio.create_task(process(workspace, tmp_path).run(command, timeout=60))
    async with asyncio.timeout(30):
        await pipes_wanted.wait()
    await until((workspace / "started").exists)  # the group is running
    task.cancel()
    go_on.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert_gone(mark)


async def test_job_control_groups_in_the_session_are_killed(workspace: Path, tmp_path: Path) -> None:
    mark = marker()
    result = await process(workspace, tmp_path).run(f"set -m; (exec -a {mark} sleep 300) & echo bg", timeout=30)
    assert "bg" in result.output
    assert_gone(mark)


async def test_which_uses_the_child_path(workspace: Path, tmp_path: Path) -> None:
    proc = process(workspace, tmp_path, env={"PATH": "/nonexistent"})
    assert proc.which("sh") is None
    assert process(workspace, tmp_path).which("sh") is not None


async def test_secret_values_never_reach_output_or_spill(workspace: Path, tmp_path: Path) -> None:
    secret = "sk-" + "s3cr3t" * 6
    (workspace / "leak.txt").write_text(f"key={secret}\n" * 20000)
    env = {"PATH": "/usr/bin:/bin", "OPENAI_API_KEY": secret}
    live: list[str] = []
    result = await process(workspace, tmp_path, env=env).run("cat leak.txt", on_output=live.append)
    assert result.truncated
    assert result.full_output_path
    assert secret not in result.output
    assert "[redacted:OPENAI_API_KEY]" in result.output
    assert secret not in "".join(live)
    spilled = Path(result.full_output_path).read_text()
    assert secret not in spilled
    assert spilled.count("[redacted:OPENAI_API_KEY]") == 20000


async def test_a_read_only_run_without_a_sandbox_is_guarded_like_any_other(workspace: Path, tmp_path: Path) -> None:
    """Without bubblewrap nothing holds a command to reading, so ``read_only`` must not skip
    the tree guard: a protected file it makes is still moved out of the workspace."""
    result = await process(workspace, tmp_path).run("echo '{}' > .mcp.json", read_only=True)
    assert result.sandbox == "off"
    assert not (workspace / ".mcp.json").exists()
    assert any(q.startswith(".mcp.json -> ") for q in result.quarantined), result.quarantined
