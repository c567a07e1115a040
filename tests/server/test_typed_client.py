"""``client.call(spec, params) -> result``: one typed call for every method, in process, over real
stdio pipes and over a real WebSocket; every spec has its module-level constant."""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from roder_core.runtime.bootstrap import StartSettings
from roder_core.server import protocol
from roder_core.server.client import LocalAppClient
from roder_core.server.errors import INVALID_PARAMS, METHOD_NOT_FOUND, RpcError
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
    TRUST_GET,
    TRUST_SET,
    TURN_INTERRUPT,
    TURN_START,
    TURN_STEER,
    TURN_STEER_CANCEL,
    ClientInfo,
    InitializeParams,
    InitializeResult,
    MethodSpec,
    ModelListParams,
    NoParams,
    ProtocolModel,
    ProvidersConfigureParams,
    ProvidersSelectParams,
    ResolveApprovalParams,
    SessionGetParams,
    SessionSetModeParams,
    SetDefaultModeParams,
    SetWebSearchParams,
    ThreadCloseParams,
    ThreadForkParams,
    ThreadListParams,
    ThreadReadParams,
    ThreadResult,
    ThreadResumeParams,
    ThreadStartParams,
    ToolsListParams,
    TrustGetParams,
    TrustSetParams,
    TurnInterruptParams,
    TurnStartParams,
    TurnSteerCancelParams,
    TurnSteerParams,
)
from roder_core.server.protocol_attach import (
    HOST_STATUS,
    HOST_STOP,
    PALETTE_COMMANDS,
    THREAD_HEADLESS,
    THREAD_LIVE,
    PaletteCommandsParams,
    ThreadHeadlessParams,
    ThreadLiveParams,
)
from roder_core.server.protocol_audit import AUDIT_TAIL, AUDIT_VERIFY, AuditTailParams
from roder_core.server.protocol_auth import (
    AUTH_CODEX_LOGIN,
    AUTH_CODEX_LOGOUT,
    AUTH_CODEX_STATUS,
    AUTH_SUPERGROK_LOGIN,
    AUTH_SUPERGROK_LOGOUT,
    AUTH_SUPERGROK_STATUS,
    AuthLoginParams,
)
from roder_core.server.protocol_changes import (
    GIT_CHANGES_LIST,
    GIT_CHANGES_READ,
    HUNK_APPLY,
    HUNK_LIST,
    HUNK_READ,
    HUNK_ROLLBACK,
    WORKSPACE_CHANGES_LIST,
    GitChangesListParams,
    GitChangesReadParams,
    HunkParams,
    ThreadChangesParams,
)
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
    AgentsListParams,
    CommandsExpandParams,
    CommandsListParams,
    CommandsRunParams,
    ExitPlanParams,
    McpListParams,
    McpRestartParams,
    MemoryIdParams,
    MemoryListParams,
    MemoryProviderSetParams,
    MemoryQueryParams,
    MemoryRecallPreviewParams,
    MemorySaveParams,
    MemoryUpdateParams,
    ResolveUserInputParams,
    SubagentTraceReadParams,
    SubagentTracesParams,
)
from roder_core.server.protocol_host import (
    COMMAND_EXEC,
    FS_READ_DIRECTORY,
    FS_READ_FILE,
    TOOLS_CALL,
    CommandExecParams,
    FsReadDirectoryParams,
    FsReadFileParams,
    ToolsCallParams,
)
from roder_core.server.protocol_media import (
    MEDIA_ATTACH_TO_TURN,
    MEDIA_DELETE,
    MEDIA_LIST,
    MEDIA_READ,
    MEDIA_THUMBNAIL,
    MediaAttachParams,
    MediaIdParams,
    MediaListParams,
    MediaReadParams,
    MediaThumbnailParams,
)
from roder_core.server.protocol_plan_review import (
    PLAN_REVIEW_APPROVE,
    PLAN_REVIEW_COMMENT,
    PLAN_REVIEW_READ,
    PLAN_REVIEW_REJECT,
    PLAN_REVIEW_REWRITE,
    PlanReviewApproveParams,
    PlanReviewCommentParams,
    PlanReviewReadParams,
    PlanReviewRejectParams,
    PlanReviewRewriteParams,
)
from roder_core.server.protocol_runners import (
    RUNNERS_DELETE,
    RUNNERS_LIST,
    RUNNERS_PORTS,
    RUNNERS_SELECT,
    RUNNERS_SESSION,
    RUNNERS_SNAPSHOT,
    RunnersDeleteParams,
    RunnersPortsParams,
    RunnersSelectParams,
    RunnersSnapshotParams,
    RunnerTarget,
)
from roder_core.server.protocol_sessions import (
    THREAD_CUSTOM_SET,
    THREAD_DELETE,
    THREAD_EXPORT,
    THREAD_FIND,
    ThreadCustomSetParams,
    ThreadExportParams,
    ThreadFindParams,
    ThreadIdParams,
)
from roder_core.server.protocol_tasks import (
    TASKS_CANCEL,
    TASKS_GET,
    TASKS_KEEP,
    TASKS_LIST,
    TASKS_OUTPUT,
    TASKS_SUBMIT,
    TASKS_SUBSCRIBE,
    TaskIdParams,
    TasksKeepParams,
    TasksListParams,
    TasksOutputParams,
    TasksSubmitParams,
    TasksSubscribeParams,
)
from roder_core.server.protocol_teams import (
    TEAM_CLEANUP,
    TEAM_LIST,
    TEAM_MEMBER_FOCUS,
    TEAM_MEMBER_INTERRUPT,
    TEAM_MEMBER_MESSAGE,
    TEAM_MEMBER_START,
    TEAM_PANE_CLEANUP,
    TEAM_PANE_FOCUS,
    TEAM_READ,
    TEAM_START,
    TeamFocusParams,
    TeamIdParams,
    TeamListParams,
    TeamMemberMessageParams,
    TeamMemberParams,
    TeamMemberStartParams,
    TeamResult,
    TeamStartParams,
)
from roder_core.server.protocol_trust import TRUST_LIST
from roder_core.server.rpc_client import ConnectionLost, RpcClient, StdioRpcClient, WebSocketRpcClient
from roder_core.server.schema import load_methods
from roder_core.threads.events import AgentMessageDelta, ApprovalRequested, TurnCompleted, UserInputRequested
from tests.media.images import png_bytes
from tests.oauth_server import OAuthTestServer
from tests.server.support import RemoteServer, call, roder_command, trusted_workspace
from tests.server.workflow_calls import workflow_calls

