"""Handshake, discovery, threads, turns, session, providers and settings methods."""

from __future__ import annotations

import base64
import mimetypes
import os
from pathlib import Path
from typing import Any

from roder_core import __version__
from roder_core.brokers.secrets import SecretRedactor
from roder_core.customization.mentions import MentionError, mention_attachments
from roder_core.ir import ApprovalDecision, Attachment, ModelProfile, Thread
from roder_core.kernel.services import InferenceEngine
from roder_core.kernel.tool_catalog import build_catalog
from roder_core.media.images import MAX_INPUT_BYTES, MediaError, sniff_image
from roder_core.server.dispatcher import HANDLERS, CallContext, Dispatcher, handles, load_method_modules
from roder_core.server.errors import InvalidParams
from roder_core.server.protocol import (
    EXTENSIONS_LIST,
    INITIALIZE,
    METHODS,
    MODEL_LIST,
    PROVIDERS_CONFIGURE,
    PROVIDERS_LIST,
    PROVIDERS_SELECT,
    SESSION_GET,
    SESSION_RESOLVE_APPROVAL,
    SESSION_SET_MODE,
    SETTINGS_GET,
    SETTINGS_SET_DEFAULT_MODE,
    SETTINGS_SET_WEB_SEARCH,
    THREAD_CLOSE,
    THREAD_FORK,
    THREAD_LIST,
    THREAD_READ,
    THREAD_RESUME,
    THREAD_START,
    TOOLS_LIST,
    TURN_INTERRUPT,
    TURN_START,
    TURN_STEER,
    TURN_STEER_CANCEL,
    ExtensionProcessInfo,
    ExtensionsListResult,
    InitializeParams,
    InitializeResult,
    InputItem,
    MethodGroup,
    ModelListParams,
    ModelListResult,
    ModelNotes,
    NoParams,
    ProviderInfo,
    ProvidersConfigureParams,
    ProvidersConfigureResult,
    ProvidersListResult,
    ProvidersSelectParams,
    ProvidersSelectResult,
    ResolveApprovalParams,
    ResolvedResult,
    SandboxInfo,
    ServerInfo,
    SessionGetParams,
    SessionGetResult,
    SessionModeResult,
    SessionSetModeParams,
    SetDefaultModeParams,
    SettingsResult,
    SetWebSearchParams,
    SkippedExtensionInfo,
    ThreadCloseParams,
    ThreadCloseResult,
    ThreadForkParams,
    ThreadListParams,
    ThreadListResult,
    ThreadReadParams,
    ThreadResult,
    ThreadResumeParams,
    ThreadStartParams,
    ToolInfo,
    ToolsListParams,
    ToolsListResult,
    ToolSourceInfo,
    TurnInterruptParams,
    TurnInterruptResult,
    TurnResult,
    TurnStartParams,
    TurnSteerCancelParams,
    TurnSteerCancelResult,
    TurnSteerParams,
    TurnSteerResult,
    UserInputRequest,
    from_domain,
)
from roder_core.settings.config import ConfigWriter
from roder_core.settings.credentials import CredentialsError, CredentialStore, check_key, redaction_label
from roder_core.threads.events import ApprovalRequested

# --------------------------------------------------------------------------- handshake


def method_groups() -> list[MethodGroup]:
    """Every group with its methods; a group is available when all its methods have handlers."""
    load_method_modules()
    groups: dict[str, list[str]] = {}
    for spec in METHODS.values():
        groups.setdefault(spec.group, []).append(spec.name)
    rows = [
        MethodGroup(name=name, available=all(m in HANDLERS for m in methods), methods=sorted(methods))
        for name, methods in groups.items()
    ]
    return rows


@handles(INITIALIZE)
async def initialize(app: Dispatcher, params: InitializeParams, ctx: CallContext) -> InitializeResult:
    runtime = app.runtime
    if params.client_info is not None:
        ctx.client_name = params.client_info.name
    warnings: list[str] = []
    fell_back = False
    if app.started is not None:
        fell_back = app.started.fell_back_to_mock
        warnings += app.started.distribution.warnings
        warnings += getattr(app.started, "notices", [])
    # Approvals raised before this client connected are replayed so none is stranded.
    for request in runtime.pending_approvals():
        ctx.notify(ApprovalRequested(thread_id=request.thread_id, turn_id=request.turn_id, request=request))
    return InitializeResult(
        server_info=ServerInfo(version=__version__),
        provider=runtime.provider,
        model=runtime.model,
        cwd=str(runtime.options.cwd),
        mode=runtime.mode,
        method_groups=method_groups() if params.include_method_groups else [],
        warnings=warnings,
        fell_back_to_mock=fell_back,
        remote=ctx.remote,
    )


