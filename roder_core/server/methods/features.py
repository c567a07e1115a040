"""Slash commands, agents and subagent traces, user input and plan review, memory, MCP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from roder_core.customization.slash_commands import CommandError, CommandRegistry
from roder_core.customization.subagents import agent_json, list_agents, list_traces, read_trace
from roder_core.ir import Mode
from roder_core.kernel.services import ContextBlock, ContextQuery, resolve_memory_store
from roder_core.kernel.tool_catalog import restart_source, source_statuses, wait_for_sources
from roder_core.policy.plan_review_book import PlanReviewError
from roder_core.server.dispatcher import CallContext, Dispatcher, handles
from roder_core.server.errors import InvalidParams
from roder_core.server.methods.core import absolute_path
from roder_core.server.protocol import NoParams, Ok, ResolvedResult, from_domain
from roder_core.server.protocol_features import (
    AGENTS_LIST,
    COMMANDS_EXPAND,
    COMMANDS_LIST,
    COMMANDS_RUN,
    MCP_LIST,
    MCP_RESTART,
    MEMORY_DELETE,
    MEMORY_LIST,
    MEMORY_PROVIDER_LIST,
    MEMORY_PROVIDER_SET,
    MEMORY_QUERY,
    MEMORY_READ,
    MEMORY_RECALL_PREVIEW,
    MEMORY_SAVE,
    MEMORY_UPDATE,
    SESSION_EXIT_PLAN,
    SESSION_RESOLVE_USER_INPUT,
    TURN_SUBAGENT_TRACE_READ,
    TURN_SUBAGENT_TRACES_LIST,
    AgentInfo,
    AgentsListParams,
    AgentsListResult,
    CommandInfoModel,
    CommandsExpandParams,
    CommandsExpandResult,
    CommandsListParams,
    CommandsListResult,
    CommandsRunParams,
    CommandsRunResult,
    ExitPlanParams,
    McpListParams,
    McpListResult,
    McpRestartParams,
    McpRestartResult,
    McpServerStatus,
    MemoryIdParams,
    MemoryListParams,
    MemoryListResult,
    MemoryModel,
    MemoryProviderInfo,
    MemoryProviderSetParams,
    MemoryProvidersResult,
    MemoryQueryParams,
    MemoryRecallPreviewParams,
    MemoryRecallPreviewResult,
    MemoryResult,
    MemorySaveParams,
    MemoryUpdated,
    MemoryUpdateParams,
    ResolveUserInputParams,
    SubagentTrace,
    SubagentTraceDetail,
    SubagentTraceReadParams,
    SubagentTraceResult,
    SubagentTracesParams,
    SubagentTracesResult,
)
from roder_core.settings.config import ConfigWriter

# --------------------------------------------------------------------------- commands, agents


def _workspace(app: Dispatcher, value: str | None) -> Path:
    return absolute_path(value, "workspace") if value else app.runtime.options.cwd


def _commands(app: Dispatcher, workspace: str | None) -> CommandRegistry:
    return CommandRegistry.for_runtime(app.runtime, _workspace(app, workspace))


#: Seconds a command not (yet) known waits at most for tool sources still connecting (an MCP
#: server's prompts are commands only once it is connected). Each source settles, connected or
#: failed, within its own ``startup_timeout`` (30 s by default), so this only bounds one that
#: misbehaves; a shorter fixed wait failed a real server's prompt on a loaded machine.
SOURCE_WAIT = 120.0
#: A tool source's `kind` is always "mcp" in the MCP listing, so McpServerStatus has no field for it.
MCP_LISTING_OMITS = frozenset({"kind"})


async def _commands_knowing(app: Dispatcher, workspace: str | None, name: str) -> CommandRegistry:
    registry = _commands(app, workspace)
    if registry.get(name) is None and registry.sources:
        await wait_for_sources(app.runtime.registry, SOURCE_WAIT)
        registry = _commands(app, workspace)
    return registry


@handles(COMMANDS_LIST)
async def commands_list(app: Dispatcher, params: CommandsListParams, ctx: CallContext) -> CommandsListResult:
    registry = _commands(app, params.workspace)
    return CommandsListResult(
        commands=[from_domain(CommandInfoModel, c.to_json()) for c in registry.list()], problems=registry.problems
    )


@handles(COMMANDS_EXPAND)
async def commands_expand(app: Dispatcher, params: CommandsExpandParams, ctx: CallContext) -> CommandsExpandResult:
    try:
        registry = await _commands_knowing(app, params.workspace, params.name)
        expansion = await registry.expand(params.name, params.arguments)
    except CommandError as exc:
        raise InvalidParams(str(exc)) from None
    return CommandsExpandResult(
        name=expansion.name,
        kind=expansion.kind,
        text=expansion.text,
        model=expansion.model,
        action=expansion.action,
        arguments=expansion.arguments,
    )


@handles(COMMANDS_RUN)
async def commands_run(app: Dispatcher, params: CommandsRunParams, ctx: CallContext) -> CommandsRunResult:
    cwd = None
    if params.thread_id is not None:
        cwd = (await app.runtime.resume_thread(params.thread_id)).cwd
    registry = await _commands_knowing(app, str(cwd) if cwd else None, params.name)
    try:
        outcome = await registry.run(app.runtime, params.thread_id, params.name, params.arguments)
    except CommandError as exc:
        raise InvalidParams(str(exc)) from None
    return from_domain(CommandsRunResult, outcome.to_json())


@handles(AGENTS_LIST)
async def agents_list(app: Dispatcher, params: AgentsListParams, ctx: CallContext) -> AgentsListResult:
    options = app.runtime.options
    agents = list_agents(_workspace(app, params.workspace), options.paths, options.trusted, options.config)
    return AgentsListResult(agents=[from_domain(AgentInfo, agent_json(a)) for a in agents])


@handles(TURN_SUBAGENT_TRACES_LIST)
async def subagent_traces(app: Dispatcher, params: SubagentTracesParams, ctx: CallContext) -> SubagentTracesResult:
    rows = await list_traces(app.runtime, params.thread_id, params.turn_id)
    return SubagentTracesResult(traces=[from_domain(SubagentTrace, row) for row in rows])


@handles(TURN_SUBAGENT_TRACE_READ)
async def subagent_trace(app: Dispatcher, params: SubagentTraceReadParams, ctx: CallContext) -> SubagentTraceResult:
    return SubagentTraceResult(
        trace=from_domain(SubagentTraceDetail, await read_trace(app.runtime, params.thread_id, params.trace_id))
    )


# --------------------------------------------------------------------------- user input, plans


@handles(SESSION_RESOLVE_USER_INPUT)
async def resolve_user_input(app: Dispatcher, params: ResolveUserInputParams, ctx: CallContext) -> ResolvedResult:
    if not any(e.request_id == params.request_id for e in app.runtime.pending_user_inputs()):
        raise InvalidParams(f"no pending user-input request {params.request_id!r}")
    return ResolvedResult(resolved=app.runtime.resolve_user_input(params.request_id, params.answers))


@handles(SESSION_EXIT_PLAN)
async def exit_plan(app: Dispatcher, params: ExitPlanParams, ctx: CallContext) -> Ok:
    """The short form of plan/review/approve and plan/review/reject, by the approval's id."""
    book = app.runtime.plan_reviews
    try:
        review = book.waiting_on(params.request_id)
        if params.approved:
            await book.approve(review.review_id, Mode(params.mode or Mode.ASK), params.feedback)
        else:
            await book.reject(review.review_id, params.feedback)
    except PlanReviewError as exc:
        raise InvalidParams(str(exc)) from None
    return Ok()