TOKEN = "typed-client-token-0123"

#: One model call per entry, in the order the script below makes them.
SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [call("write_note", path="note.txt", text="first")]},  # "edit": asks for approval
    {"text": "wrote it"},
    {"tool_calls": [call("ask", question="which color?")]},  # "ask": user input
    {"text": "blue it is"},
    # The subagent's mock stream is its own and starts the script again: its write is refused
    # (explore runs in plan mode) and it answers "wrote it".
    {"tool_calls": [call("task", description="inspect", prompt="look around", subagent_type="explore")]},
    {"text": "the explorer says: fine"},
    {"tool_calls": [call("exit_plan", plan="1. do it")]},  # in plan mode
    {"text": "starting"},
    {"tool_calls": [call("exit_plan", plan="1. do it\n2. test it")]},  # reviewed: rewritten,
    {"tool_calls": [call("exit_plan", plan="1. test it\n2. do it")]},  # rejected,
    {"tool_calls": [call("exit_plan", plan="1. test it first\n2. do it")]},  # approved
    {"text": "starting again"},
    {"text": "word " * 20_000, "chunk_size": 5, "delay_ms": 20},  # long enough to steer and interrupt
]


def test_every_method_has_a_module_level_constant() -> None:
    """``client.call`` needs a spec object: each method's is importable by its upper-snake name."""
    methods = load_methods()  # imports every handler module, and with them each domain's protocol module
    modules = [module for name, module in sys.modules.items() if name.startswith("roder_core.server.protocol")]
    constants = {id(v): name for module in modules for name, v in vars(module).items() if isinstance(v, MethodSpec)}
    missing = [name for name, spec in methods.items() if id(spec) not in constants]
    assert not missing, f"give these specs a module-level constant in their protocol module: {missing}"


