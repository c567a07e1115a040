"""OpenAI Responses engines: the built-in ``openai`` provider and ``dialect = "responses"`` tables.

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
    from roder_ext_openai_responses.decode import ResponsesDecoder

DIALECT = "responses"


class ResponsesEngine(HttpEngine):
    path = "/responses"

    def encode(self, request: AgentInferenceRequest, profile: ModelProfile) -> dict[str, Any]:
        from roder_ext_openai_responses.encode import encode_request

        effort = request.reasoning_effort or self.spec.reasoning_effort
        if not self.knows(request.model):  # a guessed output limit can exceed the server's window
            request = request.model_copy(update={"max_output_tokens": None})
        return encode_request(request, profile, effort=effort)

    def decoder(self) -> ResponsesDecoder:
        from roder_ext_openai_responses.decode import ResponsesDecoder

        return ResponsesDecoder(self.errors)


def create(host: HostContext) -> list[ProviderExtension | BrokenProviderTable]:
    return provider_extensions(host, DIALECT, ResponsesEngine)
