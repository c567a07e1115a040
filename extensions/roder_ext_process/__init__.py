"""Extensions in any language: programs that speak the extension protocol over stdin and stdout.

Each ``[extensions.process.NAME]`` table of config.toml (a project's only in a trusted folder)
names a command. Roder starts it confined to the capabilities the table grants, asks for its
manifest (seed 003's, as JSON) and the services it provides, checks the manifest against the
grants, and installs one ordinary registry service per declared service: tools, hooks, context
providers, policy contributors, inference engines, status segments and palette sources.
The protocol is in docs/extension-protocol.md; SDKs for Python and TypeScript are in ``sdk/``.

The supervisor, the connection and the services load only when a process extension is declared:
a run without one (most runs, ``roder -p`` among them) does not import them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from roder_core.kernel.distribution import HostContext
from roder_core.kernel.extension import (
    EXTENSION_API_VERSION,
    CapabilityRequest,
    ExtensionManifest,
    ProvidedService,
    RoderExtension,
)
from roder_core.kernel.registry import RegistryError
from roder_core.kernel.services import ServiceRegistrar
from roder_core.settings.config import ProcessExtensionConfig

if TYPE_CHECKING:
    from roder_ext_process.supervisor import Handshake, Supervisor

log = logging.getLogger(__name__)


def manifest_from(name: str, data: dict[str, Any]) -> ExtensionManifest:
    """Seed 003's manifest from the JSON the process sent (snake_case or camelCase keys)."""
    try:
        provides = [ProvidedService.from_json(p) for p in data.get("provides", [])]
        caps = data.get("required_capabilities", data.get("requiredCapabilities", []))
        return ExtensionManifest(
            id=str(data["id"]),
            name=str(data.get("name") or data["id"]),
            version=str(data.get("version") or "0.0.0"),
            api_version=str(data.get("api_version") or data.get("apiVersion") or ""),
            description=data.get("description"),
            provides=provides,
            required_capabilities=[CapabilityRequest(str(c["id"] if isinstance(c, dict) else c)) for c in caps],
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise RegistryError(f"process extension {name}: its manifest is malformed ({exc})") from None


class ProcessExtension(RoderExtension):
    """One process extension as the registry sees it."""

    def __init__(self, name: str, supervisor: Supervisor | None, problem: str | None = None) -> None:
        self.name = name
        self.supervisor = supervisor
        self.problem = problem
        self.handshake: Handshake | None = None
        # Named so `extensions/list` can say which one failed and why, until the process says more.
        self._manifest = ExtensionManifest(id=f"process:{name}", name=name, version="0.0.0", api_version=EXTENSION_API_VERSION)
        if supervisor is None:
            return
        from roder_ext_process.connection import ExtensionCallError

        try:
            self.handshake = supervisor.handshake()
            self._manifest = manifest_from(name, self.handshake.manifest)
            supervisor.extension_id = self._manifest.id
        except (ExtensionCallError, RegistryError, OSError) as exc:
            self.problem = str(exc)
            supervisor.last_error = self.problem
            supervisor.close()

    def manifest(self) -> ExtensionManifest:
        return self._manifest

    def install(self, registry: ServiceRegistrar) -> None:
        if self.problem is not None or self.handshake is None or self.supervisor is None:
            raise RegistryError(f"process extension {self.name} did not start: {self.problem}")
        granted = set(self.supervisor.config.capabilities)
        missing = [c.id for c in self._manifest.required_capabilities if c.id not in granted]
        if missing:
            self.supervisor.close()
            raise RegistryError(
                f"process extension {self.name} requires {', '.join(missing)}, which config.toml does not grant "
                f"(add to capabilities in [extensions.process.{self.name}] to allow)"
            )
        from roder_ext_process.services import (
            ProcessContextProvider,
            ProcessEngine,
            ProcessHook,
            ProcessPaletteSource,
            ProcessPolicyContributor,
            ProcessStatusSegment,
            ProcessTool,
            ProcessToolSet,
        )

        sup, shake = self.supervisor, self.handshake
        tool_ids = [p.id for p in self._manifest.provides if p.kind == "ToolProvider"]
        if shake.tools:
            registry.tool_contributor(
                ProcessToolSet(sup, tool_ids[0] if tool_ids else self.name, [ProcessTool(sup, row) for row in shake.tools])
            )
        for row in shake.hooks:
            registry.hook(ProcessHook(sup, row))
        for row in shake.engines:
            registry.inference_engine(ProcessEngine(sup, row))
        for row in shake.context_providers:
            registry.context_provider(ProcessContextProvider(sup, str(row["id"])))
        for row in shake.policy_contributors:
            registry.policy_contributor(ProcessPolicyContributor(sup, str(row["id"])))
        for row in shake.status_segments:
            registry.status_segment(ProcessStatusSegment(sup, str(row["id"])))
        for row in shake.palette_sources:
            registry.palette_source(ProcessPaletteSource(sup, str(row["id"])))


def plugin_extensions(host: HostContext) -> dict[str, ProcessExtensionConfig | str]:
    """Enabled plugins' process extensions (``roderExtensions``), named ``plugin:NAME``: the
    command and arguments with ``${CLAUDE_PLUGIN_ROOT}`` and friends filled in as whole values
    (never through a shell); a malformed one maps to its one-line problem."""
    from roder_core.plugins.enabled import active_plugins

    found: dict[str, ProcessExtensionConfig | str] = {}
    try:
        active = active_plugins(host.paths, host.cwd, host.trusted, host.config.model_extra)
    except Exception as exc:  # a broken plugin folder must not take the other extensions down
        log.warning("plugins' process extensions not read: %s", exc)
        return found
    for plugin in active.plugins:
        variables = plugin.variables(host.cwd)

        def fill(value: object, variables: dict[str, str] = variables) -> str:
            text = str(value)
            for name, replacement in variables.items():
                text = text.replace("${" + name + "}", replacement)
            return text

        for spec in plugin.layout.process_extensions:
            name = f"{plugin.name}:{spec.name}"
            raw = spec.raw
            try:
                found[name] = ProcessExtensionConfig(
                    command=[fill(raw.get("command", "")), *(fill(a) for a in raw.get("args") or [])],
                    capabilities=[str(c) for c in raw.get("capabilities") or []],
                    env={**plugin.process_env(host.cwd), **{str(k): fill(v) for k, v in (raw.get("env") or {}).items()}},
                )
            except ValueError as exc:
                found[name] = f"plugin {plugin.id}: extension {spec.name} is malformed ({exc})"
    return found


def create(host: HostContext) -> list[RoderExtension]:
    declared: dict[str, ProcessExtensionConfig | str] = {**host.config.extensions.process, **plugin_extensions(host)}
    if not declared:
        return []
    from roder_core.brokers.own_folders import OwnFolders
    from roder_ext_process.supervisor import Supervisor, check_capabilities, confine

    extensions: list[RoderExtension] = []
    hidden = OwnFolders.of(host.paths, host.env).existing()
    for name, config in declared.items():
        if isinstance(config, str):
            extensions.append(ProcessExtension(name, None, config))
            continue
        if not config.enabled:
            continue
        try:
            check_capabilities(name, config.capabilities)
        except ValueError as exc:
            extensions.append(ProcessExtension(name, None, str(exc)))
            continue
        supervisor = Supervisor(name, config, host.cwd, confine(name, config, host.cwd, host.env, hidden))
        extensions.append(ProcessExtension(name, supervisor))
    return extensions


__all__ = ["ProcessExtension", "ProcessExtensionConfig", "create"]
