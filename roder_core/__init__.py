"""Roder's core runtime and its public extension API.

Third-party extensions import everything they need from here::

    from roder_core import RoderExtension, ExtensionManifest, ProvidedService, EXTENSION_API_VERSION

The names load on first use (PEP 562), so ``import roder_core.settings.paths`` or a command that
only reads the thread index (``roder sessions list``) does not import pydantic and the kernel.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from roder_core.kernel.extension import (
        EXTENSION_API_VERSION,
        CapabilityDenial,
        CapabilityGrant,
        CapabilityRequest,
        CapabilityStatus,
        ExtensionManifest,
        ProvidedService,
        RoderExtension,
    )
    from roder_core.kernel.registry import ExtensionRegistry, ExtensionRegistryBuilder, RegistryError
    from roder_core.kernel.services import (
        ContextBlock,
        ContextPlanner,
        ContextProvider,
        ContextQuery,
        EventSink,
        Hook,
        HookOutcome,
        HookPoint,
        InferenceEngine,
        InferenceProviderMetadata,
        InferenceTurnContext,
        MemoryStore,
        PaletteCommand,
        PaletteSource,
        PolicyContributor,
        PolicyDecision,
        PolicyVerdict,
        ServiceRegistrar,
        StatusSegment,
        StatusView,
        SubagentDispatcher,
        TaskContext,
        TaskExecutor,
        ThreadStore,
        ToolContributor,
    )
    from roder_core.kernel.tasks import TaskBoard, TaskInfo
    from roder_core.kernel.tool_args import NonBlank, ToolArgumentError, ToolArguments, parse_arguments
    from roder_core.kernel.tools import (
        ChildThreadRun,
        PolicySubject,
        Tool,
        ToolCall,
        ToolExecutionContext,
        ToolExecutor,
        ToolHost,
        ToolRegistry,
        ToolResult,
    )

#: public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "EXTENSION_API_VERSION": "roder_core.kernel.extension",
    "CapabilityDenial": "roder_core.kernel.extension",
    "CapabilityGrant": "roder_core.kernel.extension",
    "CapabilityRequest": "roder_core.kernel.extension",
    "CapabilityStatus": "roder_core.kernel.extension",
    "ExtensionManifest": "roder_core.kernel.extension",
    "ProvidedService": "roder_core.kernel.extension",
    "RoderExtension": "roder_core.kernel.extension",
    "ExtensionRegistry": "roder_core.kernel.registry",
    "ExtensionRegistryBuilder": "roder_core.kernel.registry",
    "RegistryError": "roder_core.kernel.registry",
    "ContextBlock": "roder_core.kernel.services",
    "ContextPlanner": "roder_core.kernel.services",
    "ContextProvider": "roder_core.kernel.services",
    "ContextQuery": "roder_core.kernel.services",
    "EventSink": "roder_core.kernel.services",
    "Hook": "roder_core.kernel.services",
    "HookOutcome": "roder_core.kernel.services",
    "HookPoint": "roder_core.kernel.services",
    "InferenceEngine": "roder_core.kernel.services",
    "InferenceProviderMetadata": "roder_core.kernel.services",
    "InferenceTurnContext": "roder_core.kernel.services",
    "MemoryStore": "roder_core.kernel.services",
    "PaletteCommand": "roder_core.kernel.services",
    "PaletteSource": "roder_core.kernel.services",
    "ServiceRegistrar": "roder_core.kernel.services",
    "PolicyContributor": "roder_core.kernel.services",
    "PolicyDecision": "roder_core.kernel.services",
    "PolicyVerdict": "roder_core.kernel.services",
    "StatusSegment": "roder_core.kernel.services",
    "StatusView": "roder_core.kernel.services",
    "SubagentDispatcher": "roder_core.kernel.services",
    "TaskExecutor": "roder_core.kernel.services",
    "ThreadStore": "roder_core.kernel.services",
    "ToolContributor": "roder_core.kernel.services",
    "ChildThreadRun": "roder_core.kernel.tools",
    "PolicySubject": "roder_core.kernel.tools",
    "Tool": "roder_core.kernel.tools",
    "ToolCall": "roder_core.kernel.tools",
    "ToolExecutionContext": "roder_core.kernel.tools",
    "ToolExecutor": "roder_core.kernel.tools",
    "ToolHost": "roder_core.kernel.tools",
    "ToolRegistry": "roder_core.kernel.tools",
    "ToolResult": "roder_core.kernel.tools",
    "TaskContext": "roder_core.kernel.services",
    "TaskBoard": "roder_core.kernel.tasks",
    "TaskInfo": "roder_core.kernel.tasks",
    "NonBlank": "roder_core.kernel.tool_args",
    "ToolArgumentError": "roder_core.kernel.tool_args",
    "ToolArguments": "roder_core.kernel.tool_args",
    "parse_arguments": "roder_core.kernel.tool_args",
}

__version__ = "0.2.0"

__all__ = [
    "EXTENSION_API_VERSION",
    "CapabilityDenial",
    "CapabilityGrant",
    "CapabilityRequest",
    "CapabilityStatus",
    "ChildThreadRun",
    "ContextBlock",
    "ContextPlanner",
    "ContextProvider",
    "ContextQuery",
    "EventSink",
    "ExtensionManifest",
    "ExtensionRegistry",
    "ExtensionRegistryBuilder",
    "Hook",
    "HookOutcome",
    "HookPoint",
    "InferenceEngine",
    "InferenceProviderMetadata",
    "InferenceTurnContext",
    "MemoryStore",
    "NonBlank",
    "PaletteCommand",
    "PaletteSource",
    "PolicyContributor",
    "PolicyDecision",
    "PolicySubject",
    "PolicyVerdict",
    "ProvidedService",
    "RegistryError",
    "RoderExtension",
    "ServiceRegistrar",
    "StatusSegment",
    "StatusView",
    "SubagentDispatcher",
    "TaskBoard",
    "TaskContext",
    "TaskExecutor",
    "TaskInfo",
    "ThreadStore",
    "Tool",
    "ToolArgumentError",
    "ToolArguments",
    "ToolCall",
    "ToolContributor",
    "ToolExecutionContext",
    "ToolExecutor",
    "ToolHost",
    "ToolRegistry",
    "ToolResult",
    "__version__",
    "parse_arguments",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'roder_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
