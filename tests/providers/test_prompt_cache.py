"""Prompt caching on the wire: a stable prefix, Anthropic and OpenRouter breakpoints, and the
Responses cache key, checked on the requests a real multi-turn session sends."""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from roder_ext_context import ContextExtension

from roder_core.kernel.distribution import HostContext
from roder_core.providers.extension import ProviderExtension
from roder_core.settings.config import RoderConfig
from roder_core.settings.paths import RoderPaths
from roder_core.testing.fake_server import FakeModelServer
from tests.builders import build_runtime
from tests.core.harness import ReadTool, TestExtension
from tests.providers.helpers import DIALECTS, make_engine

MODELS = {"chat-completions": "anthropic/claude-sonnet-4.6", "responses": "gpt-5", "anthropic-messages": "claude-sonnet-4-6"}
STEPS = [
    {"tool_calls": [{"name": "peek", "arguments": {"x": "a"}}]},
    {"text": "Peeked."},
    {"tool_calls": [{"name": "peek", "arguments": {"x": "b"}}]},
    {"text": "Peeked again."},
]


async def two_turns(workspace: Path, dialect: str, **table: Any) -> list[dict[str, Any]]:
    """Two turns with an edit to the git workspace between them; the four request bodies."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    async with FakeModelServer(STEPS) as server:
        runtime = build_runtime(
            workspace,
            engine=ProviderExtension(make_engine(dialect, server.base_url, **table)),
            extensions=[
                TestExtension([ReadTool()]),
                ContextExtension(HostContext(workspace, RoderPaths.from_env(), RoderConfig(), {})),
            ],
            provider="fake",
            model=MODELS[dialect],
        )
        thread = await runtime.start_thread()
        await runtime.run_turn(thread.id, "peek at a")
        (workspace / "edited.txt").write_text("an edit changes the git state")
        await runtime.run_turn(thread.id, "peek at b")
        await runtime.close()
    return [call.json for call in server.calls]


def without_cache_marks(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_cache_marks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_cache_marks(v) for v in value]
    return value


def history(body: dict[str, Any], dialect: str) -> list[Any]:
    return body["input"] if dialect == "responses" else body["messages"]


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_every_request_extends_the_previous_one(workspace: Path, dialect: str) -> None:
    bodies = await two_turns(workspace, dialect)
    stable = [{k: v for k, v in b.items() if k not in ("messages", "input")} for b in bodies]
    assert all(s == stable[0] for s in stable), "tools, instructions and settings never change"
    for before, after in itertools.pairwise(bodies):
        old, new = without_cache_marks(history(before, dialect)), without_cache_marks(history(after, dialect))
        assert new[: len(old)] == old, "each request is the previous one plus what happened since"
    text = json.dumps(bodies[2])
    assert "1 uncommitted change(s)" in text
    assert "clean working tree" in text  # both turns' environments, as sent


async def test_anthropic_reads_the_whole_history_from_cache(workspace: Path) -> None:
    bodies = await two_turns(workspace, "anthropic-messages")
    for body in bodies:
        assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
        marked = [i for i, m in enumerate(body["messages"]) if any("cache_control" in b for b in m["content"])]
        users = [i for i, m in enumerate(body["messages"]) if m["role"] == "user"]
        assert marked == users[-2:]  # this request's end, and where the previous one ended
    # The previous request's last breakpoint is a breakpoint again in the next one.
    third = bodies[2]["messages"]
    assert without_cache_marks(third[-3]) == without_cache_marks(bodies[1]["messages"][-1])


async def test_openrouter_marks_claude_breakpoints(workspace: Path) -> None:
    bodies = await two_turns(workspace, "chat-completions", cache_control=True)
    body = bodies[1]
    system = body["messages"][0]
    assert system["content"][-1]["cache_control"] == {"type": "ephemeral"}
    marked = [
        m["role"]
        for m in body["messages"][1:]
        if isinstance(m["content"], list) and any("cache_control" in p for p in m["content"])
    ]
    assert marked == ["user", "tool"]


async def test_no_cache_control_without_the_quirk_or_for_other_models(workspace: Path) -> None:
    bodies = await two_turns(workspace, "chat-completions")
    assert without_cache_marks(bodies) == bodies


async def test_responses_sends_the_thread_as_prompt_cache_key(workspace: Path) -> None:
    bodies = await two_turns(workspace, "responses")
    keys = {body["prompt_cache_key"] for body in bodies}
    assert len(keys) == 1
    assert next(iter(keys)).startswith("thr_")


async def test_openrouter_breakpoints_keep_messages_byte_stable(workspace: Path) -> None:
    """A message carries a breakpoint in one request and none in the next: its bytes, marks
    aside, must not change (string vs part list would), or the cached prefix ends there."""
    bodies = await two_turns(workspace, "chat-completions", cache_control=True)
    for before, after in itertools.pairwise(bodies):
        old, new = without_cache_marks(before["messages"]), without_cache_marks(after["messages"])
        assert new[: len(old)] == old
