"""Threads written by an interrupted or crashed turn resume in every dialect.

Each test writes a thread file the way today's Roder writes one (the JSONL store appending the
runtime's events) for a turn cut off after the model's reasoning but before any text or tool
call, then resumes it through the real runtime against the loopback server and checks the
request body the server received: no assistant message without anything sendable, no trailing
thinking, no two user messages in a row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from roder_ext_jsonl_store import JsonlThreadStore

from roder_core.ir import (
    AgentInferenceRequest,
    AgentMessageItem,
    Message,
    ModelProfile,
    ReasoningItem,
    ReasoningPart,
    TextPart,
    ThreadHeader,
    Turn,
    TurnStatus,
    UserMessageItem,
)
from roder_core.providers.extension import ProviderExtension
from roder_core.runtime.runtime import Runtime
from roder_core.settings.paths import RoderPaths
from roder_core.testing.fake_server import FakeModelServer
from roder_core.threads.events import ItemCompleted, ThreadStarted, TurnCompleted, TurnStarted
from tests.builders import build_runtime
from tests.providers.helpers import DIALECTS, make_engine

MODELS = {"chat-completions": "deepseek-reasoner", "responses": "gpt-5", "anthropic-messages": "claude-sonnet-4-5"}

#: What each dialect's decoder stores for a reasoning block that completed (see the decoders).
REASONING_DATA: dict[str, dict[str, Any] | None] = {
    "anthropic-messages": {
        "anthropic-messages/0": {"type": "thinking", "thinking": "Plan: read the file.", "signature": "EqQBsigA=="}
    },
    "responses": {
        "responses/rs_1": {
            "summary": [{"type": "summary_text", "text": "Plan: read the file."}],
            "encrypted_content": "gAAAA-enc",
        }
    },
    "chat-completions": None,
}


async def write_interrupted_thread(workspace: Path, dialect: str, *, earlier_answer: bool) -> str:
    """A thread file whose last turn was interrupted after its reasoning completed."""
    store = JsonlThreadStore(RoderPaths.from_env().threads_dir)
    header = ThreadHeader(cwd=str(workspace.resolve()), provider="fake", model=MODELS[dialect])
    tid = header.id

    async def turn(items: list[Any], status: TurnStatus) -> None:
        started = Turn()
        await store.append(header, TurnStarted(thread_id=tid, turn_id=started.id))
        for item in items:
            await store.append(header, ItemCompleted(thread_id=tid, turn_id=started.id, item=item))
        done = started.model_copy(
            update={"status": status, "stop_reason": "cancelled" if status != TurnStatus.COMPLETED else None}
        )
        await store.append(header, TurnCompleted(thread_id=tid, turn=done))

    await store.append(header, ThreadStarted(thread_id=tid, thread=header))
    if earlier_answer:
        await turn([UserMessageItem(text="hello"), AgentMessageItem(text="Hi.")], TurnStatus.COMPLETED)
    reasoning = ReasoningItem(text="Plan: read the file.", provider_data=REASONING_DATA[dialect])
    await turn([UserMessageItem(text="read notes.txt"), reasoning], TurnStatus.INTERRUPTED)
    await store.close()
    return tid


def runtime_for(workspace: Path, dialect: str, base_url: str) -> Runtime:
    engine = ProviderExtension(make_engine(dialect, base_url, reasoning_effort="medium"))
    return build_runtime(workspace, engine=engine, store=True, provider="fake", model=MODELS[dialect])


def roles(body: dict[str, Any], dialect: str) -> list[str]:
    if dialect == "responses":
        return [str(item.get("role") or item.get("type")) for item in body["input"]]
    return [m["role"] for m in body["messages"] if m["role"] not in ("system", "developer")]


@pytest.mark.parametrize("earlier_answer", [False, True])
@pytest.mark.parametrize("dialect", DIALECTS)
async def test_resuming_a_thread_interrupted_after_reasoning(
    workspace: Path, roder_home: Path, dialect: str, earlier_answer: bool
) -> None:
    tid = await write_interrupted_thread(workspace, dialect, earlier_answer=earlier_answer)
    async with FakeModelServer([{"text": "Done."}]) as server:
        runtime = runtime_for(workspace, dialect, server.base_url)
        await runtime.resume_thread(tid)
        turn = await runtime.run_turn(tid, "go on")
        await runtime.close()
    assert turn.status == "completed", turn.error
    body = server.calls[0].json
    prefix = ["user", "assistant"] if earlier_answer else []
    assert roles(body, dialect) == [*prefix, "user"] if dialect != "responses" else [*prefix, "user", "user"]
    if dialect == "anthropic-messages":
        last = body["messages"][-1]["content"]
        assert [b["text"] for b in last] == ["read notes.txt", "go on"]
        assert all(b["type"] != "thinking" for m in body["messages"] for b in m["content"])
    elif dialect == "chat-completions":
        assert body["messages"][-1]["content"] == "read notes.txt\n\ngo on"
    else:
        assert all(item.get("type") != "reasoning" for item in body["input"])


def test_trailing_thinking_is_cut_and_unsigned_thinking_left_out() -> None:
    from roder_ext_anthropic.encode import encode_request

    data = {
        "anthropic-messages/0": {"type": "thinking", "thinking": "a", "signature": "sig"},
        "anthropic-messages/2": {"type": "thinking", "thinking": "b", "signature": "sig2"},
        "anthropic-messages/3": {"type": "thinking", "thinking": "c", "signature": ""},
    }
    request = AgentInferenceRequest(
        model="claude-sonnet-4-5",
        messages=[
            Message(role="user", parts=[TextPart(text="q")]),
            Message(
                role="assistant",
                parts=[
                    ReasoningPart(provider_data={"anthropic-messages/0": data["anthropic-messages/0"]}),
                    TextPart(text="partial"),
                    ReasoningPart(provider_data={k: v for k, v in data.items() if k != "anthropic-messages/0"}),
                ],
            ),
            Message(role="user", parts=[TextPart(text="more")]),
        ],
    )
    profile = ModelProfile(id="claude-sonnet-4-5", reasoning=True, max_output_tokens=64_000)
    body = encode_request(request, profile, effort="medium")
    assert [b["type"] for b in body["messages"][1]["content"]] == ["thinking", "text"]
