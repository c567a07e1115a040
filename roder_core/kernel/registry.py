"""ExtensionRegistryBuilder and the immutable ExtensionRegistry (seed 003 "Validation rules").

The builder enforces, each with its own error message:
1. extension ids are non-empty and unique;
2. the manifest api_version is in the supported range;
3. no two manifests declare the same ProvidedService;
4. every declared service has a matching installed implementation, and nothing is installed
   that the manifest did not declare;
5. no two installed implementations expose the same service id;
6. tool contributors register their tools without duplicate names or invalid specs;
7. required capabilities are not denied by the host profile.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Generic, Protocol, TypeVar, cast, overload

from roder_core.kernel.extension import (
    SUPPORTED_API_PREFIX,
    CapabilityDenial,
    CapabilityGrant,
    CapabilityStatus,
    ExtensionManifest,
    ProcessState,
    ProvidedService,
    RoderExtension,
    SupervisedService,
)
from roder_core.kernel.profiles import CapabilityProfile
from roder_core.kernel.services import (
    CheckpointStore,
    ContextPlanner,
    ContextProvider,
    EventSink,
    Hook,
    InferenceEngine,
    MemoryStore,
    MemoryStoreFactory,
    PaletteSource,
    PolicyContributor,
    RemoteRunnerProvider,
    StatusSegment,
    SubagentDispatcher,
    TaskExecutor,
    ThreadStore,
    ToolContributor,
)
from roder_core.kernel.tools import ToolRegistry, ToolSpecError

S = TypeVar("S")


@dataclass(frozen=True)
class ServiceKind(Generic[S]):
    """A seed-003 service kind (its manifest name) tied to the protocol its implementations
    follow, so registration checks the implementation and lookup returns the protocol type."""

    name: str


INFERENCE_ENGINE: ServiceKind[InferenceEngine] = ServiceKind("InferenceEngine")
CONTEXT_PROVIDER: ServiceKind[ContextProvider] = ServiceKind("ContextProvider")
CONTEXT_PLANNER: ServiceKind[ContextPlanner] = ServiceKind("ContextPlanner")
THREAD_STORE: ServiceKind[ThreadStore] = ServiceKind("ThreadStore")
CHECKPOINT_STORE: ServiceKind[CheckpointStore] = ServiceKind("CheckpointStore")
MEMORY_STORE: ServiceKind[MemoryStore | MemoryStoreFactory] = ServiceKind("MemoryStore")
TOOL_PROVIDER: ServiceKind[ToolContributor] = ServiceKind("ToolProvider")
TASK_EXECUTOR: ServiceKind[TaskExecutor] = ServiceKind("TaskExecutor")
SUBAGENT_DISPATCHER: ServiceKind[SubagentDispatcher] = ServiceKind("SubagentDispatcher")
REMOTE_RUNNER_PROVIDER: ServiceKind[RemoteRunnerProvider] = ServiceKind("RemoteRunnerProvider")
POLICY_CONTRIBUTOR: ServiceKind[PolicyContributor] = ServiceKind("PolicyContributor")
EVENT_SINK: ServiceKind[EventSink] = ServiceKind("EventSink")
HOOK: ServiceKind[Hook] = ServiceKind("Hook")
STATUS_SEGMENT: ServiceKind[StatusSegment] = ServiceKind("StatusSegment")
PALETTE_SOURCE: ServiceKind[PaletteSource] = ServiceKind("PaletteSource")


class Closeable(Protocol):
    """A service holding resources (MCP connections) the runtime closes once, at the end."""

    async def aclose(self) -> None: ...


class RegistryError(Exception):
    """The registry refused an extension or could not be built; the message says why."""


@dataclass(frozen=True)
class InstalledService:
    kind: str
    id: str
    extension_id: str
    implementation: object


def _service_id(kind: str, service: object) -> str:
    ident = getattr(service, "id", None)
    value = ident() if callable(ident) else ident
    if not isinstance(value, str) or not value:
        raise RegistryError(f"{kind} implementation {type(service).__name__} has no string id()")
    return value


class ExtensionRegistryBuilder:
    """Collects extensions and their services, validates them and freezes a registry."""

    def __init__(self) -> None:
        self._manifests: dict[str, ExtensionManifest] = {}
        self._services: list[InstalledService] = []
        self._grants: dict[str, dict[str, CapabilityGrant]] = {}
        self._denials: dict[str, dict[str, CapabilityDenial]] = {}
        self._installing: ExtensionManifest | None = None
        self._extensions: dict[str, RoderExtension] = {}

    @classmethod
    def seeded(cls, registry: ExtensionRegistry, without: set[str]) -> ExtensionRegistryBuilder:
        """A builder holding what ``registry`` holds but the extensions named in ``without``:
        ``ExtensionRegistry.changed`` installs plugins' extensions into it by the same rules as
        at start (their services are not installed again: a running process stays as it is)."""
        builder = cls()
        builder._manifests = {m.id: m for m in registry.manifests if m.id not in without}
        builder._services = [s for s in registry.installed_services() if s.extension_id not in without]
        builder._grants = {
            ext: {s.id: CapabilityGrant(s.id) for s in rows if s.decision == "granted"}
            for ext, rows in registry.capability_statuses().items()
            if ext not in without
        }
        builder._extensions = {k: v for k, v in registry.extensions().items() if k not in without}
        return builder

    # ------------------------------------------------------------------ extensions

    def install(self, extension: RoderExtension) -> None:
        manifest = extension.manifest()
        self._check_manifest(manifest)
        self._installing = manifest
        before = len(self._services)
        try:
            extension.install(self)
        except RegistryError:
            del self._services[before:]
            raise
        except Exception as exc:
            del self._services[before:]
            raise RegistryError(f"extension {manifest.id!r} failed to install: {exc}") from exc
        finally:
            self._installing = None
        installed = {ProvidedService(s.kind, s.id) for s in self._services[before:]}
        missing = [str(s) for s in manifest.provides if s not in installed]
        if missing:
            del self._services[before:]
            raise RegistryError(f"extension {manifest.id!r} declares {', '.join(missing)} but did not install it")
        self._manifests[manifest.id] = manifest
        self._extensions[manifest.id] = extension

    def refuse_tool_clash(self, extension_id: str) -> None:
        """Rule 6 for an extension just installed, before the build: its tools must register
        beside the others' (a plugin's extension naming a tool Roder has). On a clash it is
        taken out again and RegistryError says why, so the build never fails for it."""
        tools = ToolRegistry()
        others = [s for s in self._services if s.kind == TOOL_PROVIDER.name and s.extension_id != extension_id]
        for installed in others:
            try:
                tools.contribute_from(installed.id, cast(ToolContributor, installed.implementation).contribute)
            except Exception:  # another's fault is not this extension's; the build reports it
                continue
        for installed in [s for s in self._services if s.kind == TOOL_PROVIDER.name and s.extension_id == extension_id]:
            try:
                tools.contribute_from(installed.id, cast(ToolContributor, installed.implementation).contribute)
            except Exception as exc:
                self._services = [s for s in self._services if s.extension_id != extension_id]
                self._manifests.pop(extension_id, None)
                self._extensions.pop(extension_id, None)
                raise RegistryError(f"extension {extension_id!r}: tool contributor {installed.id!r}: {exc}") from exc

    def _check_manifest(self, manifest: ExtensionManifest) -> None:
        if not manifest.id or not manifest.id.strip():
            raise RegistryError("extension id must not be empty")
        if manifest.id in self._manifests:
            raise RegistryError(f"extension id {manifest.id!r} is already installed")
        if not manifest.api_version.startswith(SUPPORTED_API_PREFIX):
            raise RegistryError(
                f"extension {manifest.id!r} targets API {manifest.api_version}, but this Roder supports {SUPPORTED_API_PREFIX}x"
            )
        seen: set[ProvidedService] = set()
        for service in manifest.provides:
            if service in seen:
                raise RegistryError(f"extension {manifest.id!r} declares {service} twice")
            seen.add(service)
            for other in self._manifests.values():
                if service in other.provides:
                    raise RegistryError(f"{service} is declared by both {other.id!r} and {manifest.id!r}")

    def _register(self, service_kind: ServiceKind[S], service: S) -> None:
        kind = service_kind.name
        manifest = self._installing
        if manifest is None:
            raise RegistryError(f"{kind} registered outside of an extension's install()")
        service_id = _service_id(kind, service)
        declared = ProvidedService(kind, service_id)
        if declared not in manifest.provides:
            raise RegistryError(f"extension {manifest.id!r} installed {declared} that its manifest does not declare")
        for existing in self._services:
            if existing.kind == kind and existing.id == service_id:
                raise RegistryError(
                    f"two {kind} implementations use the id {service_id!r} ({existing.extension_id!r} and {manifest.id!r})"
                )
        self._services.append(InstalledService(kind, service_id, manifest.id, service))

    # ------------------------------------------------------------------ registration API

    def inference_engine(self, engine: InferenceEngine) -> None:
        self._register(INFERENCE_ENGINE, engine)

    def context_provider(self, provider: ContextProvider) -> None:
        self._register(CONTEXT_PROVIDER, provider)

    def context_planner(self, planner: ContextPlanner) -> None:
        self._register(CONTEXT_PLANNER, planner)

    def thread_store(self, store: ThreadStore) -> None:
        self._register(THREAD_STORE, store)

    def checkpoint_store(self, store: CheckpointStore) -> None:
        self._register(CHECKPOINT_STORE, store)

    def memory_store(self, store: MemoryStore) -> None:
        self._register(MEMORY_STORE, store)

    def memory_store_factory(self, factory: MemoryStoreFactory) -> None:
        """Seed 003 installs memory as a factory; it provides the MemoryStore service id."""
        self._register(MEMORY_STORE, factory)

    def tool_contributor(self, contributor: ToolContributor) -> None:
        self._register(TOOL_PROVIDER, contributor)

    def task_executor(self, executor: TaskExecutor) -> None:
        self._register(TASK_EXECUTOR, executor)

    def subagent_dispatcher(self, dispatcher: SubagentDispatcher) -> None:
        self._register(SUBAGENT_DISPATCHER, dispatcher)

    def remote_runner_provider(self, provider: RemoteRunnerProvider) -> None:
        self._register(REMOTE_RUNNER_PROVIDER, provider)

    def policy_contributor(self, contributor: PolicyContributor) -> None:
        self._register(POLICY_CONTRIBUTOR, contributor)

    def event_sink(self, sink: EventSink) -> None:
        self._register(EVENT_SINK, sink)

    def hook(self, hook: Hook) -> None:
        self._register(HOOK, hook)

    def status_segment(self, segment: StatusSegment) -> None:
        self._register(STATUS_SEGMENT, segment)

    def palette_source(self, source: PaletteSource) -> None:
        self._register(PALETTE_SOURCE, source)

    # ------------------------------------------------------------------ capabilities

    def grant_capability(self, extension_id: str, grant: CapabilityGrant) -> None:
        self._grants.setdefault(extension_id, {})[grant.id] = grant

    def deny_capability(self, extension_id: str, denial: CapabilityDenial) -> None:
        self._denials.setdefault(extension_id, {})[denial.id] = denial

    def manifests(self) -> list[ExtensionManifest]:
        return list(self._manifests.values())

    # ------------------------------------------------------------------ build

    def build(self, profile: CapabilityProfile | None = None) -> ExtensionRegistry:
        """``profile``: the one it was built under, which extensions added later are admitted by."""
        statuses: dict[str, tuple[CapabilityStatus, ...]] = {}
        for manifest in self._manifests.values():
            grants = self._grants.get(manifest.id, {})
            denials = self._denials.get(manifest.id, {})
            rows = []
            for request in manifest.required_capabilities:
                if request.id in denials:
                    reason = denials[request.id].reason or "denied by the host"
                    raise RegistryError(
                        f"extension {manifest.id!r} requires capability {request.id!r}, which is denied: {reason}"
                    )
                decision = "granted" if request.id in grants else "requested"
                rows.append(CapabilityStatus(request.id, decision))
            statuses[manifest.id] = tuple(rows)
        registry = ExtensionRegistry(
            manifests=tuple(self._manifests.values()),
            services=tuple(self._services),
            capability_statuses=statuses,
            extensions=dict(self._extensions),
            profile=profile,
        )
        registry.tool_registry()  # rule 6: contributors must register cleanly
        return registry


class ExtensionRegistry:
    """The frozen result of a build. Services are selected by kind and id."""

    def __init__(
        self,
        manifests: tuple[ExtensionManifest, ...],
        services: tuple[InstalledService, ...],
        capability_statuses: dict[str, tuple[CapabilityStatus, ...]],
        extensions: dict[str, RoderExtension] | None = None,
        profile: CapabilityProfile | None = None,
    ) -> None:
        self.profile = profile
        self._manifests = manifests
        self._services = services
        self._extensions = MappingProxyType(dict(extensions or {}))
        self._statuses = MappingProxyType(dict(capability_statuses))

    def __setattr__(self, name: str, value: Any) -> None:
        if hasattr(self, "_statuses"):
            raise AttributeError("ExtensionRegistry is immutable")
        super().__setattr__(name, value)

    # ------------------------------------------------------------------ introspection

    @property
    def manifests(self) -> tuple[ExtensionManifest, ...]:
        return self._manifests

    def manifest(self, extension_id: str) -> ExtensionManifest | None:
        return next((m for m in self._manifests if m.id == extension_id), None)

    def provided_services(self) -> set[ProvidedService]:
        return {service for m in self._manifests for service in m.provides}

    def capability_statuses(self) -> MappingProxyType[str, tuple[CapabilityStatus, ...]]:
        return self._statuses

    def extensions(self) -> MappingProxyType[str, RoderExtension]:
        """The installed extension objects by id (``Runtime.plugins_changed`` asks the ones whose
        services come from plugins for the new set)."""
        return self._extensions

    def installed_services(self) -> tuple[InstalledService, ...]:
        return self._services

    def services_of(self, extension_ids: set[str]) -> list[object]:
        """The implementations the named extensions installed, each once."""
        seen: dict[int, object] = {}
        for installed in self._services:
            if installed.extension_id in extension_ids:
                seen.setdefault(id(installed.implementation), installed.implementation)
        return list(seen.values())

    def granted_capabilities(self, extension_id: str) -> frozenset[str]:
        return frozenset(s.id for s in self._statuses.get(extension_id, ()) if s.decision == "granted")

    def extension_of(self, implementation: object) -> str | None:
        return next((s.extension_id for s in self._services if s.implementation is implementation), None)

    def process_states(self) -> list[ProcessState]:
        """One state per extension that runs outside Roder's process (first service of each)."""
        states: dict[str, ProcessState] = {}
        for installed in self._services:
            impl = installed.implementation
            if isinstance(impl, SupervisedService) and installed.extension_id not in states:
                states[installed.extension_id] = impl.process_state()
        return list(states.values())

    def to_json(self) -> dict[str, Any]:
        """The ``extensions/list`` shape of seed 003."""
        return {
            "extensions": [m.to_json() for m in self._manifests],
            "capability_statuses": {ext: [status.to_json() for status in rows] for ext, rows in self._statuses.items()},
        }

    # ------------------------------------------------------------------ selection

    @overload
    def services(self, kind: ServiceKind[S]) -> Iterator[S]: ...

    @overload
    def services(self, kind: str) -> Iterator[object]: ...

    def services(self, kind: ServiceKind[Any] | str) -> Iterator[Any]:
        """Implementations of one kind, in install order (``_register`` checked their type)."""
        name = kind if isinstance(kind, str) else kind.name
        return (s.implementation for s in self._services if s.kind == name)

    @overload
    def service(self, kind: ServiceKind[S], service_id: str) -> S | None: ...

    @overload
    def service(self, kind: str, service_id: str) -> object | None: ...

    def service(self, kind: ServiceKind[Any] | str, service_id: str) -> Any:
        name = kind if isinstance(kind, str) else kind.name
        return next((s.implementation for s in self._services if s.kind == name and s.id == service_id), None)

    def _first(self, kind: ServiceKind[S]) -> S | None:
        return next(self.services(kind), None)

    @property
    def inference_engines(self) -> list[InferenceEngine]:
        return list(self.services(INFERENCE_ENGINE))

    def inference_engine(self, engine_id: str) -> InferenceEngine | None:
        return self.service(INFERENCE_ENGINE, engine_id)

    @property
    def tools(self) -> list[ToolContributor]:
        """Tool contributors, as seed 003 names them (``registry.tools``)."""
        return list(self.services(TOOL_PROVIDER))

    @property
    def context_providers(self) -> list[ContextProvider]:
        return list(self.services(CONTEXT_PROVIDER))

    @property
    def context_planner(self) -> ContextPlanner | None:
        return self._first(CONTEXT_PLANNER)

    @property
    def thread_store(self) -> ThreadStore | None:
        return self._first(THREAD_STORE)

    @property
    def checkpoint_store(self) -> CheckpointStore | None:
        return self._first(CHECKPOINT_STORE)

    @property
    def memory_stores(self) -> list[MemoryStore | MemoryStoreFactory]:
        """As installed: a store, or (seed 003) a factory; ``resolve_memory_store`` gives the store."""
        return list(self.services(MEMORY_STORE))

    @property
    def policy_contributors(self) -> list[PolicyContributor]:
        return list(self.services(POLICY_CONTRIBUTOR))

    @property
    def event_sinks(self) -> list[EventSink]:
        return list(self.services(EVENT_SINK))

    @property
    def hooks(self) -> list[Hook]:
        return list(self.services(HOOK))

    @property
    def task_executors(self) -> list[TaskExecutor]:
        return list(self.services(TASK_EXECUTOR))

    @property
    def subagent_dispatchers(self) -> list[SubagentDispatcher]:
        return list(self.services(SUBAGENT_DISPATCHER))

    @property
    def status_segments(self) -> list[StatusSegment]:
        return list(self.services(STATUS_SEGMENT))

    @property
    def palette_sources(self) -> list[PaletteSource]:
        return list(self.services(PALETTE_SOURCE))

    def unique_implementations(self) -> list[object]:
        """Every installed service object once, even one installed under two kinds: callers
        pick those implementing a protocol (``Runtime.plugins_changed``)."""
        seen: dict[int, object] = {}
        for installed in self._services:
            seen.setdefault(id(installed.implementation), installed.implementation)
        return list(seen.values())

    def closeable_services(self) -> list[Closeable]:
        """Services holding resources (MCP connections) that expose ``async aclose()``; the
        runtime closes them once when it closes. A service installed under two kinds is listed once."""
        seen: dict[int, Closeable] = {}
        for installed in self._services:
            if callable(getattr(installed.implementation, "aclose", None)):
                seen.setdefault(id(installed.implementation), cast(Closeable, installed.implementation))
        return list(seen.values())

    def tool_registry(self, on_error: Callable[[str, Exception], None] | None = None) -> ToolRegistry:
        """Ask every contributor for its tools. Without ``on_error`` a bad contributor raises
        (registry build); with it, the contributor is skipped and reported (turn time, where a
        dynamic source such as an MCP server must not take the other tools down), and so is a
        tool whose deferred schema cannot be built when the turn asks for the specs."""
        tools = ToolRegistry(on_error)
        for installed in self._services:
            if installed.kind != TOOL_PROVIDER.name:
                continue
            contributor = cast(ToolContributor, installed.implementation)  # registered as one
            try:
                tools.contribute_from(installed.id, contributor.contribute)
            except (ToolSpecError, RegistryError) as exc:
                if on_error is None:
                    raise RegistryError(f"tool contributor {installed.id!r} of {installed.extension_id!r}: {exc}") from exc
                on_error(installed.id, exc)
            except Exception as exc:
                if on_error is None:
                    raise RegistryError(f"tool contributor {installed.id!r} of {installed.extension_id!r} failed: {exc}") from exc
                on_error(installed.id, exc)
        return tools
