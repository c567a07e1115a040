"""Protocol models of the feature methods (seed 004): slash commands, agents and subagent
traces, user input and plan review, memory, and MCP servers (background tasks: ``protocol_tasks``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from roder_core.ir import Turn, empty_list
from roder_core.server.protocol import (
    MethodSpec,
    NoParams,
    Ok,
    ProtocolModel,
    ResolvedResult,
    ServerNotification,
    register,
    register_notification,
)

# --------------------------------------------------------------------------- commands, agents


class CommandsListParams(ProtocolModel):
    workspace: str | None = None


class CommandInfoModel(ProtocolModel):
    name: str
    description: str
    kind: Literal["builtin", "custom", "skill", "prompt"]
    argument_hint: str = ""
    scope: str = "builtin"
    model: str | None = None
    path: str | None = None


class CommandsListResult(ProtocolModel):
    commands: list[CommandInfoModel]
    problems: list[str] = Field(default_factory=empty_list)


class CommandsExpandParams(ProtocolModel):
    name: str
    arguments: str = ""
    workspace: str | None = None


class CommandsExpandResult(ProtocolModel):
    name: str
    kind: Literal["builtin", "custom", "skill", "prompt"]
    text: str = ""
    model: str | None = None
    #: For client-side built-ins (/new, /resume, ...): the action the client should perform.
    action: str | None = None
    arguments: str = ""


class CommandsRunParams(ProtocolModel):
    thread_id: str | None = None
    name: str
    arguments: str = ""


class CommandsRunResult(ProtocolModel):
    kind: Literal["turn", "done", "action"]
    name: str
    message: str = ""
    turn: Turn | None = None
    action: str | None = None
    arguments: str = ""
    data: dict[str, Any] = Field(default_factory=dict)


class AgentsListParams(ProtocolModel):
    workspace: str | None = None


class AgentInfo(ProtocolModel):
    name: str
    description: str
    scope: str
    tools: list[str] | None = None
    model: str | None = None
    mode: str | None = None
    path: str | None = None


class AgentsListResult(ProtocolModel):
    agents: list[AgentInfo]


class SubagentTracesParams(ProtocolModel):
    thread_id: str
    turn_id: str | None = None


class SubagentTrace(ProtocolModel):
    """One subagent run: who ran it for which call, its child thread, how it ended."""

    trace_id: str
    agent: str
    description: str
    #: The parent's thread and turn, and the ``task`` call that started it.
    thread_id: str
    turn_id: str
    call_id: str
    child_thread_id: str
    #: running | completed | failed | interrupted
    status: str = "running"
    started_at: float
    completed_at: float | None = None
    #: The child's final answer, as the parent's tool result holds it.
    result: str = ""


class SubagentTracesResult(ProtocolModel):
    traces: list[SubagentTrace]


class SubagentTraceReadParams(ProtocolModel):
    thread_id: str
    trace_id: str


class SubagentTraceDetail(SubagentTrace):
    #: The child thread's items (live while it runs, stored once it ended), in wire form.
    items: list[dict[str, Any]] = Field(default_factory=empty_list)


class SubagentTraceResult(ProtocolModel):
    trace: SubagentTraceDetail


# --------------------------------------------------------------------------- user input, plans


class ResolveUserInputParams(ProtocolModel):
    request_id: str
    answers: dict[str, Any] = Field(default_factory=dict)


class ExitPlanParams(ProtocolModel):
    request_id: str
    approved: bool
    feedback: str = ""
    #: Mode after an approved plan: ask (default), auto-edit or bypass.
    mode: Literal["ask", "auto-edit", "bypass"] | None = None


# --------------------------------------------------------------------------- memory

MemoryScopeName = Literal["project", "global"]


class MemoryModel(ProtocolModel):
    id: str
    text: str
    scope: MemoryScopeName
    project: str | None = None
    tags: list[str] = Field(default_factory=empty_list)
    created_at: float = 0.0
    updated_at: float = 0.0
    score: float | None = None


class MemoryListParams(ProtocolModel):
    scope: MemoryScopeName | None = None
    workspace: str | None = None
    limit: int | None = Field(default=None, ge=1)


class MemoryListResult(ProtocolModel):
    provider: str
    memories: list[MemoryModel]


class MemoryIdParams(ProtocolModel):
    id: str


class MemoryResult(ProtocolModel):
    memory: MemoryModel


class MemorySaveParams(ProtocolModel):
    text: str = Field(min_length=1)
    scope: MemoryScopeName = "project"
    tags: list[str] = Field(default_factory=empty_list)
    workspace: str | None = None


class MemoryUpdateParams(ProtocolModel):
    id: str
    text: str | None = Field(default=None, min_length=1)
    tags: list[str] | None = None


class MemoryQueryParams(ProtocolModel):
    text: str
    scope: MemoryScopeName | None = None
    workspace: str | None = None
    limit: int = Field(default=5, ge=1, le=200)
    include_global: bool = True


class MemoryProviderInfo(ProtocolModel):
    id: str
    extension: str
    active: bool


class MemoryProvidersResult(ProtocolModel):
    providers: list[MemoryProviderInfo]


class MemoryProviderSetParams(ProtocolModel):
    provider: str


class MemoryRecallPreviewParams(ProtocolModel):
    text: str
    thread_id: str | None = None
    limit: int = Field(default=5, ge=1, le=50)


class MemoryRecallPreviewResult(ProtocolModel):
    provider: str
    memories: list[MemoryModel]
    #: The block the context would carry for this prompt.
    context: str


class MemoryUpdated(ServerNotification):
    """A memory was saved, updated or deleted through the app server."""

    method: Literal["memory/updated"] = "memory/updated"
    action: Literal["saved", "updated", "deleted"]
    id: str
    memory: MemoryModel | None = None


# --------------------------------------------------------------------------- MCP servers


class McpListParams(ProtocolModel):
    #: Wait up to this long for servers still connecting (0: report them as they are now).
    wait_ms: int = Field(default=0, ge=0, le=60_000)


class McpServerStatus(ProtocolModel):
    """One configured MCP server as Roder's MCP client sees it."""

    name: str
    #: pending | connecting | connected | needs-login (asks for an OAuth sign-in) | failed | exited | stopped | disabled
    status: str
    #: Why it failed or exited (with the tail of a stdio server's stderr).
    error: str | None = None
    transport: str = ""
    #: The command line or URL.
    target: str = ""
    #: "config" or the path of the .mcp.json that declared it.
    origin: str = ""
    #: The server's own name and version, once connected.
    server: str = ""
    tool_count: int = 0
    #: Tool names as the model sees them (``mcp__<server>__<tool>``), when connected.
    tools: list[str] = Field(default_factory=empty_list)
    descriptions: dict[str, str] = Field(default_factory=dict)
    #: The server's prompts as slash commands (``/mcp__<server>__<prompt>``), when connected.
    prompts: list[str] = Field(default_factory=empty_list)
    #: The server's resources as prompt mentions (``@<server>:<uri>``), when connected.
    resources: list[str] = Field(default_factory=empty_list)
    #: The server's resource templates as mentions to fill in (``@<server>:<uri template>``).
    resource_templates: list[str] = Field(default_factory=empty_list)
    #: What the server's sampling requests get: ask, allow or deny.
    sampling: str = "ask"


