"""Runner snapshots reused by rewind: with ``snapshots = "turn"`` each turn starts with a
snapshot tied to its user message, and rewinding the code to that message restores it, shell
commands' changes included (hunks alone cannot undo those), on this machine and on an ssh host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roder_core.runtime.bootstrap import StartSettings, start_runtime
from roder_core.server.client import LocalAppClient
from roder_tui.rewind import restore_code
from tests.runners.sshd import Sshd


async def test_rewind_restores_the_turn_snapshot(
    workspace: Path, tmp_path: Path, roder_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (roder_home / "config.toml").write_text('[runners.here]\nkind = "local"\nsnapshots = "turn"\n')
    await _rewind_after_shell_changes(workspace, workspace, "here", tmp_path, monkeypatch)


@pytest.mark.e2e
async def test_rewind_restores_the_turn_snapshot_on_an_ssh_host(
    workspace: Path, tmp_path: Path, roder_home: Path, sshd: Sshd, monkeypatch: pytest.MonkeyPatch
) -> None:
    remote = tmp_path / "remote-ws"
    remote.mkdir()
    (roder_home / "config.toml").write_text(sshd.runner_table("box", remote, snapshots="turn"))
    await _rewind_after_shell_changes(workspace, remote, "box", tmp_path, monkeypatch)
    assert not (workspace / "a.txt").exists()  # everything happened on the host
    assert not any(p.name.endswith(".git") for p in remote.iterdir())  # the store is outside the workspace


async def _rewind_after_shell_changes(
    workspace: Path, files: Path, runner: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn's shell command changes ``files`` (the runner's workspace); rewinding restores them."""
    script = tmp_path / "script.json"
    steps = [
        {"text": "Changing.", "tool_calls": [{"name": "bash", "arguments": {"command": "echo v2 > a.txt; echo new > b.txt"}}]},
        {"text": "Done."},
    ]
    script.write_text(json.dumps({"steps": steps}))
    monkeypatch.setenv("RODER_MOCK_SCRIPT", str(script))
    (files / "a.txt").write_text("v1\n")
    started = start_runtime(StartSettings(cwd=workspace, provider="mock", mode="bypass", trust=False, interactive=False))
    runtime = started.runtime
    client = LocalAppClient.for_runtime(runtime)
    try:
        thread = await runtime.start_thread(workspace)
        await client.request("runners/select", {"threadId": thread.id, "runner": runner})
        turn = await runtime.run_turn(thread.id, "change the files")
        assert turn.status == "completed"
        assert (files / "a.txt").read_text() == "v2\n" and (files / "b.txt").exists()
        message = next(i for i in runtime.thread(thread.id).items() if i.type == "userMessage")
        listed = await client.request("runners/snapshot", {"threadId": thread.id, "action": "list", "itemId": message.id})
        assert [s.label for s in listed.snapshots] == ["turn"]  # type: ignore[attr-defined]

        restored = await restore_code(client, thread.id, message.id)
        assert restored.snapshot == listed.snapshots[0].id  # type: ignore[attr-defined]
        assert "shell commands' changes included" in restored.summary()
        assert (files / "a.txt").read_text() == "v1\n" and not (files / "b.txt").exists()
    finally:
        await client.close()
        await runtime.close()