# --------------------------------------------------------------------------- memory


def _memory_stores(app: Dispatcher) -> dict[str, tuple[Any, str]]:
    registry = app.runtime.registry
    return {service.id(): (service, registry.extension_of(service) or "") for service in registry.memory_stores}


def _memory(app: Dispatcher) -> tuple[str, Any]:
    stores = _memory_stores(app)
    if not stores:
        raise InvalidParams("no memory store is installed")
    chosen = app.services.get("memory.provider")
    configured = getattr(app.runtime.options.config, "memory_provider", None)
    name = next((n for n in (chosen, configured) if n in stores), next(iter(stores)))
    cache: dict[str, Any] = app.services.setdefault("memory.instances", {})
    if name not in cache:
        cache[name] = resolve_memory_store(stores[name][0])
    return name, cache[name]


def _model(record: Any) -> MemoryModel:
    return from_domain(MemoryModel, record.to_json())


def _project(app: Dispatcher, workspace: str | None) -> str:
    return str(_workspace(app, workspace))


@handles(MEMORY_LIST)
async def memory_list(app: Dispatcher, params: MemoryListParams, ctx: CallContext) -> MemoryListResult:
    name, store = _memory(app)
    records = await store.list(project=_project(app, params.workspace), scope=params.scope, limit=params.limit)
    return MemoryListResult(provider=name, memories=[_model(r) for r in records])


async def _get(store: Any, memory_id: str) -> Any:
    record = await store.get(memory_id)
    if record is None:
        raise InvalidParams(f"no memory {memory_id!r}")
    return record


@handles(MEMORY_READ)
async def memory_read(app: Dispatcher, params: MemoryIdParams, ctx: CallContext) -> MemoryResult:
    _name, store = _memory(app)
    return MemoryResult(memory=_model(await _get(store, params.id)))


@handles(MEMORY_SAVE)
async def memory_save(app: Dispatcher, params: MemorySaveParams, ctx: CallContext) -> MemoryResult:
    _name, store = _memory(app)
    memory_id = await store.save(params.text, params.scope, params.tags, project=_project(app, params.workspace))
    memory = _model(await _get(store, memory_id))
    app.broadcast(MemoryUpdated(action="saved", id=memory_id, memory=memory))
    return MemoryResult(memory=memory)