class McpListResult(ProtocolModel):
    servers: list[McpServerStatus]


class McpRestartParams(ProtocolModel):
    server: str


class McpRestartResult(ProtocolModel):
    #: The server after the restart settled (connected, or failed with its error).
    server: McpServerStatus


COMMANDS_LIST = MethodSpec(
    "commands/list",
    "commands",
    CommandsListParams,
    CommandsListResult,
    "Slash commands: built-ins, custom markdown commands and skills.",
)

COMMANDS_EXPAND = MethodSpec(
    "commands/expand",
    "commands",
    CommandsExpandParams,
    CommandsExpandResult,
    "Expand a command into its prompt (or the client action of a built-in) without running it.",
)

COMMANDS_RUN = MethodSpec(
    "commands/run",
    "commands",
    CommandsRunParams,
    CommandsRunResult,
    "Run a command on a thread: templates and skills start a turn, runtime built-ins act at once.",
)

AGENTS_LIST = MethodSpec("agents/list", "discovery", AgentsListParams, AgentsListResult, "Subagent definitions.")

TURN_SUBAGENT_TRACES_LIST = MethodSpec(
    "turn/subagentTraces/list", "subagents", SubagentTracesParams, SubagentTracesResult, "Subagent runs of a thread or turn."
)

TURN_SUBAGENT_TRACE_READ = MethodSpec(
    "turn/subagentTrace/read",
    "subagents",
    SubagentTraceReadParams,
    SubagentTraceResult,
    "One subagent run with the child's items.",
)

