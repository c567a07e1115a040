"""A server whose real window is smaller than Roder assumed: the limit is learned from its
error (or from successive rejections), recorded per model, and the conversation compacted to fit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roder_core.ir import AgentMessageItem, CompactionItem
from roder_core.providers.extension import ProviderExtension
from roder_core.providers.limits import context_limit_from, limit_after_rejection
from roder_core.runtime.runtime import Runtime
from roder_core.settings.paths import RoderPaths
from roder_core.testing.fake_server import FakeModelServer
from roder_core.turn.tokens import estimate_tokens
from tests.builders import build_runtime
from tests.providers.helpers import make_engine

MODEL = "qwen2.5-coder:7b"  # the table says 32,768 tokens
LONG = "The module walks the tree and folds every node into the index. " * 300  # ~4,800 tokens
SHORT = "Goal: explain the indexer. It folds each node into the index."
VLLM = (
    "This model's maximum context length is 4096 tokens. However, you requested 9120 tokens (8096 in the "
    "messages, 1024 in the completion). Please reduce the length of the messages or completion."
)


def runtime_for(workspace: Path, base_url: str) -> Runtime:
    return build_runtime(
        workspace, engine=ProviderExtension(make_engine("chat-completions", base_url)), provider="fake", model=MODEL
    )


def limits_file() -> dict:
    return json.loads((RoderPaths.from_env().data_dir / "model-limits.json").read_text())


async def test_a_stated_limit_is_learned_recorded_and_compacted_to(workspace: Path, roder_home: Path) -> None:
    # Turn 1 fills more than the window the server really has; every later call (the summaries
    # compaction asks for, then the answer) gets the same short text.
    steps = [{"text": LONG}, {"status": 400, "error": {"message": VLLM, "type": "BadRequestError"}}, *[{"text": SHORT}] * 4]
    async with FakeModelServer(steps) as server:
        runtime = runtime_for(workspace, server.base_url)
        thread = await runtime.start_thread()
        await runtime.run_turn(thread.id, "explain the indexer")
        turn = await runtime.run_turn(thread.id, "and in one line?")
        await runtime.close()
    assert turn.status == "completed", turn.error
    assert [i.text for i in thread.items() if isinstance(i, AgentMessageItem)][-1] == SHORT
    assert any(isinstance(i, CompactionItem) for i in thread.items())
    assert limits_file()[f"fake/{MODEL}"]["context_window"] == 4096
    retried = server.calls[-1].json
    assert estimate_tokens(json.dumps(retried["messages"])) < 4096
    assert LONG not in json.dumps(retried)
    # A later run starts from the learned window: the planner fits it before the server refuses.
    again = runtime_for(workspace, server.base_url)
    profile = again.model_profile("fake", MODEL)
    assert profile.context_window == 4096
    assert profile.max_output_tokens <= 1024


async def test_without_a_stated_limit_each_rejection_lowers_the_window(workspace: Path, roder_home: Path) -> None:
    refused = {"status": 400, "error": {"message": "prompt is too long for this deployment", "type": "invalid_request"}}
    steps = [{"text": LONG}, refused, *[{"text": SHORT}] * 4]
    async with FakeModelServer(steps) as server:
        runtime = runtime_for(workspace, server.base_url)
        thread = await runtime.start_thread()
        await runtime.run_turn(thread.id, "explain the indexer")
        turn = await runtime.run_turn(thread.id, "shorter?")
        await runtime.close()
    assert turn.status == "completed", turn.error
    learned = limits_file()[f"fake/{MODEL}"]
    refused_size = estimate_tokens(json.dumps(server.calls[1].json["messages"]))
    assert learned["context_window"] < refused_size
    assert "refused" in learned["source"]


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        (VLLM, 4096),
        ("The decoder prompt (length 9000) is longer than the maximum model length of 8192. Make sure that", 8192),
        (
            '{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it",'
            '"type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}',
            4096,
        ),
        (
            "Trying to keep the first 5210 tokens when context the overflows. However, the model is loaded with "
            "context length of only 4096 tokens, which is not enough.",
            4096,
        ),
        ("This model's maximum context length is 128,000 tokens.", 128_000),
        ("prompt is too long: 210000 tokens > 200000 maximum", None),
    ],
)
def test_limits_stated_by_servers(text: str, limit: int | None) -> None:
    assert context_limit_from(text) == limit


def test_rejections_without_a_limit_step_down_but_never_below_the_floor() -> None:
    assert limit_after_rejection(None, 10_000, 32_768) == 8_000
    assert limit_after_rejection(None, 8_000, 8_000) == 6_400
    assert limit_after_rejection(None, 1_000, 32_768) == 2_048
    assert limit_after_rejection(40_000, 10_000, 32_768) == 8_000  # a stated limit above ours says nothing
