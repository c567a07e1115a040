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
from typing import Any, cast

from roder_core.kernel.extension import (
    SUPPORTED_API_PREFIX,
    CapabilityDenial,
    CapabilityGrant,
    CapabilityStatus,
    ExtensionManifest,
    ProvidedService,
    RoderExtension,
)
from roder_core.kernel.services import (
    CheckpointStore,
    ContextPlanner,
    ContextProvider,
    EmbeddingProvider,
    EventSink,
    Hook,
    InferenceEngine,
    InteractiveRegionHandler,
    MemoryStore,
    MemoryStoreFactory,
    NotificationSink,
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


class RegistryError(Exception):
    """The registry refused an extension or could not be built; the message says why."""


@dataclass(frozen=True)
class InstalledService:
    kind: str
    id: str
    extension_id: str
    implementation: Any


def _service_id(kind: str, service: Any) -> str:
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

    def _register(self, kind: str, service: Any) -> None:
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
        self._register("InferenceEngine", engine)

    def context_provider(self, provider: ContextProvider) -> None:
        self._register("ContextProvider", provider)

    def context_planner(self, planner: ContextPlanner) -> None:
        self._register("ContextPlanner", planner)

    def thread_store(self, store: ThreadStore) -> None:
        self._register("ThreadStore", store)

    def checkpoint_store(self, store: CheckpointStore) -> None:
        self._register("CheckpointStore", store)

    def memory_store(self, store: MemoryStore) -> None:
        self._register("MemoryStore", store)

    def memory_store_factory(self, factory: MemoryStoreFactory) -> None:
        """Seed 003 installs memory as a factory; it provides the MemoryStore service id."""
        self._register("MemoryStore", factory)

    def embedding_provider(self, provider: EmbeddingProvider) -> None:
        self._register("EmbeddingProvider", provider)

    def tool_contributor(self, contributor: ToolContributor) -> None:
        self._register("ToolProvider", contributor)

    def task_executor(self, executor: TaskExecutor) -> None:
        self._register("TaskExecutor", executor)

    def subagent_dispatcher(self, dispatcher: SubagentDispatcher) -> None:
        self._register("SubagentDispatcher", dispatcher)

    def remote_runner_provider(self, provider: RemoteRunnerProvider) -> None:
        self._register("RemoteRunnerProvider", provider)

    def policy_contributor(self, contributor: PolicyContributor) -> None:
        self._register("PolicyContributor", contributor)

    def event_sink(self, sink: EventSink) -> None:
        self._register("EventSink", sink)

    def notification_sink(self, sink: NotificationSink) -> None:
        self._register("NotificationSink", sink)

    def hook(self, hook: Hook) -> None:
        self._register("Hook", hook)

    def status_segment(self, segment: StatusSegment) -> None:
        self._register("StatusSegment", segment)

    def palette_source(self, source: PaletteSource) -> None:
        self._register("PaletteSource", source)

    def interactive_region_handler(self, handler: InteractiveRegionHandler) -> None:
        self._register("InteractiveRegionHandler", handler)

    # ------------------------------------------------------------------ capabilities

    def grant_capability(self, extension_id: str, grant: CapabilityGrant) -> None:
        self._grants.setdefault(extension_id, {})[grant.id] = grant

    def deny_capability(self, extension_id: str, denial: CapabilityDenial) -> None:
        self._denials.setdefault(extension_id, {})[denial.id] = denial

    def manifests(self) -> list[ExtensionManifest]:
        return list(self._manifests.values())

    # ------------------------------------------------------------------ build

    def build(self) -> ExtensionRegistry:
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
    ) -> None:
        self._manifests = manifests
        self._services = services
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

    def granted_capabilities(self, extension_id: str) -> frozenset[str]:
        return frozenset(s.id for s in self._statuses.get(extension_id, ()) if s.decision == "granted")

    def extension_of(self, implementation: Any) -> str | None:
        return next((s.extension_id for s in self._services if s.implementation is implementation), None)

    def to_json(self) -> dict[str, Any]:
        """The ``extensions/list`` shape of seed 003."""
        return {
            "extensions": [m.to_json() for m in self._manifests],
            "capability_statuses": {ext: [status.to_json() for status in rows] for ext, rows in self._statuses.items()},
        }

    # ------------------------------------------------------------------ selection

    def services(self, kind: str) -> Iterator[Any]:
        return (s.implementation for s in self._services if s.kind == kind)

    def service(self, kind: str, service_id: str) -> Any | None:
        return next((s.implementation for s in self._services if s.kind == kind and s.id == service_id), None)

    def _first(self, kind: str) -> Any | None:
        return next(self.services(kind), None)

    @property
    def inference_engines(self) -> list[InferenceEngine]:
        return cast("list[InferenceEngine]", list(self.services("InferenceEngine")))

    def inference_engine(self, engine_id: str) -> InferenceEngine | None:
        return cast("InferenceEngine | None", self.service("InferenceEngine", engine_id))

    @property
    def tools(self) -> list[ToolContributor]:
        """Tool contributors, as seed 003 names them (``registry.tools``)."""
        return cast("list[ToolContributor]", list(self.services("ToolProvider")))

    @property
    def context_providers(self) -> list[ContextProvider]:
        return cast("list[ContextProvider]", list(self.services("ContextProvider")))

    @property
    def context_planner(self) -> ContextPlanner | None:
        return cast("ContextPlanner | None", self._first("ContextPlanner"))

    @property
    def thread_store(self) -> ThreadStore | None:
        return cast("ThreadStore | None", self._first("ThreadStore"))

    @property
    def checkpoint_store(self) -> CheckpointStore | None:
        return cast("CheckpointStore | None", self._first("CheckpointStore"))

    @property
    def memory_stores(self) -> list[MemoryStore | MemoryStoreFactory]:
        """As installed: a store, or (seed 003) a factory; ``resolve_memory_store`` gives the store."""
        return cast("list[MemoryStore | MemoryStoreFactory]", list(self.services("MemoryStore")))

    @property
    def policy_contributors(self) -> list[PolicyContributor]:
        return cast("list[PolicyContributor]", list(self.services("PolicyContributor")))

    @property
    def event_sinks(self) -> list[EventSink]:
        return cast("list[EventSink]", list(self.services("EventSink")))

    @property
    def notification_sinks(self) -> list[NotificationSink]:
        return cast("list[NotificationSink]", list(self.services("NotificationSink")))

    @property
    def hooks(self) -> list[Hook]:
        return cast("list[Hook]", list(self.services("Hook")))

    @property
    def task_executors(self) -> list[TaskExecutor]:
        return cast("list[TaskExecutor]", list(self.services("TaskExecutor")))

    @property
    def subagent_dispatchers(self) -> list[SubagentDispatcher]:
        return cast("list[SubagentDispatcher]", list(self.services("SubagentDispatcher")))

    @property
    def status_segments(self) -> list[StatusSegment]:
        return cast("list[StatusSegment]", list(self.services("StatusSegment")))

    @property
    def palette_sources(self) -> list[PaletteSource]:
        return cast("list[PaletteSource]", list(self.services("PaletteSource")))

    def closeable_services(self) -> list[Any]:
        """Services holding resources (MCP connections) that expose ``async aclose()``; the
        runtime closes them once when it closes. A service installed under two kinds is listed once."""
        seen: dict[int, Any] = {}
        for installed in self._services:
            if callable(getattr(installed.implementation, "aclose", None)):
                seen.setdefault(id(installed.implementation), installed.implementation)
        return list(seen.values())

    def tool_registry(self, on_error: Callable[[str, Exception], None] | None = None) -> ToolRegistry:
        """Ask every contributor for its tools. Without ``on_error`` a bad contributor raises
        (registry build); with it, the contributor is skipped and reported (turn time, where a
        dynamic source such as an MCP server must not take the other tools down)."""
        tools = ToolRegistry()
        for installed in self._services:
            if installed.kind != "ToolProvider":
                continue
            try:
                tools.contribute_from(installed.id, installed.implementation.contribute)
            except (ToolSpecError, RegistryError) as exc:
                if on_error is None:
                    raise RegistryError(f"tool contributor {installed.id!r} of {installed.extension_id!r}: {exc}") from exc
                on_error(installed.id, exc)
            except Exception as exc:
                if on_error is None:
                    raise RegistryError(f"tool contributor {installed.id!r} of {installed.extension_id!r} failed: {exc}") from exc
                on_error(installed.id, exc)
        return tools
