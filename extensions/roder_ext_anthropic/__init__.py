"""Anthropic Messages engines: the built-in ``anthropic`` provider and ``anthropic-messages`` tables.

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
    from roder_ext_anthropic.decode import AnthropicDecoder

DIALECT = "anthropic-messages"
ANTHROPIC_VERSION = "2023-06-01"
#: The beta that lets the budget form of thinking think between tool calls.
INTERLEAVED_BETA = "interleaved-thinking-2025-05-14"


class AnthropicEngine(HttpEngine):
    path = "/messages"

    def sent_output_limit(self, profile: ModelProfile) -> int | None:
        return profile.max_output_tokens  # the Messages API requires max_tokens

    def auth_headers(self) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if self.key:
            headers["x-api-key"] = self.key.reveal()
        return headers

    def encode(self, request: AgentInferenceRequest, profile: ModelProfile) -> dict[str, Any]:
        from roder_ext_anthropic.encode import encode_request

        effort = request.reasoning_effort or self.spec.reasoning_effort
        return encode_request(request, profile, effort=effort)

    def request_headers(self, body: dict[str, Any], profile: ModelProfile) -> dict[str, str]:
        """The budget form thinks between tool calls only with the interleaved-thinking beta."""
        thinking = body.get("thinking") or {}
        if thinking.get("type") != "enabled" or not profile.interleaved_thinking or not body.get("tools"):
            return {}
        configured = self.spec.headers.get("anthropic-beta", "")
        betas = [b.strip() for b in configured.split(",") if b.strip()]
        return {"anthropic-beta": ",".join(dict.fromkeys([*betas, INTERLEAVED_BETA]))}

    def decoder(self) -> AnthropicDecoder:
        from roder_ext_anthropic.decode import AnthropicDecoder

        return AnthropicDecoder(self.errors)


def create(host: HostContext) -> list[ProviderExtension | BrokenProviderTable]:
    return provider_extensions(host, DIALECT, AnthropicEngine)
