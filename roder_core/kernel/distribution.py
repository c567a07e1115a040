"""Composes the default registry: discovered extensions, the capability profile, project trust.

Built-in extensions are discovered through the ``roder.extensions`` entry-point group exactly
like third-party ones. Each entry point names a factory ``create(host) -> RoderExtension | list |
None``. A trusted project may add ``.roder/extensions/*.py`` files exposing the same ``create``;
an untrusted project's files are never imported.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roder_core.kernel.extension import CapabilityGrant, RoderExtension
from roder_core.kernel.extension_index import ExtensionIndex
from roder_core.kernel.profiles import PROFILES, CapabilityProfile
from roder_core.kernel.registry import ExtensionRegistry, ExtensionRegistryBuilder, RegistryError
from roder_core.policy.trust import TrustStore
from roder_core.settings.config import RoderConfig, load_config
from roder_core.settings.paths import RoderPaths

if TYPE_CHECKING:
    from roder_core.brokers.secrets import SecretRedactor

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "roder.extensions"
#: How a discovered extension's source is named in warnings ("entry point mcp").
ENTRY_POINT_SOURCE = "entry point "

#: What a registry built without a profile (an embedder's own builder) lets plugins add: nothing.
_NO_PROFILE = CapabilityProfile("none", "no profile was given", deny={"*": "the registry was built without a capability profile"})

ExtensionFactory = Callable[["HostContext"], RoderExtension | Iterable[RoderExtension] | None]


@dataclass
class HostContext:
    """What extension factories may read to configure themselves."""

    cwd: Path
    paths: RoderPaths
    config: RoderConfig
    env: Mapping[str, str]
    trusted: bool = False
    profile: CapabilityProfile = field(default_factory=lambda: PROFILES["developer"])
    interactive: bool = True
    #: The data folder is thrown away after this run (a batch rollout's): stores keep no
    #: indexes there, since nothing will ever list it.
    scratch_data: bool = False

    @cached_property
    def secrets(self) -> SecretRedactor:
        """The run's known secrets (secret variables, configured providers' keys, stored keys,
        and what the embedder adds, such as the app server's token): the runtime redacts with
        this very object, and every process an extension starts (a process extension, a hook, a
        language server) gets its environment scrubbed by it (``brokers.secrets.scrubbed_env``)."""
        from roder_core.brokers.secrets import runtime_redactor

        return runtime_redactor(self.env, self.config)


@dataclass(frozen=True)
class SkippedExtension:
    source: str
    reason: str
    #: Skipped because the chosen profile denies a capability it needs (``--profile offline``
    #: drops the network providers): what the user asked for, so not a warning.
    expected: bool = False

    def describe(self) -> str:
        """One line for the user; an unknown key in a config table says how TOML got it there."""
        line = f"extension {self.source} not loaded: {self.reason}"
        if "unknown key" in self.reason and "config.toml [" in self.reason:
            line += " (TOML puts every key written after a [table] header into that table: move top-level keys above it)"
        return line


@dataclass
class Distribution:
    registry: ExtensionRegistry
    host: HostContext
    skipped: list[SkippedExtension]

    @property
    def warnings(self) -> list[str]:
        """One line per unknown config key outside the security tables (those stop Roder:
        ``settings.config.key_problems``) and per extension that did not load for a reason the
        user did not choose."""
        return [*self.host.config.problems, *(s.describe() for s in self.skipped if not s.expected)]


def make_host(
    cwd: Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    trust: bool | None = None,
    profile: str = "developer",
    interactive: bool = True,
    data_dir: Path | None = None,
    scratch_data: bool = False,
) -> HostContext:
    """Resolve paths, trust and config for a working directory.

    ``trust=None`` means "as the user decided before"; headless callers pass ``trust=False``
    unless the user gave ``--trust``, so a headless run never trusts a folder by itself.
    ``data_dir`` keeps this run's data (threads, audit log) apart from the user's, as batch
    rollouts do, while config still comes from the usual place; ``scratch_data`` says that
    folder is removed after the run (``HostContext.scratch_data``).
    """
    env = dict(os.environ) if env is None else dict(env)
    cwd = (cwd or Path.cwd()).resolve()
    paths = RoderPaths.from_env(env)
    if data_dir is not None:
        paths = paths._replace(data_dir=data_dir)
    trusted = TrustStore(paths).is_trusted(cwd) if trust is None else trust
    if profile not in PROFILES:
        raise RegistryError(f"unknown capability profile {profile!r}; choose one of {', '.join(PROFILES)}")
    config = load_config(paths, cwd, trusted)
    return HostContext(cwd, paths, config, env, trusted, PROFILES[profile], interactive, scratch_data)


def discovered_factories(
    paths: RoderPaths | None = None, *, kinds: Collection[str] | None = None
) -> list[tuple[str, ExtensionFactory]]:
    """The installed extensions' factories, listed from the extension index (see
    ``kernel.extension_index``); with ``kinds``, entry points known to provide none of those
    service kinds are not imported."""
    index = ExtensionIndex.load(paths or RoderPaths.from_env(), ENTRY_POINT_GROUP)
    return [(source, factory) for source, factory, _name in _indexed_factories(index, kinds)]


def _indexed_factories(index: ExtensionIndex, kinds: Collection[str] | None) -> list[tuple[str, ExtensionFactory, str]]:
    from importlib.metadata import EntryPoint

    found: list[tuple[str, ExtensionFactory, str]] = []
    for entry in index.entries:
        if kinds is not None and not entry.may_provide(kinds):
            continue
        source = f"{ENTRY_POINT_SOURCE}{entry.name}"
        try:
            found.append((source, EntryPoint(entry.name, entry.value, ENTRY_POINT_GROUP).load(), entry.name))
        except Exception as exc:
            found.append((source, _raiser(exc), entry.name))
    return found


def project_factories(host: HostContext) -> list[tuple[str, ExtensionFactory]]:
    if not host.trusted:
        return []
    folder = host.cwd / ".roder" / "extensions"
    found: list[tuple[str, ExtensionFactory]] = []
    for path in sorted(folder.glob("*.py")) if folder.is_dir() else []:
        name = f"roder_project_ext_{path.stem}"
        try:
            spec = importlib.util.spec_from_file_location(name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            found.append((str(path), module.create))
        except Exception as exc:
            found.append((str(path), _raiser(exc)))
    return found


def _raiser(exc: Exception) -> ExtensionFactory:
    def factory(_host: HostContext) -> None:
        raise exc

    return factory


def _as_list(value: Any) -> list[RoderExtension]:
    if value is None:
        return []
    if isinstance(value, RoderExtension):
        return [value]
    return list(value)


def build_distribution(
    host: HostContext,
    factories: Iterable[tuple[str, ExtensionFactory]] | None = None,
    *,
    kinds: Collection[str] | None = None,
) -> Distribution:
    """Install every extension the profile allows, grant what it grants, freeze the registry.

    Without ``factories``, the installed entry points (from the extension index) and, in a
    trusted folder, the project's extensions; ``kinds`` leaves out entry points the index knows
    provide none of those service kinds (a client that needs only status segments). What each
    entry point provided is recorded in the index.
    A broken third-party extension is skipped and reported rather than taking Roder down.
    """
    index: ExtensionIndex | None = None
    if factories is None:
        index = ExtensionIndex.load(host.paths, ENTRY_POINT_GROUP)
        factories = [(source, factory) for source, factory, _ in _indexed_factories(index, kinds)]
        factories += project_factories(host)
    builder = ExtensionRegistryBuilder()
    skipped: list[SkippedExtension] = []
    observed: dict[str, frozenset[str]] = {}
    admitted: list[tuple[str, RoderExtension]] = []
    for source, factory in factories:
        try:
            extensions = _as_list(factory(host))
        except Exception as exc:
            skipped.append(SkippedExtension(source, f"failed to load: {exc}"))
            continue
        for extension in extensions:
            admitted.append((source, extension))
            if source.startswith(ENTRY_POINT_SOURCE):
                name = source.removeprefix(ENTRY_POINT_SOURCE)
                kinds_seen = {service.kind for service in extension.manifest().provides}
                observed[name] = observed.get(name, frozenset()) | kinds_seen
            admit(builder, host.profile, source, extension, skipped)
    for extension in [e for _, e in admitted if e.foreign_tools]:  # against every other, whatever the order
        refuse_clash(builder, extension.manifest().id, skipped)
    for entry in skipped:  # callers show the unexpected ones once (see Distribution.warnings)
        log.debug("%s", entry.describe())
    if index is not None:
        index.record_provides(observed)
    return Distribution(builder.build(profile=host.profile), host, skipped)


def admit(
    builder: ExtensionRegistryBuilder,
    profile: CapabilityProfile,
    source: str,
    extension: RoderExtension,
    skipped: list[SkippedExtension],
    *,
    running: bool = False,
) -> None:
    """The one door into a registry, at start and when plugins change while Roder runs
    (``rebuild``): an extension needing a capability the profile denies is skipped, one the
    registry refuses is skipped with the reason, and what it requires is granted as the profile
    allows. ``running``: Roder runs already, so a tool clash skips the extension here rather
    than failing the build of the registry in use."""
    manifest = extension.manifest()
    denied = [(cap.id, reason) for cap in manifest.required_capabilities if (reason := profile.denial_reason(cap.id)) is not None]
    if denied:
        denied_id, reason = denied[0]
        skipped.append(SkippedExtension(manifest.id, f"profile {profile.name} denies {denied_id}: {reason}", expected=True))
        return
    try:
        builder.install(extension)
    except RegistryError as exc:
        skipped.append(SkippedExtension(manifest.id or source, str(exc)))
        return
    if running and not refuse_clash(builder, manifest.id, skipped):
        return
    for cap in manifest.required_capabilities:
        if profile.grants(cap.id):
            builder.grant_capability(manifest.id, CapabilityGrant(cap.id))


def refuse_clash(builder: ExtensionRegistryBuilder, extension_id: str, skipped: list[SkippedExtension]) -> bool:
    """Rule 6 for one installed extension: a tool of it named like another extension's takes
    it out again, with the reason among ``skipped`` (False), so the registry still builds."""
    try:
        builder.refuse_tool_clash(extension_id)
    except RegistryError as exc:
        skipped.append(SkippedExtension(extension_id, str(exc)))
        return False
    return True


def rebuild(
    registry: ExtensionRegistry, remove: set[str], add: Iterable[RoderExtension]
) -> tuple[ExtensionRegistry, list[SkippedExtension]]:
    """``registry`` without the extensions ``remove`` names and with ``add`` admitted as at
    start, under the profile it was built with (one built without a profile grants nothing)."""
    builder = ExtensionRegistryBuilder.seeded(registry, remove)
    profile = registry.profile or _NO_PROFILE
    skipped: list[SkippedExtension] = []
    for extension in add:
        admit(builder, profile, "plugins", extension, skipped, running=True)
    for entry in skipped:
        log.debug("%s", entry.describe())
    return builder.build(profile=registry.profile), skipped