# --------------------------------------------------------------------------- discovery


@handles(EXTENSIONS_LIST)
async def extensions_list(app: Dispatcher, params: NoParams, ctx: CallContext) -> ExtensionsListResult:
    listing = from_domain(ExtensionsListResult, app.runtime.registry.to_json())
    listing.processes = [from_domain(ExtensionProcessInfo, state.to_json()) for state in app.runtime.registry.process_states()]
    if app.started is not None:
        listing.skipped = [
            SkippedExtensionInfo(source=s.source, reason=s.reason, expected=s.expected) for s in app.started.distribution.skipped
        ]
    return listing


@handles(PROVIDERS_LIST)
async def providers_list(app: Dispatcher, params: NoParams, ctx: CallContext) -> ProvidersListResult:
    runtime = app.runtime
    rows = []
    for engine in runtime.registry.inference_engines:
        meta = engine.metadata()
        rows.append(
            ProviderInfo(
                id=engine.id(),
                name=meta.name,
                auth_type=meta.auth_type,
                auth_configured=meta.auth_configured,
                auth_source=meta.auth_source,
                auth_label=meta.auth_label,
                recommended=meta.recommended,
                description=meta.description,
                dialect=meta.dialect,
                base_url=meta.base_url,
                default_model=engine.default_model(),
                selected=engine.id() == runtime.provider,
            )
        )
    rows.sort(key=lambda p: (p.id == "mock", p.id))
    choice = runtime.models.default_choice
    reason = choice.reason if choice is not None and choice.provider == runtime.provider else None
    return ProvidersListResult(providers=rows, provider=runtime.provider, model=runtime.model, default_reason=reason)


@handles(MODEL_LIST)
async def model_list(app: Dispatcher, params: ModelListParams, ctx: CallContext) -> ModelListResult:
    provider = params.provider or app.runtime.provider
    engine = app.runtime.engine(provider)
    models = await engine.list_models()
    return ModelListResult(provider=provider, models=models, notes=[model_notes(engine, m) for m in models])


def model_notes(engine: InferenceEngine, profile: ModelProfile) -> ModelNotes:
    """Whether the engine's built-in table knows the model, and the output limit it sends."""
    knows = getattr(engine, "knows", None)
    limit = getattr(engine, "sent_output_limit", None)
    return ModelNotes(
        id=profile.id,
        known=bool(knows(profile.id)) if knows is not None else True,
        sent_output_limit=limit(profile) if limit is not None else profile.max_output_tokens,
    )


@handles(TOOLS_LIST)
async def tools_list(app: Dispatcher, params: ToolsListParams, ctx: CallContext) -> ToolsListResult:
    catalog = await build_catalog(app.runtime.registry, wait=params.wait)
    rows = [
        ToolInfo(
            name=tool.name,
            description=tool.description,
            parameters=tool.parameters,
            source=tool.source,
            extension=tool.extension,
            kind=tool.kind,
            read_only=tool.read_only,
        )
        for tool in catalog.tools
    ]
    sources = [from_domain(ToolSourceInfo, status.to_json()) for status in catalog.sources]
    return ToolsListResult(tools=rows, errors=catalog.errors, sources=sources)


# --------------------------------------------------------------------------- threads


def absolute_path(value: str, what: str = "path") -> Path:
    path = Path(value)
    if not path.is_absolute():
        raise InvalidParams(f"{what} must be an absolute path (got {value!r})")
    return path


def _thread_view(thread: Thread, include_turns: bool) -> Thread:
    """A snapshot the caller may keep: later runtime changes do not alter it."""
    if include_turns:
        return thread.model_copy(deep=True)
    return thread.model_copy(update={"turns": []})


