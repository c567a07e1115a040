"""Which engine serves a provider, and what a model can take: profiles with overrides and the
windows learned from servers' refusals."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from roder_core.errors import InferenceError, UnknownProviderError
from roder_core.ir import ModelProfile
from roder_core.kernel.services import InferenceEngine
from roder_core.settings.config import RoderConfig

if TYPE_CHECKING:
    from roder_core.kernel.registry import ExtensionRegistry
    from roder_core.providers.limits import LearnedLimits
    from roder_core.providers.selection import DefaultChoice

log = logging.getLogger(__name__)


class ModelDirectory:
    """The installed inference engines and the model profiles a turn plans with."""

    def __init__(self, registry: ExtensionRegistry, config: RoderConfig, learned_limits: LearnedLimits) -> None:
        self.registry = registry
        self.config = config
        self.learned_limits = learned_limits
        #: The choice ``default_provider`` made, with its reason (None until asked).
        self.default_choice: DefaultChoice | None = None

    def default_provider(self) -> str:
        """config.toml's provider, else the first with a key, else a local server, else mock
        (roder_core.providers.selection says why)."""
        from roder_core.providers.selection import choose_default_provider

        self.default_choice = choose_default_provider(self.registry.inference_engines, self.config)
        return self.default_choice.provider

    def engine(self, provider: str) -> InferenceEngine:
        engine = self.registry.inference_engine(provider)
        if engine is None:
            known = ", ".join(sorted(e.id() for e in self.registry.inference_engines)) or "none"
            raise UnknownProviderError(f"unknown provider {provider!r} (installed: {known})")
        return engine

    def model_profile(self, provider: str, model: str) -> ModelProfile:
        profile = self.engine(provider).model_profile(model)
        overrides = self.config.models_override
        override = overrides.get(f"{provider}/{model}") or overrides.get(model)
        profile = profile.model_copy(update=override) if override else profile
        learned = self.learned_limits.get(provider, model)
        if learned is not None and learned < profile.context_window:
            # The server's real window, learned from its rejections (see providers/limits.py).
            profile = profile.model_copy(
                update={"context_window": learned, "max_output_tokens": min(profile.max_output_tokens, learned // 4)}
            )
        return profile

    def learn_context_limit(self, provider: str, model: str, error: InferenceError, prompt_tokens: int) -> bool:
        """Record the window a context overflow revealed; True when the assumed window shrank."""
        from roder_core.providers.limits import limit_after_rejection

        window = limit_after_rejection(error.context_limit, prompt_tokens, self.model_profile(provider, model).context_window)
        if window is None:
            return False
        source = "stated by the server" if error.context_limit else f"a {prompt_tokens}-token prompt was refused"
        log.warning("%s/%s: context window is %d tokens (%s); recorded", provider, model, window, source)
        self.learned_limits.record(provider, model, window, source)
        return True
