"""Runners: where a thread's tools execute (seed 003's ``RemoteRunnerProvider``).

Three providers, one per kind a ``[runners.NAME]`` table may name: ``local`` (this machine,
the bubblewrap sandbox), ``ssh`` (a workspace on another machine, over asyncssh) and
``container`` (a Podman or Docker container with the workspace mounted). Each supplies the
file, process and network brokers of its sessions; policy, approvals, secret redaction and
environment scrubbing stay in the core, above them. See docs/runners.md.
"""

from __future__ import annotations

from roder_core import EXTENSION_API_VERSION, ExtensionManifest, ProvidedService, RoderExtension, __version__
from roder_core.kernel.distribution import HostContext
from roder_core.kernel.extension import CapabilityRequest
from roder_core.kernel.services import ServiceRegistrar

from .container import ContainerRunnerProvider
from .local import LocalRunnerProvider
from .ssh import SshRunnerProvider


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
        registry.remote_runner_provider(SshRunnerProvider())
        registry.remote_runner_provider(ContainerRunnerProvider())


def create(host: HostContext) -> RunnersExtension:
    return RunnersExtension()