async def _plugin_calls(typed: Any, tmp_path: Path) -> None:
    """The marketplace and plugin methods on a one-plugin catalog."""
    from roder_core.server.protocol import NoParams as Empty
    from roder_core.server.protocol_plugins import (
        MARKETPLACES_ADD,
        MARKETPLACES_INSTALL_DEFAULT,
        MARKETPLACES_LIST,
        MARKETPLACES_PLUGIN,
        MARKETPLACES_REFRESH,
        MARKETPLACES_REMOVE,
        MARKETPLACES_SEARCH,
        PLUGINS_CONFIGURE,
        PLUGINS_DISABLE,
        PLUGINS_ENABLE,
        PLUGINS_IMPORT_CLAUDE,
        PLUGINS_INSTALL,
        PLUGINS_INSTALL_ALL_VARIANTS,
        PLUGINS_LIST_INSTALLED,
        PLUGINS_PREVIEW_IMPORT_CLAUDE,
        PLUGINS_PREVIEW_INSTALL,
        PLUGINS_READ,
        PLUGINS_UNINSTALL,
        ImportClaudeApplyParams,
        ImportClaudeParams,
        InstallAllParams,
        InstallDefaultParams,
        InstallParams,
        MarketplaceAddParams,
        MarketplaceNameParams,
        MarketplacePluginParams,
        MarketplaceRefreshParams,
        PluginOptionsParams,
        PluginParams,
        SearchParams,
        UninstallParams,
    )
    from tests.plugins.support import copy_official, marketplace

    official = copy_official(tmp_path / "catalogs", ["commit-commands"])
    team = marketplace(tmp_path / "catalogs" / "team", "team", [{"name": "notes", "source": "./notes"}])
    (team / "notes" / "commands").mkdir(parents=True)
    (team / "notes" / "commands" / "note.md").write_text("Take a note.")
    await typed(MARKETPLACES_INSTALL_DEFAULT, InstallDefaultParams(path=str(official)))
    await typed(MARKETPLACES_ADD, MarketplaceAddParams(source=str(team)))
    assert len((await typed(MARKETPLACES_LIST, Empty())).marketplaces) == 2
    assert (await typed(MARKETPLACES_SEARCH, SearchParams(query="notes"))).results[0].name == "notes"
    await typed(MARKETPLACES_PLUGIN, MarketplacePluginParams(plugin="notes@team"))
    preview = await typed(PLUGINS_PREVIEW_INSTALL, PluginParams(plugin="commit-commands"))
    await typed(PLUGINS_INSTALL, InstallParams(plugin="commit-commands", consent=preview.consent))
    await typed(PLUGINS_INSTALL_ALL_VARIANTS, InstallAllParams(name="notes"))
    assert len((await typed(PLUGINS_LIST_INSTALLED, Empty())).plugins) == 2
    assert not (await typed(PLUGINS_DISABLE, PluginParams(plugin="notes@team"))).plugin.enabled
    assert not (await typed(PLUGINS_READ, PluginParams(plugin="notes"))).plugin.enabled
    assert (await typed(PLUGINS_ENABLE, PluginOptionsParams(plugin="notes@team"))).plugin.enabled
    await typed(PLUGINS_CONFIGURE, PluginOptionsParams(plugin="commit-commands"))
    nothing = ImportClaudeParams(claude_dir=str(tmp_path / "no-claude-here"))
    plan = await typed(PLUGINS_PREVIEW_IMPORT_CLAUDE, nothing)
    apply = ImportClaudeApplyParams(claude_dir=plan.claude_dir, consent=plan.consent)
    assert (await typed(PLUGINS_IMPORT_CLAUDE, apply)).imported == []
    await typed(PLUGINS_UNINSTALL, UninstallParams(plugin="commit-commands"))
    await typed(MARKETPLACES_REFRESH, MarketplaceRefreshParams(name="team"))
    assert (await typed(MARKETPLACES_REMOVE, MarketplaceNameParams(name="team"))).uninstalled == ["notes@team"]


async def _next(events: Any, kind: type[Any], **match: Any) -> Any:
    async def find() -> Any:
        async for event in events:
            if isinstance(event, kind) and all(getattr(event, k) == v for k, v in match.items()):
                return event
        raise AssertionError("the notification stream ended")

    async with asyncio.timeout(60):
        return await find()


@pytest.fixture
def auth_server() -> Iterator[OAuthTestServer]:
    with OAuthTestServer(pending_polls=0) as server:
        yield server


