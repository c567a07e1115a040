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
from pathlib import Path
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
    from roder_core.plugins.enabled import ActivePlugins
    from roder_ext_process.supervisor import Handshake, PendingHandshake, Supervisor

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

    foreign_tools = True  # the process names its tools

    def __init__(self, name: str, supervisor: Supervisor | None, problem: str | None = None) -> None:
        """Starts the process and sends ``initialize``; ``settle`` reads the answer."""
        self.name = name
        self.supervisor = supervisor
        self.problem = problem
        self.handshake: Handshake | None = None
        self._pending: PendingHandshake | None = None
        # Named so `extensions/list` can say which one failed and why, until the process says more.
        self._manifest = ExtensionManifest(id=f"process:{name}", name=name, version="0.0.0", api_version=EXTENSION_API_VERSION)
        if supervisor is None:
            return
        try:
            self._pending = supervisor.begin_handshake()
        except OSError as exc:
            self._fail(str(exc))

    def settle(self) -> ProcessExtension:
        """Wait for the manifest (until the extension's ``startup_timeout`` from its start); a
        process that did not answer, or answered wrong, is stopped and carries the reason."""
        from roder_ext_process.connection import ExtensionCallError

        pending, self._pending = self._pending, None
        if pending is None or self.supervisor is None:
            return self
        try:
            self.handshake = pending.result()
            self._manifest = manifest_from(self.name, self.handshake.manifest)
            self.supervisor.extension_id = self._manifest.id
        except (ExtensionCallError, RegistryError, OSError) as exc:
            self._fail(str(exc))
        return self

    def _fail(self, problem: str) -> None:
        assert self.supervisor is not None
        self.problem = problem
        self.supervisor.last_error = problem
        self.supervisor.close()

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


def plugin_extensions(host: HostContext, active: ActivePlugins) -> dict[str, ProcessExtensionConfig | str]:
    """Enabled plugins' process extensions (``roderExtensions``), named ``plugin:NAME``: the
    command and arguments with ``${CLAUDE_PLUGIN_ROOT}`` and friends filled in as whole values
    (never through a shell); a malformed one maps to its one-line problem."""
    found: dict[str, ProcessExtensionConfig | str] = {}
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


def _started(name: str, config: ProcessExtensionConfig | str, host: HostContext, hidden: list[Path]) -> ProcessExtension | None:
    """One declared process extension, started and asked for its manifest (None when disabled);
    one that cannot start carries its problem, which the registry reports when it refuses it."""
    if isinstance(config, str):
        return ProcessExtension(name, None, config)
    if not config.enabled:
        return None
    from roder_ext_process.supervisor import Supervisor, check_capabilities, confine

    try:
        check_capabilities(name, config.capabilities)
    except ValueError as exc:
        return ProcessExtension(name, None, str(exc))
    return ProcessExtension(
        name,
        Supervisor(name, config, host.cwd, confine(name, config, host.cwd, host.env, host.secrets, hidden), redact=host.secrets),
    )


class PluginProcessSource(RoderExtension):
    """Starts the process extensions of the enabled plugins, at start and again after each plugin
    change (``plugins.sources.PluginExtensionSource``): a new one is started, one whose plugin
    was disabled or removed is stopped once no turn uses it, an unchanged one keeps running."""

    plugin_parts = frozenset({"process_extensions"})

    def __init__(self, host: HostContext) -> None:
        self.host = host
        self.current: list[RoderExtension] = []
        self._configs: dict[str, ProcessExtensionConfig | str] = {}

    def manifest(self) -> ExtensionManifest:
        return ExtensionManifest(
            id="roder-ext-plugin-processes",
            name="Plugins' process extensions",
            version="0.1.0",
            api_version=EXTENSION_API_VERSION,
            description="Starts the process extensions of the enabled plugins, again after each plugin change",
        )

    def install(self, registry: ServiceRegistrar) -> None:
        """Its extensions are installed beside it (``plugin_extensions``)."""

    def refused(self, extension: RoderExtension, reason: str) -> None:
        """Its process stops; it is started again only when its plugin changes."""
        if isinstance(extension, ProcessExtension):
            extension.problem = extension.problem or reason
            if extension.supervisor is not None:
                extension.supervisor.close()

    def hidden_folders(self) -> list[Path]:
        from roder_core.brokers.own_folders import OwnFolders

        return OwnFolders.of(self.host.paths, self.host.env).existing()

    def plugin_extensions(self, active: ActivePlugins) -> list[RoderExtension]:
        before = {e.name: e for e in self.current if isinstance(e, ProcessExtension)}
        declared = plugin_extensions(self.host, active)
        made: list[RoderExtension] = []
        for name, config in declared.items():
            old = before.get(name)
            if old is not None and old.problem is None and self._configs.get(name) == config:
                made.append(old)
                continue
            if (started := _started(name, config, self.host, self.hidden_folders())) is not None:
                made.append(started)
        settled = [e.settle() if isinstance(e, ProcessExtension) else e for e in made]
        self.current, self._configs = settled, declared
        return settled


def create(host: HostContext) -> list[RoderExtension]:
    """The ``[extensions.process.*]`` of config.toml, and the plugins' ones through
    ``PluginProcessSource`` (which starts them again when plugins change). The supervisor and
    its parts are imported only when one is declared."""
    from roder_core.plugins.enabled import ActivePlugins, active_plugins

    source = PluginProcessSource(host)
    try:
        active = active_plugins(host.paths, host.cwd, host.trusted, host.config.model_extra)
    except Exception as exc:  # a broken plugin folder must not take the other extensions down
        log.warning("plugins' process extensions not read: %s", exc)
        active = ActivePlugins()
    declared = host.config.extensions.process
    hidden = source.hidden_folders() if declared else []
    # Every process is started before any answer is waited for: one that hangs in initialize
    # costs start-up its own startup_timeout at most, whatever the others do.
    configured = [e for name, config in declared.items() if (e := _started(name, config, host, hidden)) is not None]
    from_plugins = source.plugin_extensions(active)
    return [*(e.settle() for e in configured), source, *from_plugins]


__all__ = ["ProcessExtension", "ProcessExtensionConfig", "create"]
