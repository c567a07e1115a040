"""Chat Completions engines: OpenRouter, Ollama and every ``dialect = "chat-completions"`` table.

One dialect serves OpenAI, OpenRouter, Ollama, vLLM, LM Studio, llama.cpp server, Groq, DeepSeek
and Gemini's OpenAI endpoint; their differences are ``Quirks`` in the provider catalog.

The request encoder and the stream decoder load with the first request: a run whose provider
speaks another dialect never imports them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roder_core.ir import AgentInferenceRequest, ModelProfile
from roder_core.kernel.distribution import HostContext
from roder_core.providers.engine import HttpEngine
from roder_core.providers.extension import BrokenProviderTable, ProviderExtension, provider_extensions

if TYPE_CHECKING:
    from roder_ext_chat_completions.decode import ChatDecoder

DIALECT = "chat-completions"


class ChatCompletionsEngine(HttpEngine):
    path = "/chat/completions"

    def encode(self, request: AgentInferenceRequest, profile: ModelProfile) -> dict[str, Any]:
        from roder_ext_chat_completions.encode import encode_request

        effort = (request.reasoning_effort if profile.reasoning else None) or self.spec.reasoning_effort
        # Unknown models get no output limit: a guessed one can exceed a local server's window.
        limit = request.max_output_tokens if self.knows(request.model) else None
        return encode_request(request, self.spec.quirks, effort=effort, max_tokens=limit)

    def decoder(self) -> ChatDecoder:
        from roder_ext_chat_completions.decode import ChatDecoder

        return ChatDecoder(self.errors)


def create(host: HostContext) -> list[ProviderExtension | BrokenProviderTable]:
    return provider_extensions(host, DIALECT, ChatCompletionsEngine)