@handles(THREAD_START)
async def thread_start(app: Dispatcher, params: ThreadStartParams, ctx: CallContext) -> ThreadResult:
    cwd = None
    if params.cwd is not None:
        cwd = absolute_path(params.cwd, "cwd")
        if not cwd.is_dir():
            raise InvalidParams(f"cwd {params.cwd!r} is not a directory")
    thread = await app.runtime.start_thread(
        cwd, params.model_provider, params.model, title=params.title, ephemeral=params.ephemeral
    )
    return ThreadResult(thread=_thread_view(thread, False))


@handles(THREAD_LIST)
async def thread_list(app: Dispatcher, params: ThreadListParams, ctx: CallContext) -> ThreadListResult:
    return ThreadListResult(threads=await app.runtime.list_threads(params.cwd, params.limit))


async def open_thread(app: Dispatcher, thread_id: str) -> Thread:
    """The open thread, resuming it from the store first when needed."""
    return await app.runtime.resume_thread(thread_id)


@handles(THREAD_READ)
async def thread_read(app: Dispatcher, params: ThreadReadParams, ctx: CallContext) -> ThreadResult:
    runtime = app.runtime
    if params.thread_id in {t.id for t in runtime.open_threads()}:
        thread = await runtime.full_thread(params.thread_id) if params.include_turns else runtime.thread(params.thread_id)
    else:
        if runtime.store is None:
            raise InvalidParams(f"no thread {params.thread_id!r} (no thread store is installed)")
        thread = await runtime.store.load(params.thread_id)
    return ThreadResult(thread=_thread_view(thread, params.include_turns))


@handles(THREAD_RESUME)
async def thread_resume(app: Dispatcher, params: ThreadResumeParams, ctx: CallContext) -> ThreadResult:
    thread = await open_thread(app, params.thread_id)
    if not params.include_turns:
        return ThreadResult(thread=_thread_view(thread, False))
    if params.last_turns is None:
        return ThreadResult(thread=_thread_view(await app.runtime.full_thread(thread.id), True))
    turns, older = await app.runtime.last_turns(thread.id, params.last_turns)
    return ThreadResult(thread=_thread_view(thread.model_copy(update={"turns": turns}), True), older_turns=older)


@handles(THREAD_CLOSE)
async def thread_close(app: Dispatcher, params: ThreadCloseParams, ctx: CallContext) -> ThreadCloseResult:
    """Release the store's write claim: without this a long-lived client keeps every thread it
    ever visited locked against ``roder -c``/``-r`` in other processes until it exits."""
    is_open = params.thread_id in {t.id for t in app.runtime.open_threads()}
    if is_open:
        await app.runtime.close_thread(params.thread_id)
    return ThreadCloseResult(closed=is_open)


@handles(THREAD_FORK)
async def thread_fork(app: Dispatcher, params: ThreadForkParams, ctx: CallContext) -> ThreadResult:
    """Fork through the runtime, which copies the stored events and never touches the parent."""
    thread = await app.runtime.fork_thread(
        params.thread_id, params.turn_id, title=params.title, before_item=params.before_item_id
    )
    return ThreadResult(thread=_thread_view(thread, False))


# --------------------------------------------------------------------------- turns


def _read_input_file(app: Dispatcher, thread: Thread, item: InputItem) -> bytes:
    """Files named by path (``@file``) are read through the workspace fs broker, so its rules
    and the content gate apply, and never past ``MAX_INPUT_BYTES``."""
    path = absolute_path(item.path or "", "input path")
    data = app.brokers(Path(thread.cwd)).fs.read_bytes(str(path), max_bytes=MAX_INPUT_BYTES + 1)
    if len(data) > MAX_INPUT_BYTES:
        raise InvalidParams(f"{item.path} is larger than {MAX_INPUT_BYTES // (1024 * 1024)} MB; attach a part of it")
    return data


