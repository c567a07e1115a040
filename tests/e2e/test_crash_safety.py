"""Crash safety: a real `roder -p` is killed with SIGKILL mid-stream and after tool results; the
thread file must load with every completed item, and `roder -p -c` must carry on from it."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from roder_ext_jsonl_store import JsonlThreadStore

from roder_core.ir import AgentMessageItem, ToolCallItem, ToolResultItem, UserMessageItem
from roder_core.settings.paths import RoderPaths

pytestmark = pytest.mark.e2e

SLOW_TEXT = {"text": "Once upon a time " * 200, "chunk_size": 4, "delay_ms": 15}


def _env(tmp_path: Path, steps: list[dict[str, Any]], name: str) -> dict[str, str]:
    script = tmp_path / f"{name}.json"
    script.write_text(json.dumps({"steps": steps}))
    return {**os.environ, "RODER_MOCK_SCRIPT": str(script)}


class Roder:
    """A `roder -p --output-format stream-json` process whose events are read as they come."""

    def __init__(self, workspace: Path, env: dict[str, str], *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "roder_tui.cli", "-p", *args, "--provider", "mock", "--output-format", "stream-json"],
            cwd=workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.events: list[dict[str, Any]] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def wait_for(self, predicate: Any, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not any(predicate(e) for e in self.events):
            line = self._lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            if line is None:
                raise AssertionError(f"roder exited early: {self.proc.wait()} {self.proc.stderr.read()}")
            self.events.append(json.loads(line))

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        assert self.proc.wait(timeout=10) == -signal.SIGKILL

    def completed_items(self) -> dict[str, dict[str, Any]]:
        return {e["item"]["id"]: e["item"] for e in self.events if e["type"] == "item/completed"}


def _run(workspace: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", *args], cwd=workspace, env=env, capture_output=True, text=True, timeout=60
    )


def _store() -> JsonlThreadStore:
    return JsonlThreadStore(RoderPaths.from_env().threads_dir)


async def _assert_loads_with(thread_id: str, completed: dict[str, dict[str, Any]]) -> Any:
    thread = await _store().load(thread_id)
    loaded = {item.id: item.wire() for item in thread.items()}
    for item_id, item in completed.items():
        assert loaded.get(item_id) == item, f"completed item {item['type']} {item_id} was lost"
    assert thread.turns[-1].status == "interrupted"
    assert thread.status == "idle"
    return thread


async def test_killed_mid_stream_then_continued(workspace: Path, tmp_path: Path) -> None:
    roder = Roder(workspace, _env(tmp_path, [{"reasoning": "Let me think.", **SLOW_TEXT}], "slow"), "tell a story")
    roder.wait_for(lambda e: e["type"] == "item/updated" and e["item"]["type"] == "agentMessage")
    roder.kill()
    thread_id = next(e["threadId"] for e in roder.events if e["type"] == "thread/started")
    completed = roder.completed_items()
    assert {i["type"] for i in completed.values()} >= {"userMessage", "reasoning"}
    thread = await _assert_loads_with(thread_id, completed)
    items = thread.turns[0].items
    assert isinstance(items[0], UserMessageItem)
    assert isinstance(items[-1], AgentMessageItem)
    snapshot = [e["item"]["text"] for e in roder.events if e["type"] == "item/updated"][-1]
    kept = items[-1].text
    assert snapshot and kept.startswith(snapshot), "the streamed text saved before the kill is kept"
    assert SLOW_TEXT["text"].startswith(kept)
    assert len(kept) < len(SLOW_TEXT["text"])

    done = _run(
        workspace, _env(tmp_path, [{"text": "Picking up where we left off."}], "after"), "-p", "-c", "go on", "--provider", "mock"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Picking up where we left off.")
    store = _store()
    resumed = await store.load(thread_id)
    assert [t.status for t in resumed.turns] == ["interrupted", "completed"]
    assert store.problems[thread_id] == [], "no damaged line: every write was a whole line"


async def test_killed_after_tool_results_keeps_the_tool_steps(workspace: Path, tmp_path: Path) -> None:
    steps = [
        {"text": "Checking my notes.", "tool_calls": [{"name": "memory_search", "arguments": {"query": "story"}}]},
        SLOW_TEXT,
    ]
    roder = Roder(workspace, _env(tmp_path, steps, "tools"), "what do you remember?")
    roder.wait_for(lambda e: e["type"] == "item/completed" and e["item"]["type"] == "toolResult")
    seen = len(roder.events)
    roder.wait_for(lambda e: roder.events.index(e) >= seen and e["type"] == "item/agentMessage/delta")
    roder.kill()
    thread_id = next(e["threadId"] for e in roder.events if e["type"] == "thread/started")
    thread = await _assert_loads_with(thread_id, roder.completed_items())
    kinds = [type(i) for i in thread.turns[0].items]
    assert kinds[:4] == [UserMessageItem, AgentMessageItem, ToolCallItem, ToolResultItem]

    listed = _run(workspace, os.environ.copy(), "sessions", "list", "--json")
    assert [row["id"] for row in json.loads(listed.stdout)] == [thread_id]
    done = _run(
        workspace,
        _env(tmp_path, [{"text": "Nothing relevant was saved."}], "after"),
        "-p",
        "-r",
        thread_id[:12],
        "and now?",
        "--provider",
        "mock",
    )
    assert done.returncode == 0, done.stderr
    exported = _run(workspace, os.environ.copy(), "sessions", "export", thread_id, "--format", "json")
    trajectory = json.loads(exported.stdout)
    parts = [p["type"] for m in trajectory["messages"] for p in m["parts"]]
    assert parts.count("tool_call") == parts.count("tool_result") == 1
    assert [t["status"] for t in trajectory["turns"]] == ["interrupted", "completed"]
