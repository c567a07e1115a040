"""Runner snapshots reused by rewind: with ``snapshots = "turn"`` each turn starts with a
snapshot tied to its user message, and rewinding the code to that message restores it, shell
commands' changes included (hunks alone cannot undo those)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roder_core.runtime.bootstrap import StartSettings, start_runtime
from roder_core.server.client import LocalAppClient
from roder_tui.rewind import restore_code


async def test_rewind_restores_the_turn_snapshot(
    workspace: Path, tmp_path: Path, roder_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (roder_home / "config.toml").write_text('[runners.here]\nkind = "local"\nsnapshots = "turn"\n')
    script = tmp_path / "script.json"
    steps = [
        {"text": "Changing.", "tool_calls": [{"name": "bash", "arguments": {"command": "echo v2 > a.txt; echo new > b.txt"}}]},
        {"text": "Done."},
    ]
    script.write_text(json.dumps({"steps": steps}))
    monkeypatch.setenv("RODER_MOCK_SCRIPT", str(script))
    (workspace / "a.txt").write_text("v1\n")
    started = start_runtime(StartSettings(cwd=workspace, provider="mock", mode="bypass", trust=False, interactive=False))
    runtime = started.runtime
    client = LocalAppClient.for_runtime(runtime)
    try:
        thread = await runtime.start_thread(workspace)
        await client.request("runners/select", {"threadId": thread.id, "runner": "here"})
        turn = await runtime.run_turn(thread.id, "change the files")
        assert turn.status == "completed"
        assert (workspace / "a.txt").read_text() == "v2\n" and (workspace / "b.txt").exists()
        message = next(i for i in runtime.thread(thread.id).items() if i.type == "userMessage")
        listed = await client.request("runners/snapshot", {"threadId": thread.id, "action": "list", "itemId": message.id})
        assert [s.label for s in listed.snapshots] == ["turn"]  # type: ignore[attr-defined]

        restored = await restore_code(client, thread.id, message.id)
        assert restored.snapshot == listed.snapshots[0].id  # type: ignore[attr-defined]
        assert "shell commands' changes included" in restored.summary()
        assert (workspace / "a.txt").read_text() == "v1\n" and not (workspace / "b.txt").exists()
    finally:
        await client.close()
        await runtime.close()
