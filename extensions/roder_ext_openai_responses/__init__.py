"""OpenAI Responses engines: the built-in ``openai`` provider and ``dialect = "responses"`` tables."""

from __future__ import annotations

from typing import Any

from roder_core.ir import AgentInferenceRequest, ModelProfile
from roder_core.kernel.distribution import HostContext
from roder_core.providers.engine import HttpEngine
from roder_core.providers.extension import BrokenProviderTable, ProviderExtension, provider_extensions
from roder_ext_openai_responses.decode import ResponsesDecoder
from roder_ext_openai_responses.encode import DIALECT, encode_request


class ResponsesEngine(HttpEngine):
    path = "/responses"

    def encode(self, request: AgentInferenceRequest, profile: ModelProfile) -> dict[str, Any]:
        effort = request.reasoning_effort or self.spec.reasoning_effort
        if not self.knows(request.model):  # a guessed output limit can exceed the server's window
            request = request.model_copy(update={"max_output_tokens": None})
        return encode_request(request, profile, effort=effort)

    def decoder(self) -> ResponsesDecoder:
        return ResponsesDecoder(self.errors)


def create(host: HostContext) -> list[ProviderExtension | BrokenProviderTable]:
    return provider_extensions(host, DIALECT, ResponsesEngine)
