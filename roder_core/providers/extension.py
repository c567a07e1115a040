"""One extension per configured provider, so capabilities are per endpoint.

Each provider becomes its own extension (``roder-ext-provider-<name>``) declaring exactly what it
reaches: ``network.api.<host>`` (or ``network.loopback``) and ``secret.read.<ENV>``. A capability
profile can then deny the cloud providers (the ``offline`` profile) and keep a local server.
"""

from __future__ import annotations

from typing import Any

from roder_core import __version__
from roder_core.kernel.extension import (
    EXTENSION_API_VERSION,
    CapabilityRequest,
    ExtensionManifest,
    ProvidedService,
    RoderExtension,
)
from roder_core.kernel.registry import RegistryError
from roder_core.kernel.services import ServiceRegistrar
from roder_core.providers.catalog import providers_for
from roder_core.providers.engine import HttpEngine
from roder_core.settings.credentials import CredentialStore


class ProviderExtension(RoderExtension):
    def __init__(self, engine: HttpEngine) -> None:
        self.engine = engine

    def manifest(self) -> ExtensionManifest:
        spec = self.engine.spec
        return ExtensionManifest(
            id=f"roder-ext-provider-{spec.name}",
            name=f"{spec.title} ({spec.dialect})",
            version=__version__,
            api_version=EXTENSION_API_VERSION,
            description=f"{spec.description or spec.dialect} at {spec.base_url}",
            provides=[ProvidedService.InferenceEngine(spec.name)],
            required_capabilities=[CapabilityRequest(cap) for cap in spec.capabilities()],
        )

    def install(self, registry: ServiceRegistrar) -> None:
        registry.inference_engine(self.engine)


class BrokenProviderTable(RoderExtension):
    """Stands for a provider whose ``[providers.NAME]`` table is wrong: installing it fails with
    the table's error, so the distribution reports that provider as not loaded while every other
    provider loads."""

    def __init__(self, name: str, problem: str) -> None:
        self.name = name
        self.problem = problem

    def manifest(self) -> ExtensionManifest:
        return ExtensionManifest(
            id=f"roder-ext-provider-{self.name}",
            name=self.name,
            version="0.1.0",
            api_version=EXTENSION_API_VERSION,
            description=self.problem,
        )

    def install(self, registry: Any) -> None:
        raise RegistryError(self.problem)


def provider_extensions(host: Any, dialect: str, engine_class: type[HttpEngine]) -> list[ProviderExtension | BrokenProviderTable]:
    """The extensions for every provider of ``dialect`` in the host's config and environment;
    their keys come from the environment, else from the user's stored credentials. A broken
    table becomes a ``BrokenProviderTable`` (reported, and no other provider lost)."""
    credentials = CredentialStore.for_env(host.env)
    broken: dict[str, str] = {}
    extensions: list[ProviderExtension | BrokenProviderTable] = [
        ProviderExtension(engine_class(spec, host.env, host.config.models_override, credentials=credentials))
        for spec in providers_for(host.config, host.env, dialect, broken)
    ]
    extensions += [BrokenProviderTable(name, problem) for name, problem in broken.items()]
    return extensions