def build_input(app: Dispatcher, thread: Thread, prompt: str | None, items: list[InputItem]) -> tuple[str, list[Attachment]]:
    """Prompt text and attachments from a prompt and/or structured input items."""
    texts = [prompt] if prompt else []
    attachments: list[Attachment] = []
    for item in items:
        if item.type == "text":
            if item.text:
                texts.append(item.text)
            continue
        name = item.name or (Path(item.path).name if item.path else item.type)
        mime = item.mime_type or (mimetypes.guess_type(item.path)[0] if item.path else None)
        if item.media_id is not None:  # an item the thread stores already (media/attachToTurn)
            try:
                attachments.append(app.runtime.media.get(thread.id, item.media_id).attachment())
            except MediaError as exc:
                raise InvalidParams(str(exc)) from None
        elif item.type == "image":
            data = item.data_base64
            if data is None:
                if not item.path:
                    raise InvalidParams("an image input needs dataBase64, path or mediaId")
                raw = _read_input_file(app, thread, item)
                data, mime = base64.b64encode(raw).decode("ascii"), sniff_image(raw[:16]) or mime
            attachments.append(Attachment(name=name, mime_type=mime or "image/png", data_base64=data, path=item.path))
        elif item.text is None and not item.path:
            raise InvalidParams("a file input needs text or path")
        elif item.text is None:
            raw = _read_input_file(app, thread, item)
            image = sniff_image(raw[:16])
            if image is not None:  # @shot.png arrives as a file: it is a picture, not text
                attachments.append(
                    Attachment(name=name, mime_type=image, data_base64=base64.b64encode(raw).decode("ascii"), path=item.path)
                )
            else:
                text = raw.decode("utf-8", errors="replace")
                attachments.append(Attachment(name=name, mime_type=mime or "text/plain", text=text, path=item.path))
        else:
            attachments.append(Attachment(name=name, mime_type=mime or "text/plain", text=item.text, path=item.path))
    text = "\n\n".join(texts).strip()
    if not text and not attachments and not any(m.pending for m in app.runtime.media.list_media(thread.id)):
        raise InvalidParams("turn input is empty: give a prompt or input items")
    return text, attachments


@handles(TURN_START)
async def turn_start(app: Dispatcher, params: TurnStartParams, ctx: CallContext) -> TurnResult:
    thread = await open_thread(app, params.thread_id)
    text, attachments = build_input(app, thread, params.prompt, params.input)
    try:  # @server:uri mentions of MCP resources become attachments
        attachments += await mention_attachments(app.runtime, text)
    except MentionError as exc:
        raise InvalidParams(str(exc)) from None
    try:
        turn = await app.runtime.start_turn(thread.id, text, attachments, task_ledger_required=params.task_ledger_required)
    except MediaError as exc:  # a model without vision, an attachment that is no image
        raise InvalidParams(str(exc)) from None
    return TurnResult(turn=turn.model_copy(deep=True))


@handles(TURN_STEER)
async def turn_steer(app: Dispatcher, params: TurnSteerParams, ctx: CallContext) -> TurnSteerResult:
    thread = app.runtime.thread(params.thread_id)
    if not (params.prompt or "").strip() and not any(i.text or i.path or i.data_base64 or i.media_id for i in params.input):
        raise InvalidParams("turn/steer needs a prompt")
    # Files and pictures named in a queued message are attached as they are to a prompt (the
    # same reads through the workspace's rules, the same vision check), so "@notes.md" typed
    # while a turn runs reaches the model too.
    text, attachments = build_input(app, thread, params.prompt, params.input)
    try:
        attachments += await mention_attachments(app.runtime, text)
        attachments = await app.runtime.user_attachments(thread.id, attachments)
    except (MentionError, MediaError) as exc:
        raise InvalidParams(str(exc)) from None
    from roder_core.server.protocol_attach import SteerQueued  # the attach vocabulary loads with the first steer

    item = app.runtime.steer(params.thread_id, text, params.expected_turn_id, attachments=attachments)
    turn_id = app.runtime.active_turn_id(params.thread_id) or params.expected_turn_id
    app.broadcast(SteerQueued(thread_id=params.thread_id, turn_id=turn_id, item=item))  # every client shows the queue
    return TurnSteerResult(turn_id=params.expected_turn_id, item_id=item.id)


@handles(TURN_STEER_CANCEL)
async def turn_steer_cancel(app: Dispatcher, params: TurnSteerCancelParams, ctx: CallContext) -> TurnSteerCancelResult:
    from roder_core.server.protocol_attach import SteerCancelled

    item = app.runtime.cancel_steer(params.thread_id, params.item_id)
    if item is not None:
        app.broadcast(SteerCancelled(thread_id=params.thread_id, item_id=item.id))
    return TurnSteerCancelResult(cancelled=item is not None, text=item.text if item is not None else None)


