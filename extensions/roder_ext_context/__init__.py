"""``roder-ext-context``: the context providers every session starts with.

- ``base-instructions``: who the agent is and how to use the tools well (priority 0);
- ``project-instructions``: AGENTS.md / CLAUDE.md from the repository root down to the working
  directory, after the user's global AGENTS.md in the config directory (priority 20);
- ``environment``: working directory, OS, shell, date, git branch and dirty state (priority 60).

Blocks are ordered by priority (stable text first, so provider prompt caches hold); the budgeting
planner (roder_core.turn.planner) fits them and the history into the model's window.
"""

from __future__ import annotations

from roder_core import (
    EXTENSION_API_VERSION,
    CapabilityRequest,
    ContextProvider,
    ExtensionManifest,
    ProvidedService,
    RoderExtension,
    __version__,
)
from roder_core.kernel.distribution import HostContext
from roder_core.kernel.services import ServiceRegistrar

from .base import BaseInstructions
from .environment import Environment
from .project import ProjectInstructions


class ContextExtension(RoderExtension):
    def __init__(self, host: HostContext) -> None:
        self.providers: list[ContextProvider] = [
            BaseInstructions(),
            ProjectInstructions(host.config, host.paths, host.env),
            Environment(),
        ]

    def manifest(self) -> ExtensionManifest:
        return ExtensionManifest(
            id="roder-ext-context",
            name="Context providers",
            version=__version__,
            api_version=EXTENSION_API_VERSION,
            description="Base instructions, AGENTS.md/CLAUDE.md project instructions, environment",
            provides=[ProvidedService.ContextProvider(p.id()) for p in self.providers],
            required_capabilities=[CapabilityRequest("fs.read.workspace"), CapabilityRequest("process.spawn.git")],
        )

    def install(self, registry: ServiceRegistrar) -> None:
        for provider in self.providers:
            registry.context_provider(provider)


def create(host: HostContext) -> ContextExtension:
    return ContextExtension(host)