async def test_every_method_is_reachable_by_call_with_its_typed_result(
    tmp_path: Path, roder_home: Path, auth_server: OAuthTestServer
) -> None:
    workspace, env = trusted_workspace(tmp_path, SCRIPT)
    env["RODER_HOME"] = str(roder_home)
    issuer = auth_server.issuer
    logins = "".join(f'[auth.{n}]\nissuer = "{issuer}"\nclient_id = "roder-test-client"\n' for n in ("codex", "supergrok"))
    (roder_home / "config.toml").write_text('[mcp.servers.broken]\ncommand = "/nonexistent/mcp-server"\n' + logins)
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    (workspace / "tracked.txt").write_text("tracked\n")
    client = LocalAppClient.start(StartSettings(cwd=workspace, provider="mock", trust=True, env=env, mode="ask"))
    called: set[str] = set()

    async def typed(spec: MethodSpec[Any, Any], params: ProtocolModel) -> Any:
        result = await client.call(spec, params)
        assert type(result) is spec.result, spec.name
        called.add(spec.name)
        return result

    async with client:
        events = client.subscribe()
        info = await typed(INITIALIZE, InitializeParams(client_info=ClientInfo(name="typed-test")))
        assert isinstance(info, InitializeResult)
        assert info.provider == "mock"
        for spec in (EXTENSIONS_LIST, PROVIDERS_LIST, SETTINGS_GET, MEMORY_PROVIDER_LIST):
            await typed(spec, NoParams())
        await typed(MODEL_LIST, ModelListParams())
        await typed(TOOLS_LIST, ToolsListParams())
        await typed(AGENTS_LIST, AgentsListParams())
        await typed(COMMANDS_LIST, CommandsListParams())
        await typed(COMMANDS_EXPAND, CommandsExpandParams(name="help"))
        await typed(SESSION_GET, SessionGetParams())
        await typed(TRUST_GET, TrustGetParams())
        await typed(TRUST_SET, TrustSetParams(trusted=True))
        assert [d.trusted for d in (await typed(TRUST_LIST, NoParams())).decisions] == [True]
        assert (await typed(AUDIT_VERIFY, NoParams())).ok
        assert (await typed(AUDIT_TAIL, AuditTailParams(limit=1))).lines[0].record["kind"] == "trust.set"
        await typed(SETTINGS_SET_WEB_SEARCH, SetWebSearchParams(mode="off"))
        await typed(SETTINGS_SET_DEFAULT_MODE, SetDefaultModeParams(mode=protocol.Mode.ASK))
        await typed(PROVIDERS_SELECT, ProvidersSelectParams(provider="mock"))
        await typed(PROVIDERS_CONFIGURE, ProvidersConfigureParams(provider="typed", base_url="http://127.0.0.1:9/v1"))
        await typed(MCP_LIST, McpListParams())
        for login, status, logout in (
            (AUTH_CODEX_LOGIN, AUTH_CODEX_STATUS, AUTH_CODEX_LOGOUT),
            (AUTH_SUPERGROK_LOGIN, AUTH_SUPERGROK_STATUS, AUTH_SUPERGROK_LOGOUT),
        ):
            assert (await typed(login, AuthLoginParams(flow="device"))).user_code == auth_server.state.user_code
            assert (await typed(status, NoParams())).configured
            await typed(logout, NoParams())
        assert (await typed(MCP_RESTART, McpRestartParams(server="broken"))).server.status == "failed"

        # An edit that asks: the approval is answered through the typed call.
        thread = (await typed(THREAD_START, ThreadStartParams(title="typed"))).thread
        turn = (await typed(TURN_START, TurnStartParams(thread_id=thread.id, prompt="edit"))).turn
        asked = await _next(events, ApprovalRequested, thread_id=thread.id)
        approve = ResolveApprovalParams(approval_id=asked.request.approval_id, decision="allow_once")
        assert (await typed(SESSION_RESOLVE_APPROVAL, approve)).resolved
        await _next(events, TurnCompleted, thread_id=thread.id)
        assert (workspace / "note.txt").read_text() == "first"

        # A question for the user.
        await typed(TURN_START, TurnStartParams(thread_id=thread.id, prompt="ask"))
        question = await _next(events, UserInputRequested, thread_id=thread.id)
        answer = ResolveUserInputParams(request_id=question.request_id, answers={"choice": "blue"})
        assert (await typed(SESSION_RESOLVE_USER_INPUT, answer)).resolved
        await _next(events, TurnCompleted, thread_id=thread.id)

        # A subagent, whose trace is listed and read.
        await typed(SESSION_SET_MODE, SessionSetModeParams(mode=protocol.Mode.BYPASS))
        await typed(TURN_START, TurnStartParams(thread_id=thread.id, prompt="delegate"))
        delegated = (await _next(events, TurnCompleted, thread_id=thread.id)).turn
        traces = (await typed(TURN_SUBAGENT_TRACES_LIST, SubagentTracesParams(thread_id=thread.id))).traces
        assert [t.agent for t in traces] == ["explore"]
        read = SubagentTraceReadParams(thread_id=thread.id, trace_id=traces[0].trace_id)
        assert (await typed(TURN_SUBAGENT_TRACE_READ, read)).trace.trace_id == traces[0].trace_id
        assert delegated.status == "completed"

        # A plan approved into ask mode.
        await typed(SESSION_SET_MODE, SessionSetModeParams(mode=protocol.Mode.PLAN))
        await typed(TURN_START, TurnStartParams(thread_id=thread.id, prompt="plan"))
        review = await _next(events, ApprovalRequested, thread_id=thread.id)
        await typed(SESSION_EXIT_PLAN, ExitPlanParams(request_id=review.request.approval_id, approved=True, mode="ask"))
        await _next(events, TurnCompleted, thread_id=thread.id)

        # A plan reviewed: read, commented on, rewritten, rejected, and the next one approved.
        await typed(SESSION_SET_MODE, SessionSetModeParams(mode=protocol.Mode.PLAN))
        await typed(TURN_START, TurnStartParams(thread_id=thread.id, prompt="plan again"))
        review_id = (await _next(events, ApprovalRequested, thread_id=thread.id)).request.arguments["reviewId"]
        assert (await typed(PLAN_REVIEW_READ, PlanReviewReadParams(review_id=review_id))).review.current.version == 1
        comment = PlanReviewCommentParams(review_id=review_id, text="test first", line=2)
        assert (await typed(PLAN_REVIEW_COMMENT, comment)).comment.quote == "2. test it"
        await typed(PLAN_REVIEW_REWRITE, PlanReviewRewriteParams(review_id=review_id))
        await _next(events, ApprovalRequested, thread_id=thread.id)
        rejected = await typed(PLAN_REVIEW_REJECT, PlanReviewRejectParams(review_id=review_id, reason="still vague"))
        assert rejected.review.current.version == 2
        last = (await _next(events, ApprovalRequested, thread_id=thread.id)).request.arguments["reviewId"]
        approve_plan = PlanReviewApproveParams(review_id=last, mode="ask")
        assert (await typed(PLAN_REVIEW_APPROVE, approve_plan)).review.next_mode == "ask"
        await _next(events, TurnCompleted, thread_id=thread.id)

        # A long answer: steered, the steer taken back, then interrupted.
        long_turn = (await typed(TURN_START, TurnStartParams(thread_id=thread.id, prompt="long"))).turn
        await _next(events, AgentMessageDelta, thread_id=thread.id)
        steer = TurnSteerParams(thread_id=thread.id, expected_turn_id=long_turn.id, prompt="shorter please")
        steered = await typed(TURN_STEER, steer)
        taken = await typed(TURN_STEER_CANCEL, TurnSteerCancelParams(thread_id=thread.id, item_id=steered.item_id))
        assert taken.cancelled
        assert taken.text == "shorter please"
        assert (await typed(TURN_INTERRUPT, TurnInterruptParams(thread_id=thread.id, turn_id=long_turn.id))).interrupted
        assert (await _next(events, TurnCompleted, thread_id=thread.id)).turn.status == "interrupted"

        # Reading, forking and closing threads.
        assert (await typed(THREAD_LIST, ThreadListParams(cwd=str(workspace)))).threads
        full = (await typed(THREAD_READ, ThreadReadParams(thread_id=thread.id, include_turns=True))).thread
        assert full.turns[0].id == turn.id
        fork = (await typed(THREAD_FORK, ThreadForkParams(thread_id=thread.id, turn_id=turn.id))).thread
        assert fork.parent is not None
        assert fork.parent.thread_id == thread.id
        assert (await typed(THREAD_CLOSE, ThreadCloseParams(thread_id=fork.id))).closed
        assert (await typed(THREAD_RESUME, ThreadResumeParams(thread_id=fork.id))).thread.id == fork.id
        assert (await typed(THREAD_FIND, ThreadFindParams(query=fork.id[4:14]))).thread_id == fork.id
        assert (await typed(THREAD_EXPORT, ThreadExportParams(thread_id=thread.id))).text.startswith("# ")
        await typed(THREAD_CUSTOM_SET, ThreadCustomSetParams(thread_id=fork.id, namespace="typed.test", data={"n": 1}))
        assert (await typed(THREAD_DELETE, ThreadIdParams(thread_id=fork.id))).thread_id == fork.id

        # The edit's hunk: listed, read, rolled back and applied again.
        changes = ThreadChangesParams(thread_id=thread.id, turn_id=turn.id)
        assert [f.path for f in (await typed(WORKSPACE_CHANGES_LIST, changes)).files] == [str(workspace / "note.txt")]
        [hunk] = (await typed(HUNK_LIST, changes)).hunks
        which = HunkParams(thread_id=thread.id, hunk_id=hunk.hunk_id)
        assert (await typed(HUNK_READ, which)).hunk.hunk_id == hunk.hunk_id
        await typed(HUNK_ROLLBACK, which)
        assert not (workspace / "note.txt").exists()
        await typed(HUNK_APPLY, which)
        assert (workspace / "note.txt").read_text().splitlines() == ["first"]

        # Host methods, git changes, commands.
        files = (await typed(GIT_CHANGES_LIST, GitChangesListParams(workspace=str(workspace)))).files
        assert {"tracked.txt", "note.txt"} <= {f.path for f in files}
        await typed(GIT_CHANGES_READ, GitChangesReadParams(workspace=str(workspace), path="tracked.txt"))
        assert (await typed(FS_READ_FILE, FsReadFileParams(path=str(workspace / "tracked.txt")))).size == len("tracked\n")
        await typed(FS_READ_DIRECTORY, FsReadDirectoryParams(path=str(workspace)))
        ran = await typed(COMMAND_EXEC, CommandExecParams(command=["echo", "typed"], cwd=str(workspace)))
        assert (ran.exit_code, ran.stdout) == (0, "typed\n")
        assert (await typed(TOOLS_CALL, ToolsCallParams(tool_name="peek", arguments={"x": "y"}))).text == "peeked y"
        assert (await typed(COMMANDS_RUN, CommandsRunParams(thread_id=thread.id, name="mode", arguments="ask"))).kind == "done"

        # Memory and tasks.
        saved = (await typed(MEMORY_SAVE, MemorySaveParams(text="release with make publish"))).memory
        await typed(MEMORY_READ, MemoryIdParams(id=saved.id))
        await typed(MEMORY_UPDATE, MemoryUpdateParams(id=saved.id, text="release with make ship"))
        assert [m.id for m in (await typed(MEMORY_QUERY, MemoryQueryParams(text="release"))).memories] == [saved.id]
        await typed(MEMORY_LIST, MemoryListParams())
        await typed(MEMORY_RECALL_PREVIEW, MemoryRecallPreviewParams(text="how do we release?"))
        provider = (await client.call(MEMORY_PROVIDER_LIST)).providers[0].id
        await typed(MEMORY_PROVIDER_SET, MemoryProviderSetParams(provider=provider))
        await typed(MEMORY_DELETE, MemoryIdParams(id=saved.id))
        await typed(TASKS_SUBSCRIBE, TasksSubscribeParams())
        task = (await typed(TASKS_SUBMIT, TasksSubmitParams(executor_id="echo", params={"sleep": 30}))).task
        await typed(TASKS_GET, TaskIdParams(task_id=task.id))
        assert task.id in [t.id for t in (await typed(TASKS_LIST, TasksListParams())).tasks]
        assert (await typed(TASKS_KEEP, TasksKeepParams(task_id=task.id))).task.keep
        assert (await typed(TASKS_OUTPUT, TasksOutputParams(task_id=task.id))).next == 0
        assert (await typed(TASKS_CANCEL, TaskIdParams(task_id=task.id))).task.id == task.id

        # Runners: the thread runs locally; a snapshot of the workspace is taken and listed.
        assert "local" in [r.name for r in (await typed(RUNNERS_LIST, NoParams())).runners]
        assert (await typed(RUNNERS_SELECT, RunnersSelectParams(thread_id=thread.id, runner="local"))).runner == "local"
        assert (await typed(RUNNERS_SESSION, RunnerTarget(thread_id=thread.id))).thread_runner == "local"
        snap = (await typed(RUNNERS_SNAPSHOT, RunnersSnapshotParams(thread_id=thread.id))).snapshot
        assert snap is not None and snap.files >= 1
        await typed(RUNNERS_PORTS, RunnersPortsParams(thread_id=thread.id))
        assert (await typed(RUNNERS_DELETE, RunnersDeleteParams(thread_id=thread.id))).runner == "local"
        # Media: an image attached to the thread's next turn, listed, read, previewed, deleted.
        pixel = base64.b64encode(png_bytes(4, 3)).decode("ascii")
        media = (await typed(MEDIA_ATTACH_TO_TURN, MediaAttachParams(thread_id=thread.id, data_base64=pixel))).media
        assert [m.id for m in (await typed(MEDIA_LIST, MediaListParams(thread_id=thread.id))).media] == [media.id]
        assert (await typed(MEDIA_READ, MediaReadParams(thread_id=thread.id, media_id=media.id))).data_base64 == pixel
        assert (await typed(MEDIA_THUMBNAIL, MediaThumbnailParams(thread_id=thread.id, media_id=media.id))).width == 4
        assert (await typed(MEDIA_DELETE, MediaIdParams(thread_id=thread.id, media_id=media.id))).deleted
        await _plugin_calls(typed, tmp_path)
        await workflow_calls(called, tmp_path, env)
        # Attaching clients (issue 19): live state, headless threads, the palette, the host.
        live = await typed(THREAD_LIVE, ThreadLiveParams(thread_id=thread.id))
        assert live.thread_id == thread.id and live.turn_id is None
        await typed(THREAD_HEADLESS, ThreadHeadlessParams(thread_id=thread.id, headless=False))
        rows = (await typed(PALETTE_COMMANDS, PaletteCommandsParams(state={"mode": "ask"}))).commands
        assert any(r.method == "session/set_mode" for r in rows)
        assert (await typed(HOST_STATUS, NoParams())).socket is None  # not a background host
        with pytest.raises(RpcError) as refused:
            await client.call(HOST_STOP)
        assert refused.value.code == -32004
        called.add(HOST_STOP.name)
        # A team led by the thread (its script is used up: the lead only acknowledges).
        await typed(SESSION_SET_MODE, SessionSetModeParams(mode=protocol.Mode.BYPASS))
        team = (await typed(TEAM_START, TeamStartParams(lead_thread_id=thread.id, members=[{"name": "m1"}]))).team
        which_team = TeamIdParams(team_id=team.team_id)
        await typed(TEAM_MEMBER_START, TeamMemberStartParams(team_id=team.team_id, member={"name": "m2"}))
        message = TeamMemberMessageParams(team_id=team.team_id, name="m1", text="say hi")
        assert (await typed(TEAM_MEMBER_MESSAGE, message)).message.delivery == {"m1": "turn"}
        await typed(TEAM_MEMBER_INTERRUPT, TeamMemberParams(team_id=team.team_id, name="m1"))
        assert (await typed(TEAM_MEMBER_FOCUS, TeamFocusParams(team_id=team.team_id, name="m2"))).team.focused == "m2"
        assert [m.name for m in (await typed(TEAM_READ, which_team)).team.members] == ["m1", "m2"]
        assert team.team_id in [t.team_id for t in (await typed(TEAM_LIST, TeamListParams())).teams]

        # The pane methods are a client's own: the server refuses them, a client serves them.
        with pytest.raises(RpcError) as refused:
            await client.call(TEAM_PANE_FOCUS, TeamFocusParams(team_id=team.team_id, name="m1"))
        assert refused.value.code == METHOD_NOT_FOUND
        assert refused.value.data["clientConcern"] is True
        panes: list[str] = []

        async def pane_focus(params: TeamFocusParams) -> TeamResult:
            panes.append(f"focus {params.name}")
            return TeamResult(team=team)

        async def pane_cleanup(params: TeamIdParams) -> TeamResult:
            panes.append("cleanup")
            return TeamResult(team=team)

        client.serve_locally("team/pane/focus", pane_focus)
        client.serve_locally("team/pane/cleanup", pane_cleanup)
        await typed(TEAM_PANE_FOCUS, TeamFocusParams(team_id=team.team_id, name="m1"))
        await typed(TEAM_PANE_CLEANUP, which_team)
        assert panes == ["focus m1", "cleanup"]
        assert (await typed(TEAM_CLEANUP, which_team)).team.status == "cleanedUp"
        events.close()

    unreached = set(METHODS) - called
    assert not unreached, f"add a typed call of these methods to this test: {sorted(unreached)}"


