"""Shared test helpers: an engine of any dialect pointed at the loopback fake server."""

from __future__ import annotations

from typing import Any

from roder_ext_anthropic import AnthropicEngine
from roder_ext_chat_completions import ChatCompletionsEngine
from roder_ext_openai_responses import ResponsesEngine

from roder_core.ir import (
    AgentInferenceRequest,
    InferenceEvent,
    Message,
    MessageDelta,
    ReasoningDelta,
    TextPart,
    ToolCallEvent,
    ToolSpec,
)
from roder_core.kernel.services import InferenceTurnContext
from roder_core.providers.catalog import resolve_providers
from roder_core.providers.engine import HttpEngine
from roder_core.providers.retry import RetryPolicy
from roder_core.settings.config import RoderConfig
from roder_core.settings.credentials import CredentialStore

ENGINES: dict[str, type[HttpEngine]] = {
    "chat-completions": ChatCompletionsEngine,
    "responses": ResponsesEngine,
    "anthropic-messages": AnthropicEngine,
}
DIALECTS = tuple(ENGINES)
FAST_RETRY = RetryPolicy(max_retries=4, base_delay=0.01, max_delay=0.05)
KEY_ENV = "FAKE_PROVIDER_KEY"


def make_engine(
    dialect: str,
    base_url: str,
    *,
    api_key: str | None = None,
    retry: RetryPolicy = FAST_RETRY,
    models: dict[str, Any] | None = None,
    credentials: CredentialStore | None = None,
    **table: Any,
) -> HttpEngine:
    table = {"dialect": dialect, "base_url": base_url, **table}
    if api_key is not None:
        table["api_key_env"] = KEY_ENV
    config = RoderConfig.model_validate({"providers": {"fake": table}, "models": models or {}})
    env = {KEY_ENV: api_key} if api_key else {}
    spec = next(s for s in resolve_providers(config, env) if s.name == "fake")
    return ENGINES[dialect](spec, env, config.models_override, retry=retry, credentials=credentials)


def make_request(text: str = "hi", *, model: str = "fake-model", tools: bool = True, **extra: Any) -> AgentInferenceRequest:
    specs = (
        [
            ToolSpec(
                name="bash",
                description="run a command",
                parameters={"type": "object", "properties": {"command": {"type": "string"}}},
            )
        ]
        if tools
        else []
    )
    return AgentInferenceRequest(
        model=model, system="You are terse.", messages=[Message(role="user", parts=[TextPart(text=text)])], tools=specs, **extra
    )


async def collect(engine: HttpEngine, request: AgentInferenceRequest | None = None) -> list[InferenceEvent]:
    ctx = InferenceTurnContext(thread_id="thr_test", turn_id="turn_test")
    return [event async for event in engine.stream_turn(ctx, request or make_request())]


def text_of(events: list[InferenceEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, MessageDelta))


def reasoning_of(events: list[InferenceEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, ReasoningDelta))


def calls_of(events: list[InferenceEvent]) -> list[ToolCallEvent]:
    return [e for e in events if isinstance(e, ToolCallEvent)]