@handles(MEMORY_UPDATE)
async def memory_update(app: Dispatcher, params: MemoryUpdateParams, ctx: CallContext) -> MemoryResult:
    _name, store = _memory(app)
    await _get(store, params.id)
    memory = _model(await store.update(params.id, text=params.text, tags=params.tags))
    app.broadcast(MemoryUpdated(action="updated", id=params.id, memory=memory))
    return MemoryResult(memory=memory)


@handles(MEMORY_DELETE)
async def memory_delete(app: Dispatcher, params: MemoryIdParams, ctx: CallContext) -> Ok:
    _name, store = _memory(app)
    if not await store.delete(params.id):
        raise InvalidParams(f"no memory {params.id!r}")
    app.broadcast(MemoryUpdated(action="deleted", id=params.id))
    return Ok()


@handles(MEMORY_QUERY)
async def memory_query(app: Dispatcher, params: MemoryQueryParams, ctx: CallContext) -> MemoryListResult:
    name, store = _memory(app)
    records = await store.search(
        params.text,
        params.limit,
        project=_project(app, params.workspace),
        include_global=params.include_global and params.scope != "project",
    )
    if params.scope is not None:
        records = [r for r in records if r.scope == params.scope]
    return MemoryListResult(provider=name, memories=[_model(r) for r in records])


@handles(MEMORY_PROVIDER_LIST)
async def memory_providers(app: Dispatcher, params: NoParams, ctx: CallContext) -> MemoryProvidersResult:
    stores = _memory_stores(app)
    active = _memory(app)[0] if stores else None
    return MemoryProvidersResult(
        providers=[MemoryProviderInfo(id=name, extension=ext, active=name == active) for name, (_s, ext) in stores.items()]
    )


@handles(MEMORY_PROVIDER_SET)
async def memory_provider_set(app: Dispatcher, params: MemoryProviderSetParams, ctx: CallContext) -> MemoryProvidersResult:
    stores = _memory_stores(app)
    if params.provider not in stores:
        raise InvalidParams(f"unknown memory provider {params.provider!r} (installed: {', '.join(stores) or 'none'})")
    app.services["memory.provider"] = params.provider
    if app.persist_config:
        ConfigWriter(app.runtime.options.paths.config_file).set("memory_provider", params.provider)
    return await memory_providers(app, NoParams(), ctx)


@handles(MEMORY_RECALL_PREVIEW)
async def memory_recall_preview(
    app: Dispatcher, params: MemoryRecallPreviewParams, ctx: CallContext
) -> MemoryRecallPreviewResult:
    """The memory blocks the installed context providers would add for this prompt, verbatim."""
    name, store = _memory(app)
    project = app.runtime.thread(params.thread_id).cwd if params.thread_id else str(app.runtime.options.cwd)
    records = await store.search(params.text, params.limit, project=project, include_global=True)
    query = ContextQuery(thread_id=params.thread_id or "", cwd=Path(project), prompt=params.text)
    blocks = []
    for provider in app.runtime.registry.context_providers:
        try:
            blocks += [b for b in await provider.load_context(query) if b.kind == "memory"]
        except Exception as exc:  # one broken provider must not hide the others
            blocks.append(ContextBlock(source=provider.id(), kind="memory", text=f"({provider.id()} failed: {exc})"))
    context = "\n\n".join(b.text for b in blocks)
    return MemoryRecallPreviewResult(provider=name, memories=[_model(r) for r in records], context=context)


# --------------------------------------------------------------------------- MCP servers


@handles(MCP_LIST)
async def mcp_list(app: Dispatcher, params: McpListParams, ctx: CallContext) -> McpListResult:
    """The ``mcp`` sources of the tool catalog; waiting also starts servers not yet started."""
    registry = app.runtime.registry
    await wait_for_sources(registry, params.wait_ms / 1000)
    mcp = [status for status in source_statuses(registry) if status.kind == "mcp"]
    servers = [from_domain(McpServerStatus, status.to_json(), omit=MCP_LISTING_OMITS) for status in mcp]
    return McpListResult(servers=servers)


@handles(MCP_RESTART)
async def mcp_restart(app: Dispatcher, params: McpRestartParams, ctx: CallContext) -> McpRestartResult:
    registry = app.runtime.registry
    if not any(s.name == params.server and s.kind == "mcp" for s in source_statuses(registry)):
        names = ", ".join(s.name for s in source_statuses(registry) if s.kind == "mcp") or "none configured"
        raise InvalidParams(f"no MCP server named {params.server!r} (known: {names})")
    status = await restart_source(registry, params.server)
    return McpRestartResult(server=from_domain(McpServerStatus, status.to_json(), omit=MCP_LISTING_OMITS))