@handles(TURN_INTERRUPT)
async def turn_interrupt(app: Dispatcher, params: TurnInterruptParams, ctx: CallContext) -> TurnInterruptResult:
    app.runtime.thread(params.thread_id)
    return TurnInterruptResult(interrupted=await app.runtime.interrupt(params.thread_id, params.turn_id))


# --------------------------------------------------------------------------- session


@handles(SESSION_GET)
async def session_get(app: Dispatcher, params: SessionGetParams, ctx: CallContext) -> SessionGetResult:
    runtime = app.runtime
    threads = [t.id for t in runtime.open_threads()]
    if params.thread_id is not None:
        runtime.thread(params.thread_id)
    active = {tid: turn for tid in threads if (turn := runtime.active_turn_id(tid))}
    sandbox = runtime.sandbox
    return SessionGetResult(
        mode=runtime.mode,
        provider=runtime.provider,
        model=runtime.model,
        cwd=str(runtime.options.cwd),
        interactive=runtime.options.interactive,
        open_threads=threads,
        active_turns=active,
        pending_approvals=runtime.pending_approvals(params.thread_id),
        pending_user_inputs=[
            UserInputRequest(request_id=e.request_id, thread_id=e.thread_id, turn_id=e.turn_id, questions=e.questions)
            for e in runtime.pending_user_inputs(params.thread_id)
        ],
        sandbox=SandboxInfo(
            requested=sandbox.requested, effective=sandbox.effective, blocked=sandbox.blocked, reason=sandbox.reason
        ),
    )


@handles(SESSION_SET_MODE)
async def session_set_mode(app: Dispatcher, params: SessionSetModeParams, ctx: CallContext) -> SessionModeResult:
    await app.runtime.set_mode(params.mode, params.reason)
    return SessionModeResult(mode=app.runtime.mode)


@handles(SESSION_RESOLVE_APPROVAL)
async def session_resolve_approval(app: Dispatcher, params: ResolveApprovalParams, ctx: CallContext) -> ResolvedResult:
    kind = params.decision or ({True: "allow_once", False: "deny"}.get(params.approved) if params.approved is not None else None)
    if kind is None:
        raise InvalidParams("give approved (true/false) or decision")
    pending = {r.approval_id: r for r in app.runtime.pending_approvals()}
    request = pending.get(params.approval_id)
    if request is None:
        raise InvalidParams(f"no pending approval {params.approval_id!r} (already answered, or its turn ended)")
    rule = params.rule
    if kind == "allow_always" and rule is None:
        rule = next((o.rule for o in request.options if o.id == "allow_always"), None)
    decision = ApprovalDecision(decision=kind, rule=rule, reason=params.reason)  # type: ignore[arg-type]
    return ResolvedResult(resolved=app.runtime.resolve_approval(params.approval_id, decision))


# --------------------------------------------------------------------------- providers, settings


def _writer(app: Dispatcher) -> ConfigWriter:
    return ConfigWriter(app.runtime.options.paths.config_file)


@handles(PROVIDERS_SELECT)
async def providers_select(app: Dispatcher, params: ProvidersSelectParams, ctx: CallContext) -> ProvidersSelectResult:
    runtime = app.runtime
    if params.thread_id is not None:
        await runtime.set_thread_model(params.thread_id, params.provider, params.model)
    runtime.select(params.provider, params.model)
    config = runtime.options.config
    config.provider, config.model = runtime.provider, runtime.model
    if params.reasoning is not None:
        config.reasoning_effort = params.reasoning or None
    if app.persist_config:
        writer = _writer(app)
        writer.set("provider", runtime.provider)
        writer.set("model", runtime.model)
        if params.reasoning is not None:
            writer.set("reasoning_effort", params.reasoning)
    return ProvidersSelectResult(
        provider=runtime.provider, model=runtime.model, reasoning=config.reasoning_effort, persisted=app.persist_config
    )


