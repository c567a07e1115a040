"""The ``mock`` provider: a deterministic, offline inference engine.

Without a script it answers every prompt with a short, predictable reply streamed in small
deltas. With ``RODER_MOCK_SCRIPT=/path/script.json`` it plays a script, one step per model call
and per thread, so tests and demos drive the whole loop (tool calls included) without a network::

    {"steps": [
      {"text": "Let me look.", "tool_calls": [{"name": "bash", "arguments": {"command": "ls"}}]},
      {"reasoning": "The listing shows ...", "text": "There are two files."}
    ]}

A step may also hold ``usage`` (token counts), ``delay_ms`` between deltas, ``chunk_size``,
``stop_reason`` and ``error`` (``{"message": ..., "kind": ...}``) to exercise failures.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from roder_core import (
    EXTENSION_API_VERSION,
    ExtensionManifest,
    InferenceProviderMetadata,
    InferenceTurnContext,
    ProvidedService,
    RoderExtension,
    __version__,
)
from roder_core.errors import InferenceError
from roder_core.ir import (
    AgentInferenceRequest,
    CompletedEvent,
    InferenceEvent,
    Message,
    MessageDelta,
    ModelProfile,
    ReasoningDelta,
    TextPart,
    ToolCallEvent,
    Usage,
    UsageEvent,
)
from roder_core.kernel.distribution import HostContext
from roder_core.kernel.services import ServiceRegistrar
from roder_core.turn.context import estimate_tokens, is_turn_context
from roder_core.turn.tokens import CHARS_PER_TOKEN

MOCK_MODELS = ("mock", "mock-large")


class ScriptError(ValueError):
    pass


def load_script(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ScriptError(f"RODER_MOCK_SCRIPT {path}: {exc}") from exc
    steps = data.get("steps") if isinstance(data, dict) else data
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        raise ScriptError(f'RODER_MOCK_SCRIPT {path}: expected a list of steps or {{"steps": [...]}}')
    return steps


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] if text else []


class MockEngine:
    def __init__(self, script: list[dict[str, Any]] | None = None) -> None:
        self._script = script
        self._positions: dict[str, int] = {}
        #: The encoded length of each message sent, by identity, with a weak reference to it (the
        #: entry goes with the message): a thread's earlier messages are the same objects at
        #: every call (the context assembler reuses them), so each is encoded once, as a wire
        #: encoder caching its messages would; a request's prompt count no longer grows in cost
        #: with the thread.
        self._encoded: dict[int, tuple[weakref.ref[Message], int]] = {}

    def _encoded_length(self, message: Message) -> int:
        key = id(message)
        hit = self._encoded.get(key)
        if hit is None or hit[0]() is not message:
            gone = weakref.ref(message, lambda _gone: self._encoded.pop(key, None))
            hit = self._encoded[key] = (gone, len(message.model_dump_json()))
        return hit[1]

    def id(self) -> str:
        return "mock"

    def metadata(self) -> InferenceProviderMetadata:
        return InferenceProviderMetadata(
            name="Mock (offline)",
            auth_type="none",
            auth_configured=True,
            sort_order=1000,
            description="Deterministic offline model for demos and tests",
            dialect="mock",
        )

    def default_model(self) -> str:
        return "mock"

    def model_profile(self, model: str) -> ModelProfile:
        window = 1_000_000 if model == "mock-large" else 128_000
        return ModelProfile(
            id=model,
            provider="mock",
            context_window=window,
            max_output_tokens=8_192,
            reasoning=True,
            parallel_tools=True,
            images=True,
        )

    async def list_models(self) -> list[ModelProfile]:
        return [self.model_profile(m) for m in MOCK_MODELS]

    def _next_step(self, ctx: InferenceTurnContext, request: AgentInferenceRequest) -> dict[str, Any]:
        if self._script is None:
            last = next((m for m in reversed(request.messages) if m.role == "user"), None)
            # The user's own words: not the turn context Roder records before them.
            last_user = (
                "".join(p.text for p in last.parts if isinstance(p, TextPart) and not is_turn_context(p))
                if last is not None
                else ""
            )
            first_line = last_user.strip().splitlines()[0] if last_user.strip() else ""
            words = len(last_user.split())
            return {
                "text": f"Mock reply: I received {words} {'word' if words == 1 else 'words'}, starting with "
                f'"{first_line[:120]}". Configure a real provider to get real answers.'
            }
        position = self._positions.get(ctx.thread_id, 0)
        self._positions[ctx.thread_id] = position + 1
        if position < len(self._script):
            return self._script[position]
        return {"text": "(mock script finished)"}

    async def stream_turn(self, ctx: InferenceTurnContext, request: AgentInferenceRequest) -> AsyncIterator[InferenceEvent]:
        step = self._next_step(ctx, request)
        delay = float(step.get("delay_ms", 0)) / 1000
        size = int(step.get("chunk_size", 12))
        if "error" in step:
            err = step["error"]
            raise InferenceError(err.get("message", "mock failure"), err.get("kind", "provider"))
        for piece in _chunks(step.get("reasoning", ""), size):
            yield ReasoningDelta(text=piece)
            if delay:
                await asyncio.sleep(delay)
        for piece in _chunks(step.get("text", ""), size):
            yield MessageDelta(text=piece)
            await asyncio.sleep(delay)  # always yield control, as a network stream would
        calls = step.get("tool_calls", [])
        for index, call in enumerate(calls):
            yield ToolCallEvent(
                call_id=call.get("id") or f"call_{ctx.turn_id[-6:]}_{self._positions.get(ctx.thread_id, 0)}_{index}",
                name=call["name"],
                arguments=call.get("arguments", {}),
            )
        characters = len(request.system) + sum(map(self._encoded_length, request.messages))
        prompt_tokens = (characters + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN  # estimate_tokens of it all
        usage = (
            Usage(**step["usage"])
            if "usage" in step
            else Usage(
                input_tokens=prompt_tokens,
                output_tokens=estimate_tokens(step.get("text", "") + step.get("reasoning", "")) + 10 * len(calls),
            )
        )
        yield UsageEvent(usage=usage)
        yield CompletedEvent(stop_reason=step.get("stop_reason", "tool_use" if calls else "end_turn"))


class MockProviderExtension(RoderExtension):
    def __init__(self, script: list[dict[str, Any]] | None = None) -> None:
        self.engine = MockEngine(script)

    def manifest(self) -> ExtensionManifest:
        return ExtensionManifest(
            id="roder-ext-mock",
            name="Mock provider",
            version=__version__,
            api_version=EXTENSION_API_VERSION,
            description="Deterministic offline inference engine (scriptable with RODER_MOCK_SCRIPT)",
            provides=[ProvidedService.InferenceEngine("mock")],
            required_capabilities=[],
        )

    def install(self, registry: ServiceRegistrar) -> None:
        registry.inference_engine(self.engine)


def create(host: HostContext) -> MockProviderExtension:
    script_path = host.env.get("RODER_MOCK_SCRIPT")
    return MockProviderExtension(load_script(Path(script_path)) if script_path else None)
