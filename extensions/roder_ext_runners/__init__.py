"""Runners: where a thread's tools execute (seed 003's ``RemoteRunnerProvider``).

Three providers, one per kind a ``[runners.NAME]`` table may name: ``local`` (this machine,
the bubblewrap sandbox), ``ssh`` (a workspace on another machine, over asyncssh) and
``container`` (a Podman or Docker container with the workspace mounted). Each supplies the
file, process and network brokers of its sessions; policy, approvals, secret redaction and
environment scrubbing stay in the core, above them. See docs/runners.md.

The ssh and container providers load when a runner of their kind is first checked, probed or
opened (``LazyRunnerProvider``): a run on this machine (``roder -p`` among them) never imports them.
"""

from __future__ import annotations

import functools
import importlib

from roder_core import EXTENSION_API_VERSION, ExtensionManifest, ProvidedService, RoderExtension, __version__
from roder_core.kernel.distribution import HostContext
from roder_core.kernel.extension import CapabilityRequest
from roder_core.kernel.services import (
    RemoteRunnerProvider,
    RunnerAvailability,
    RunnerDefinition,
    RunnerOpenContext,
    RunnerSession,
    ServiceRegistrar,
)

from .local import LocalRunnerProvider

#: What ``runners/list`` says of each kind before its provider is loaded (the providers say the same).
SSH_DESCRIPTION = "a workspace on another machine over SSH (asyncssh), commands in bubblewrap when it works there"
CONTAINER_DESCRIPTION = "commands in a Podman or Docker container, the workspace mounted, no network unless granted"


class LazyRunnerProvider:
    """A runner kind whose provider (``module:attr``, in this package) is imported at first use."""

    def __init__(self, kind: str, description: str, target: str) -> None:
        self._kind = kind
        self._description = description
        self._target = target

    def id(self) -> str:
        return self._kind

    def description(self) -> str:
        return self._description

    @functools.cached_property
    def provider(self) -> RemoteRunnerProvider:
        module, _, attr = self._target.partition(":")
        made: RemoteRunnerProvider = getattr(importlib.import_module(module, __name__), attr)()
        return made

    async def availability(self) -> RunnerAvailability:
        return await self.provider.availability()

    def check(self, definition: RunnerDefinition) -> None:
        self.provider.check(definition)

    async def open(self, definition: RunnerDefinition, context: RunnerOpenContext) -> RunnerSession:
        return await self.provider.open(definition, context)


class RunnersExtension(RoderExtension):
    def manifest(self) -> ExtensionManifest:
        return ExtensionManifest(
            id="roder-ext-runners",
            name="Runners",
            version=__version__,
            api_version=EXTENSION_API_VERSION,
            description="Where tools execute: this machine, an ssh host, or a Podman/Docker container",
            provides=[
                ProvidedService.RemoteRunnerProvider("local"),
                ProvidedService.RemoteRunnerProvider("ssh"),
                ProvidedService.RemoteRunnerProvider("container"),
            ],
            required_capabilities=[CapabilityRequest("process.spawn.exec"), CapabilityRequest("network.ssh")],
        )

    def install(self, registry: ServiceRegistrar) -> None:
        registry.remote_runner_provider(LocalRunnerProvider())
        registry.remote_runner_provider(LazyRunnerProvider("ssh", SSH_DESCRIPTION, ".ssh:SshRunnerProvider"))
        registry.remote_runner_provider(
            LazyRunnerProvider("container", CONTAINER_DESCRIPTION, ".container:ContainerRunnerProvider")
        )


def create(host: HostContext) -> RunnersExtension:
    return RunnersExtension()