SESSION_RESOLVE_USER_INPUT = MethodSpec(
    "session/resolve_user_input",
    "session",
    ResolveUserInputParams,
    ResolvedResult,
    "Answer a pending userInput/requested question.",
)

SESSION_EXIT_PLAN = MethodSpec(
    "session/exit_plan",
    "session",
    ExitPlanParams,
    Ok,
    "Approve (continuing in ask, auto-edit or bypass) or reject a plan the model proposed.",
)

MEMORY_LIST = MethodSpec("memory/list", "memory", MemoryListParams, MemoryListResult, "Memories of a project and/or global.")

MEMORY_READ = MethodSpec("memory/read", "memory", MemoryIdParams, MemoryResult, "One memory.")

MEMORY_SAVE = MethodSpec("memory/save", "memory", MemorySaveParams, MemoryResult, "Save a memory (emits memory/updated).")

MEMORY_UPDATE = MethodSpec("memory/update", "memory", MemoryUpdateParams, MemoryResult, "Change a memory's text or tags.")

MEMORY_DELETE = MethodSpec("memory/delete", "memory", MemoryIdParams, Ok, "Delete a memory.")

MEMORY_QUERY = MethodSpec("memory/query", "memory", MemoryQueryParams, MemoryListResult, "Search memories.")

MEMORY_PROVIDER_LIST = MethodSpec("memory/provider/list", "memory", NoParams, MemoryProvidersResult, "Installed memory stores.")

MEMORY_PROVIDER_SET = MethodSpec(
    "memory/provider/set",
    "memory",
    MemoryProviderSetParams,
    MemoryProvidersResult,
    "Choose the memory store the server uses (persisted when config persistence is on).",
)

MEMORY_RECALL_PREVIEW = MethodSpec(
    "memory/recall/preview",
    "memory",
    MemoryRecallPreviewParams,
    MemoryRecallPreviewResult,
    "What memory recall would add to the context for a prompt.",
)

MCP_LIST = MethodSpec(
    "mcp/list",
    "mcp",
    McpListParams,
    McpListResult,
    "Configured MCP servers with status, error and tools (optionally waiting for them to connect).",
)

MCP_RESTART = MethodSpec(
    "mcp/restart",
    "mcp",
    McpRestartParams,
    McpRestartResult,
    "Stop and reconnect one MCP server; returns its status once it settled.",
)

_SPECS: list[MethodSpec[Any, Any]] = [
    COMMANDS_LIST,
    COMMANDS_EXPAND,
    COMMANDS_RUN,
    AGENTS_LIST,
    TURN_SUBAGENT_TRACES_LIST,
    TURN_SUBAGENT_TRACE_READ,
    SESSION_RESOLVE_USER_INPUT,
    SESSION_EXIT_PLAN,
    MEMORY_LIST,
    MEMORY_READ,
    MEMORY_SAVE,
    MEMORY_UPDATE,
    MEMORY_DELETE,
    MEMORY_QUERY,
    MEMORY_PROVIDER_LIST,
    MEMORY_PROVIDER_SET,
    MEMORY_RECALL_PREVIEW,
    MCP_LIST,
    MCP_RESTART,
]
for _spec in _SPECS:
    register(_spec)
register_notification(MemoryUpdated)