@handles(PROVIDERS_CONFIGURE)
async def providers_configure(app: Dispatcher, params: ProvidersConfigureParams, ctx: CallContext) -> ProvidersConfigureResult:
    """Settings go to config.toml, the key to the private credentials file (seed 004: both
    persist only when the server persists configuration)."""
    fields = params.model_dump(exclude={"provider", "api_key"}, exclude_none=True)
    if not fields and params.api_key is None:
        raise InvalidParams("nothing to configure: give apiKey, baseUrl, dialect, apiKeyEnv, models or defaultModel")
    if not app.persist_config:
        raise InvalidParams("this server does not persist configuration (started with --no-persist-config)")
    if params.provider == "mock":
        raise InvalidParams("'mock' is the built-in offline model; it takes no settings and no key")
    runtime = app.runtime
    engine = next((e for e in runtime.registry.inference_engines if e.id() == params.provider), None)
    known = engine is not None or params.provider in runtime.options.config.providers or "base_url" in fields
    if not known:
        names = ", ".join(sorted(e.id() for e in runtime.registry.inference_engines if e.id() != "mock"))
        raise InvalidParams(
            f"unknown provider {params.provider!r}: give baseUrl and dialect to add it (configured: {names or 'none'})"
        )
    key = _checked_key(params.provider, params.api_key)  # before anything is written
    if fields:
        writer = _writer(app)
        for name, value in fields.items():
            writer.set(f"providers.{params.provider}.{name}", value)
    result = ProvidersConfigureResult(provider=params.provider, persisted=True, restart_required=bool(fields))
    if key is not None:
        result.key_removed = _store_key(app, params.provider, key, ctx)
    result.key_stored = bool(CredentialStore.for_env(runtime_env(runtime)).get(params.provider))
    if engine is None:
        result.restart_required = True
        return result
    reload_key = getattr(engine, "reload_key", None)
    if reload_key is not None:
        reload_key()
    result.auth_source = engine.metadata().auth_source
    if result.key_stored and result.auth_source == "env":
        label = engine.metadata().auth_label or "its environment variable"
        result.warnings.append(f"{label} is set in the server's environment and takes precedence over the stored key")
    return result


def runtime_env(runtime: Any) -> dict[str, str]:
    """The environment the runtime was started with (it locates the user's credentials file)."""
    env = getattr(runtime.options, "env", None)
    return dict(os.environ if env is None else env)


def _checked_key(provider: str, api_key: str | None) -> str | None:
    """None: leave the key alone; "": remove it; else the key to store (refused when unusable)."""
    if api_key is None or not api_key.strip():
        return None if api_key is None else ""
    try:
        return check_key(provider, api_key)
    except CredentialsError as exc:
        raise InvalidParams(str(exc)) from None


def _store_key(app: Dispatcher, provider: str, key: str, ctx: CallContext) -> bool:
    """Store (or, given "", remove) a key; the runtime's redactor learns it before anything can
    use it. True when a stored key was removed."""
    runtime = app.runtime
    store = CredentialStore.for_env(runtime_env(runtime))
    removed = False
    if key:
        if isinstance(runtime.redact, SecretRedactor):
            runtime.redact.add(redaction_label(provider), key)
        store.set(provider, key)
        action = "provider.key_stored"
    else:
        removed = store.remove(provider)
        action = "provider.key_removed"
    runtime.audit.record(action, {"provider": provider, "client": ctx.client_name or ctx.connection_id})
    return removed


def _settings(app: Dispatcher) -> SettingsResult:
    runtime = app.runtime
    config = runtime.options.config
    return SettingsResult(
        provider=runtime.provider,
        model=runtime.model,
        mode=runtime.mode,
        default_mode=config.mode,
        web_search=config.web_search,
        config_file=str(runtime.options.paths.config_file),
        persist=app.persist_config,
    )


@handles(SETTINGS_GET)
async def settings_get(app: Dispatcher, params: NoParams, ctx: CallContext) -> SettingsResult:
    return _settings(app)


@handles(SETTINGS_SET_WEB_SEARCH)
async def settings_set_web_search(app: Dispatcher, params: SetWebSearchParams, ctx: CallContext) -> SettingsResult:
    app.runtime.options.config.web_search = params.mode
    if app.persist_config:
        _writer(app).set("web_search", params.mode)
    return _settings(app)


@handles(SETTINGS_SET_DEFAULT_MODE)
async def settings_set_default_mode(app: Dispatcher, params: SetDefaultModeParams, ctx: CallContext) -> SettingsResult:
    app.runtime.options.config.mode = params.mode
    if app.persist_config:
        _writer(app).set("mode", params.mode)
    return _settings(app)
