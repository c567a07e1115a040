"""The public extension contract of seed 003: manifests, provided services and capabilities.

These types are deliberately small, frozen and serializable: clients inspect them through
``extensions/list`` without importing any extension code.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from roder_core.kernel.services import ServiceRegistrar

#: The extension API version this core implements.
EXTENSION_API_VERSION = "0.1.0"
#: Manifests must declare an api_version with the same major.minor (0.1.x).
SUPPORTED_API_PREFIX = "0.1."

#: Every service category an extension may provide (seed 003 "Service categories").
SERVICE_KINDS: tuple[str, ...] = (
    "InferenceEngine",
    "ContextProvider",
    "ContextPlanner",
    "ThreadStore",
    "CheckpointStore",
    "MemoryStore",
    "ToolProvider",
    "TaskExecutor",
    "SubagentDispatcher",
    "RemoteRunnerProvider",
    "PolicyContributor",
    "EventSink",
    "Hook",
    "StatusSegment",
    "PaletteSource",
)


@dataclass(frozen=True, slots=True)
class ProvidedService:
    """One service an extension declares, such as ``ProvidedService.ToolProvider("web")``.

    Serialized as ``{"ToolProvider": "web"}`` exactly as seed 003's ``extensions/list`` shows.
    """

    kind: str
    id: str

    # Constructors named after the categories, as seed 003 spells them.
    InferenceEngine: ClassVar[Any]
    ContextProvider: ClassVar[Any]
    ContextPlanner: ClassVar[Any]
    ThreadStore: ClassVar[Any]
    CheckpointStore: ClassVar[Any]
    MemoryStore: ClassVar[Any]
    ToolProvider: ClassVar[Any]
    TaskExecutor: ClassVar[Any]
    SubagentDispatcher: ClassVar[Any]
    RemoteRunnerProvider: ClassVar[Any]
    PolicyContributor: ClassVar[Any]
    EventSink: ClassVar[Any]
    Hook: ClassVar[Any]
    StatusSegment: ClassVar[Any]
    PaletteSource: ClassVar[Any]

    def __post_init__(self) -> None:
        if self.kind not in SERVICE_KINDS:
            raise ValueError(f"unknown service kind {self.kind!r}; expected one of {SERVICE_KINDS}")
        if not self.id:
            raise ValueError(f"{self.kind} service id must not be empty")

    def to_json(self) -> dict[str, str]:
        return {self.kind: self.id}

    @classmethod
    def from_json(cls, data: dict[str, str]) -> ProvidedService:
        ((kind, ident),) = data.items()
        return cls(kind, ident)

    def __str__(self) -> str:
        return f"{self.kind}({self.id})"


def _kind_constructor(kind: str) -> Any:
    def make(service_id: str) -> ProvidedService:
        return ProvidedService(kind, service_id)

    make.__name__ = kind
    make.__doc__ = f"Declare a {kind} service with the given id."
    return staticmethod(make)


for _kind in SERVICE_KINDS:
    setattr(ProvidedService, _kind, _kind_constructor(_kind))


@dataclass(frozen=True, slots=True)
class CapabilityRequest:
    """A capability an extension needs, e.g. ``CapabilityRequest("network.web")``."""

    id: str

    def to_json(self) -> dict[str, str]:
        return {"id": self.id}


@dataclass(frozen=True, slots=True)
class CapabilityGrant:
    id: str


@dataclass(frozen=True, slots=True)
class CapabilityDenial:
    id: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class CapabilityStatus:
    """The host's decision about one capability: ``granted``, ``requested`` or ``denied``."""

    id: str
    decision: str
    reason: str | None = None

    def to_json(self) -> dict[str, str]:
        data = {"id": self.id, "decision": self.decision}
        if self.reason:
            data["reason"] = self.reason
        return data


@dataclass(frozen=True)
class ExtensionManifest:
    """The public identity of an extension (seed 003 "Manifest contract")."""

    id: str
    name: str
    version: str
    api_version: str
    description: str | None = None
    provides: list[ProvidedService] = field(default_factory=list)
    required_capabilities: list[CapabilityRequest] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "version": self.version,
            "api_version": self.api_version,
            "description": self.description,
            "provides": [service.to_json() for service in self.provides],
            "required_capabilities": [cap.to_json() for cap in self.required_capabilities],
        }


@dataclass(frozen=True)
class ProcessState:
    """How an extension that lives outside Roder's process is doing (``extensions/list``)."""

    extension_id: str
    #: "process" (a program speaking the extension protocol) or "wasm" (a WebAssembly module).
    kind: Literal["process", "wasm"]
    state: Literal["running", "stopped", "restarting", "failed"]
    #: Whether it runs confined to what the user granted (bubblewrap for processes; always for wasm).
    sandboxed: bool
    granted: tuple[str, ...] = ()
    restarts: int = 0
    last_error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.extension_id,
            "kind": self.kind,
            "state": self.state,
            "sandboxed": self.sandboxed,
            "granted": list(self.granted),
            "restarts": self.restarts,
            "lastError": self.last_error,
        }


@runtime_checkable
class SupervisedService(Protocol):
    """A service backed by something Roder runs apart (a process, a WebAssembly instance)."""

    def process_state(self) -> ProcessState: ...


class RoderExtension(ABC):
    """Base class of every extension: publish a manifest, then install services.

    ``install`` receives the registry builder, seen as a ``ServiceRegistrar``, and calls its
    registration methods (``registry.inference_engine(...)``, ``registry.tool_contributor(...)``,
    ...). The extension never receives the turn loop: the runtime decides when its services are used.
    """

    #: Whether its tools are named by something outside Roder's code (a program, a WebAssembly
    #: module): one named like a tool another extension has skips this extension, with the
    #: reason, instead of failing the registry (and with it every command).
    foreign_tools: ClassVar[bool] = False

    @abstractmethod
    def manifest(self) -> ExtensionManifest: ...

    @abstractmethod
    def install(self, registry: ServiceRegistrar) -> None: ...
