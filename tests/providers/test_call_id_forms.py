"""Tool-call ids from one provider replayed to another dialect: each request body carries ids in
the form its dialect accepts (Anthropic ``^[a-zA-Z0-9_-]+$``, Chat Completions at most 40
characters), the same stand-in for a call and its result, and the same in every request."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from roder_ext_anthropic import AnthropicEngine
from roder_ext_chat_completions import ChatCompletionsEngine
from roder_ext_openai_responses import ResponsesEngine

from roder_core.ir import ToolResultItem
from roder_core.providers.catalog import resolve_providers
from roder_core.providers.engine import HttpEngine
from roder_core.providers.extension import ProviderExtension
from roder_core.providers.wire import wire_call_id
from roder_core.settings.config import RoderConfig
from roder_core.testing.fake_server import FakeModelServer
from tests.builders import build_runtime
from tests.core.harness import ReadTool, TestExtension
from tests.providers.helpers import FAST_RETRY

HOST_ID = "functions.peek:0"
LONG_ID = "call_" + "x" * 70
ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _engines(urls: dict[str, tuple[str, type[HttpEngine]]]) -> list[ProviderExtension]:
    dialects = {"chat": "chat-completions", "claude": "anthropic-messages", "resp": "responses"}
    tables = {name: {"dialect": dialects[name], "base_url": url} for name, (url, _cls) in urls.items()}
    config = RoderConfig.model_validate({"providers": tables})
    specs = {s.name: s for s in resolve_providers(config, {})}
    return [ProviderExtension(cls(specs[name], {}, config.models_override, retry=FAST_RETRY)) for name, (_u, cls) in urls.items()]


def _calls(step_ids: list[str]) -> dict[str, Any]:
    return {"tool_calls": [{"id": i, "name": "peek", "arguments": {"x": str(n)}} for n, i in enumerate(step_ids)]}


async def test_ids_of_one_host_reach_every_dialect_in_its_form(workspace: Path) -> None:
    first_turn = [_calls([HOST_ID, LONG_ID]), {"text": "peeked"}]
    async with (
        FakeModelServer(first_turn) as chat,
        FakeModelServer([{"text": "ok"}]) as claude,
        FakeModelServer([{"text": "ok"}]) as resp,
    ):
        engine, *others = _engines(
            {
                "chat": (chat.base_url, ChatCompletionsEngine),
                "claude": (claude.base_url, AnthropicEngine),
                "resp": (resp.base_url, ResponsesEngine),
            }
        )
        runtime = build_runtime(
            workspace, engine=engine, extensions=[TestExtension([ReadTool()]), *others], provider="chat", model="gpt-4.1"
        )
        thread = await runtime.start_thread()
        await runtime.run_turn(thread.id, "peek twice")
        await runtime.run_turn(thread.id, "and now?", provider="claude", model="claude-sonnet-4-6")
        await runtime.run_turn(thread.id, "and now?", provider="resp", model="gpt-5")
        stored = {r.call_id for r in thread.items() if isinstance(r, ToolResultItem)}
        await runtime.close()
    assert stored == {HOST_ID, LONG_ID}  # the thread keeps the provider's own ids

    # Chat Completions: the valid id unchanged in form rules, the long one cut to 40, paired.
    chat_body = chat.calls[1].json["messages"]
    sent = [c["id"] for m in chat_body for c in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in chat_body if m["role"] == "tool"]
    assert sent == answered == [wire_call_id(HOST_ID, 40), wire_call_id(LONG_ID, 40)]
    assert all(len(i) <= 40 and ANTHROPIC_ID.match(i) for i in sent)

    # Anthropic: tool_use ids match the documented pattern and pair with their tool_result.
    blocks = [b for m in claude.calls[0].json["messages"] if isinstance(m["content"], list) for b in m["content"]]
    uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
    assert uses == results
    assert all(ANTHROPIC_ID.match(i) for i in uses)
    assert uses[0].startswith("functions_peek_0_")
    assert len(set(uses)) == 2

    # Responses: function_call and function_call_output share each call_id.
    items = resp.calls[0].json["input"]
    calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
    assert calls == outputs
    assert all(ANTHROPIC_ID.match(i) for i in calls)


def test_the_stand_in_is_stable_distinct_and_leaves_valid_ids_alone() -> None:
    assert wire_call_id("toolu_01ABC", 64) == "toolu_01ABC"
    assert wire_call_id(HOST_ID, 64) == wire_call_id(HOST_ID, 64)
    assert wire_call_id("a:b", 64) != wire_call_id("a.b", 64) != "a_b"
    assert len(wire_call_id(LONG_ID, 40)) == 40
    assert ANTHROPIC_ID.match(wire_call_id("", 64))