async def test_in_process_call_errors_and_untyped_request(tmp_path: Path) -> None:
    client = LocalAppClient.start(StartSettings(cwd=tmp_path, provider="mock", env=dict(os.environ)))
    async with client:
        with pytest.raises(RpcError) as raised:
            await client.call(THREAD_READ, ThreadReadParams(thread_id="thr_missing"))
        assert raised.value.code == INVALID_PARAMS
        # The untyped path still validates wire-shaped params into the same typed result.
        thread = (await client.call(THREAD_START, ThreadStartParams())).thread
        result = await client.request("thread/read", {"threadId": thread.id})
        assert isinstance(result, ThreadResult)
        assert result.thread.id == thread.id


async def _drive(client: RpcClient, workspace: Path) -> None:
    """The same typed calls against a server in another process."""
    info = await client.call(INITIALIZE, InitializeParams(client_info=ClientInfo(name="typed-remote")))
    assert isinstance(info, InitializeResult)
    assert info.cwd == str(workspace)
    assert "mock" in [p.id for p in (await client.call(PROVIDERS_LIST)).providers]
    thread = (await client.call(THREAD_START, ThreadStartParams())).thread
    turn = (await client.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="hello"))).turn
    async with asyncio.timeout(60):
        done = await client.next_notification("turn/completed")
    assert isinstance(done, TurnCompleted)
    assert done.turn.id == turn.id
    assert done.turn.status == "completed"
    read = (await client.call(THREAD_READ, ThreadReadParams(thread_id=thread.id, include_turns=True))).thread
    assert [t.id for t in read.turns] == [turn.id]
    assert read.turns[0].items[-1].type == "agentMessage"
    with pytest.raises(RpcError) as missing:
        await client.call(THREAD_READ, ThreadReadParams(thread_id="thr_missing"))
    assert missing.value.code == INVALID_PARAMS
    with pytest.raises(RpcError) as unknown:
        await client.request("auth/nobody/login", {})
    assert unknown.value.code == METHOD_NOT_FOUND
    with pytest.raises(RpcError) as unconfigured:
        await client.request("auth/supergrok/login", {})
    assert unconfigured.value.code == INVALID_PARAMS
    assert "[auth.supergrok]" in unconfigured.value.message


@pytest.mark.e2e
async def test_call_over_real_stdio_pipes(tmp_path: Path) -> None:
    workspace, env = trusted_workspace(tmp_path, [{"text": "hello over pipes"}])
    argv = roder_command("app-server", "--provider", "mock", "--trust")
    client = await StdioRpcClient.spawn(argv, cwd=str(workspace), env=env)
    async with client:
        await _drive(client, workspace)
    assert client.process.returncode == 0
    with pytest.raises(ConnectionLost):
        await client.call(SESSION_GET, SessionGetParams())


@pytest.mark.e2e
async def test_call_over_a_real_websocket(tmp_path: Path) -> None:
    workspace, env = trusted_workspace(tmp_path, [{"text": "hello over a socket"}])
    env["RODER_TEST_TOKEN"] = TOKEN
    server = await RemoteServer.start(workspace, env, "--auth-token", "env:RODER_TEST_TOKEN", "--print-qr=false")
    try:
        client = await WebSocketRpcClient.connect(server.url, TOKEN)
        async with client:
            await _drive(client, workspace)
            info = await client.call(INITIALIZE, InitializeParams())
            assert info.remote is not None
            assert info.remote.subprotocol == "roder.remote.v1"
    finally:
        await server.stop()
