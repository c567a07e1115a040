"""The full-screen Roder app.

The app drives the runtime only through a control-plane client (``AppClient``): in process
(``LocalAppClient``) or attached to a host (``RemoteAppClient``, ``roder attach``); every action
here is a method a remote client could call too. Runtime work never runs on the
event loop's critical path: the first frame is painted before the runtime is even imported, and
stream deltas are coalesced to at most ~30 repaints a second (over SSH 5, fewer when a CPU budget
says so: ``roder_tui.remote``).
"""

from __future__ import annotations

import os

from roder_tui.remote import stream_budget, stream_fps, tune_for_link

REMOTE = tune_for_link()

import argparse  # noqa: E402
import asyncio  # noqa: E402
import base64  # noqa: E402
import contextlib  # noqa: E402
import gc  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import time  # noqa: E402
from collections.abc import Awaitable, Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

from textual import on, work  # noqa: E402
from textual.app import App, ComposeResult  # noqa: E402
from textual.containers import Horizontal, Vertical  # noqa: E402
from textual.widgets import Static  # noqa: E402

from roder_core import __version__  # noqa: E402
from roder_core.modes import Mode  # noqa: E402
from roder_tui import listings  # noqa: E402
from roder_tui.coalesce import DeltaCoalescer  # noqa: E402
from roder_tui.home_config import configured, git_branch, roder_home_paths  # noqa: E402
from roder_tui.keymap import app_bindings  # noqa: E402
from roder_tui.questions import QuestionQueue  # noqa: E402
from roder_tui.tasks_view import TasksView  # noqa: E402
from roder_tui.theming import (  # noqa: E402
    CodeStyle,
    RoderTheme,
    ThemeSet,
    add_plugin_themes,
    load_themes,
    rich_styles,
    save_theme_choice,
)
from roder_tui.widgets.media import PendingMedia  # noqa: E402
from roder_tui.widgets.prompt import PromptBar, PromptHistory, PromptInput, attachments_in  # noqa: E402
from roder_tui.widgets.queued import QueuedSteers  # noqa: E402
from roder_tui.widgets.sidebar import Sidebar  # noqa: E402
from roder_tui.widgets.status_bar import StatusBar  # noqa: E402
from roder_tui.widgets.team_panes import TeamPanes, WorkArea  # noqa: E402
from roder_tui.widgets.transcript import Transcript  # noqa: E402
from roder_tui.workflows_view import WorkflowsView  # noqa: E402

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel
    from textual.screen import Screen

    from roder_core.ir import ApprovalDecision, ApprovalRequest, Thread, UserMessageItem
    from roder_core.kernel.services import PaletteCommand
    from roder_core.server.app_client import AppClient
    from roder_core.server.protocol_attach import ThreadLive
    from roder_core.server.protocol_features import CommandInfoModel
    from roder_tui import rewind as rewind_mod
    from roder_tui.team_control import TeamControl

log = logging.getLogger(__name__)

MODES = tuple(Mode)
PLAN_TOOL = "exit_plan"
SIDEBAR_MIN_WIDTH = 80
CTRL_C_WINDOW = 2.0
ESC_ESC_WINDOW = 0.8
SIDEBAR_STEP = 4
SIDEBAR_MIN_CELLS = 16
#: Turns a thread opens with; older ones are fetched when the transcript is scrolled back to them.
RECENT_TURNS = 30
#: The name the command palette's screen is installed under.
PALETTE_SCREEN = "command-palette"
HELP_SCREEN = "help"
#: Makes the app's control-plane client: in process by default, a host's client when attached.
ClientFactory = Callable[[], "AppClient | Awaitable[AppClient]"]


def _preimport() -> None:
    """Import the runtime and the extensions on a thread while the first frame paints."""
    import roder_core.server.client  # noqa: F401
    from roder_core.kernel.distribution import discovered_factories

    discovered_factories()


def _preimport_renderers() -> None:
    """The message renderers (Markdown, Pygments), imported on a thread once the in-process
    runtime is idle (where ``_preimport`` imported them before), so the first streamed answer does
    not wait for them and start-up does not share a core with them."""
    import roder_tui.widgets.messages  # noqa: F401


class RoderApp(App[int]):
    TITLE = "Roder"
    BINDINGS = app_bindings()
    #: Roder's palette (screens/command_palette.py) replaces Textual's: it is built once, not per open.
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    Screen { layout: vertical; }
    #body { height: 1fr; }
    #chat { width: 1fr; height: 1fr; }
    #team-bar { height: 1; display: none; padding: 0 1; background: $panel; }
    /* Toasts at the top right, in the upper half: at the bottom they covered the prompt and the
       completion list. As wide as the screen allows (half of 40 columns wrapped a toast into a
       column that reached the prompt). */
    ToastRack { dock: top; align: right top; margin-bottom: 0; max-height: 50%; }
    Toast { max-width: 100%; padding: 0 1; }
    """

    def __init__(
        self,
        args: argparse.Namespace | None = None,
        client_factory: ClientFactory | None = None,
        cwd: Path | None = None,
        *,
        files_remote: bool = False,
    ) -> None:
        from roder_tui.terminal_text import guard_textual

        guard_textual()  # every character drawn passes the terminal-text sanitizer
        super().__init__()
        self.args = args or argparse.Namespace()
        #: The workspace: the host's folder when attached (it may not exist on this machine).
        self.cwd = (cwd or Path.cwd()).resolve() if not files_remote else (cwd or Path.cwd())
        #: Attached from another machine: the workspace's files are reached through the host.
        self.files_remote = files_remote
        self._client_factory = client_factory
        self.client: AppClient | None = None
        self.config_dir, self.data_dir, themes_dir = roder_home_paths()
        self.config_data = configured(self.config_dir)
        self.themes: ThemeSet = load_themes(themes_dir)
        self.roder_theme: RoderTheme = self.themes.get(str(self.config_data.get("theme") or ""))
        self.thread_id: str | None = None
        self.turn_id: str | None = None
        self.turn_started = 0.0
        self.slash_commands: list[CommandInfoModel] = []
        self.sidebar_wanted = True
        self.ready = asyncio.Event()
        self.exit_message: str | None = None
        self._approvals: list[ApprovalRequest] = []
        self._approval_open: str | None = None
        self.questions = QuestionQueue(self, self._client)
        self.tasks_view = TasksView(self, self._client)
        self._teams: TeamControl | None = None
        self._left_running: set[str] = set()
        #: Threads shown here and the child threads (subagents, workflow steps) they started: whose
        #: approvals we answer.
        self._family: set[str] = set()
        self.workflows_view = WorkflowsView(self, self._client, self._family, str(self.cwd))
        self._ctrl_c_at = 0.0
        self._esc_at = 0.0
        #: What /undo reverted, newest last (/redo re-applies it); a new prompt clears it.
        self._redo: list[rewind_mod.Undone] = []
        #: ``!cmd`` cards per thread, with the id of the item each followed (see run_shell).
        self._shell_cards: dict[str, list[tuple[str | None, Any]]] = {}
        self._elapsed_timer: Any = None
        self._pushed_theme = False
        self.coalescer = DeltaCoalescer(self._flush_deltas, stream_fps(REMOTE), stream_budget(REMOTE))
        for theme in self.themes.themes.values():
            self.register_theme(theme.to_textual())
        # Chosen before the first stylesheet parse: switching later re-parses all CSS (~40 ms).
        self.apply_theme(self.roder_theme, save=False)
        #: What the user's [keys] remaps take over or cannot do (shown once the app is up).
        self.keymap_notes: list[str] = []
        keymap = self.config_data.get("keys")
        if isinstance(keymap, dict):
            self._apply_keymap({str(k): str(v) for k, v in keymap.items()})

    def _apply_keymap(self, keymap: dict[str, str]) -> None:
        """The user's remaps, each winning everywhere: a remapped key is a priority binding, so a
        focused widget that binds the same key (the prompt's f6, ctrl+e...) does not swallow it;
        a key that types a character stays the prompt's while typing."""
        from dataclasses import replace

        from roder_tui.keymap import keymap_notes, typed

        self.set_keymap(keymap)
        wins = {bid for bid, keys in keymap.items() if not any(typed(k.strip()) for k in keys.split(","))}
        table = self._bindings.key_to_bindings
        for key, bindings in table.items():
            table[key] = [replace(b, priority=True) if b.id in wins else b for b in bindings]
        self.keymap_notes = keymap_notes(keymap)

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """A toast shows its text as it is: messages quote data (a server's warning, an error
        naming a file), and as markup, ``[@click=...]`` in them would be a button running an
        app action and ``[black on black]`` would hide text."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        self.sidebar = Sidebar(id="sidebar")
        self.transcript = Transcript(id="transcript")
        self.prompt_bar = PromptBar(PromptHistory(self.data_dir / "prompt-history.json"), self.cwd)
        self.status_bar = StatusBar(id="status")
        self.queued = QueuedSteers(id="queued")
        self.pending_media = PendingMedia(id="pending-media")
        self.team_panes = TeamPanes(id="team-panes")
        self.team_bar = Static("", id="team-bar")
        self.work = WorkArea(self.transcript, self.team_panes, id="work")
        self.prompt_bar.input.has_queued = lambda: bool(self.queued.queued)
        if self.files_remote:
            self.prompt_bar.read_directory = self._read_host_directory
        with Horizontal(id="body"):
            yield self.sidebar
            with Vertical(id="chat"):
                yield self.work
                yield self.team_bar
                yield self.queued
                yield self.pending_media
                yield self.prompt_bar
        yield self.status_bar

    def on_mount(self) -> None:
        if self._driver is not None:  # send only the parts of each frame the terminal does not show yet
            from roder_tui.screen_diff import ScreenDiff

            self.screen_diff = ScreenDiff(self._driver.write, lambda: self.size)
            # Textual has no hook for what its driver writes: the diff stands in for the method.
            self._driver.write = self.screen_diff.write  # type: ignore[method-assign]
        for problem in self.themes.errors:
            self.notify(problem, title="theme skipped", severity="warning", timeout=8)
        if self.keymap_notes:
            self.notify("\n".join(self.keymap_notes), title="keys", severity="warning", timeout=12)
        self.status_bar.update_state(cwd=str(self.cwd), git_branch=git_branch(self.cwd), activity="starting")
        self.prompt_bar.input.focus()
        self._layout_for_width(self.size.width)
        # The runtime starts once the first frame is on the screen: nothing of it delays that frame.
        self.call_after_refresh(self._boot)
        self.call_after_refresh(self._build_modals)

    def on_resize(self, event: Any) -> None:
        self._layout_for_width(event.size.width)

    def _layout_for_width(self, width: int) -> None:
        self.sidebar.display = self.sidebar_wanted and width >= SIDEBAR_MIN_WIDTH

    def arrange_team(self) -> None:
        """After a team change: the panes laid out again for the work area's width (its own
        resizes do that for every resize and sidebar toggle), and the team bar."""
        self.work.arrange_panes()
        self.team_bar.display = self.team_panes.team is not None
        if self.team_panes.team is not None:
            self.team_bar.update(self.team_panes.summary())

    # ------------------------------------------------------------------ startup

    @work(exclusive=True, group="boot")
    async def _boot(self) -> None:
        from roder_core.errors import RoderError
        from roder_core.kernel.registry import RegistryError
        from roder_core.server.errors import RpcError
        from roder_core.server.protocol import INITIALIZE, ClientInfo, InitializeParams
        from roder_core.settings.config import ConfigError

        try:
            if self._client_factory is None:
                await asyncio.to_thread(_preimport)
                from roder_core.runtime.bootstrap import settings_from_args
                from roder_core.server.client import LocalAppClient

                settings = settings_from_args(self.args, interactive=True)
                settings.cwd = self.cwd
                self.client = LocalAppClient.start(settings)
            else:
                made = self._client_factory()
                self.client = await made if inspect.isawaitable(made) else made
            client = self.client
            client.serve_locally("team/pane/focus", self.teams.pane_focus)
            client.serve_locally("team/pane/cleanup", self.teams.pane_cleanup)
            # No method table: listing it imports every handler module of the server, which the
            # app does not read (the others load on their first call).
            hello = InitializeParams(client_info=ClientInfo(name="roder-tui", version=__version__), include_method_groups=False)
            info = await client.call(INITIALIZE, hello)
        except (RoderError, RegistryError, ConfigError, RpcError, OSError) as exc:
            self.exit_message = f"roder: {exc}"
            self.exit(2)
            return
        for warning in info.warnings:
            self.notify(warning, severity="warning", timeout=8)
        # Segments render on this side; palette rows come from the host (palette/commands).
        self.status_bar.set_segments(await asyncio.to_thread(client.status_segments, info.cwd))
        self.status_bar.update_state(provider=info.provider, model=info.model, mode=info.mode, activity="idle")
        # What the prompt does not need comes after "idle": the renderers of answers, plugins'
        # themes, the sandbox probe's verdict, commands, MCP completions, the thread list.
        renderers = asyncio.create_task(asyncio.to_thread(_preimport_renderers)) if self._client_factory is None else None
        await self._add_plugin_themes()
        await self._show_sandbox()
        if REMOTE:
            from roder_tui.widgets.messages import ToolCardView

            ToolCardView.animate_spinner = False
        await self._load_commands()
        self.run_worker(self._load_mcp_completions(), group="mcp-completions")
        self.run_worker(self._pump(), exclusive=True, group="pump")
        # Attached, the host's provider is the host's business: no first-run screen on every attach.
        if info.fell_back_to_mock and not getattr(self.args, "provider", None) and not client.shared:
            from roder_tui.screens.first_run import FirstRunScreen

            choice = await self.push_screen_wait(FirstRunScreen(str(self.config_dir / "config.toml")))
            if choice == "quit":
                self.exit(0)
                return
        if renderers is not None:
            await renderers
        await self._open_initial_thread()
        # Everything alive now lives as long as the app: keep it out of the cyclic collector's
        # full passes, which otherwise stall streaming for 100+ ms on a large heap; and make full
        # passes ten times rarer (young garbage is still collected as often as ever).
        gc.freeze()
        gen0, gen1, _gen2 = gc.get_threshold()
        gc.set_threshold(gen0, gen1, 100)
        self.ready.set()
        prompt = " ".join(getattr(self.args, "prompt", None) or []).strip()
        if prompt:
            await self.send(prompt)

    async def _show_sandbox(self) -> None:
        """The sandbox level commands really get, as the server probed it at startup."""
        from roder_core.server.protocol import SESSION_GET, SessionGetParams

        sandbox = (await self._client().call(SESSION_GET, SessionGetParams())).sandbox
        level = f"{sandbox.requested} unavailable" if sandbox.blocked else sandbox.effective
        self.status_bar.update_state(sandbox=level)

    async def _open_initial_thread(self) -> None:
        from roder_core.server.protocol import THREAD_LIST, ThreadListParams

        client = self._client()
        resume = getattr(self.args, "resume", None)
        if resume and await self.switch_thread(resume):
            return
        if getattr(self.args, "attach", False) and resume is None and await self._open_where_needed():
            return
        if resume == "":
            threads = (await client.call(THREAD_LIST, ThreadListParams(cwd=str(self.cwd)))).threads
            if threads:
                from roder_tui.screens.resume import ResumePicker

                chosen = await self.push_screen_wait(ResumePicker(threads))
                if chosen and await self.switch_thread(chosen):
                    return
            else:
                self.notify("No earlier threads in this folder; starting a new one.")
        elif getattr(self.args, "continue_last", False):
            threads = (await client.call(THREAD_LIST, ThreadListParams(cwd=str(self.cwd), limit=1))).threads
            if threads and await self.switch_thread(threads[0].id):
                return
            if not threads:
                self.notify("No earlier thread in this folder to continue; starting a new one.")
        await self.new_thread()

    async def _open_where_needed(self) -> bool:
        """Attaching: open the thread that waits for a person (a pending approval), else one
        whose turn runs, else the workspace's latest; False when the host has none."""
        client = self._client()
        from roder_core.server.protocol import SESSION_GET, THREAD_LIST, SessionGetParams, ThreadListParams

        session = await client.call(SESSION_GET, SessionGetParams())
        wanted = [r.thread_id for r in session.pending_approvals] + list(session.active_turns)
        if not wanted:
            wanted = [t.id for t in (await client.call(THREAD_LIST, ThreadListParams(cwd=str(self.cwd), limit=1))).threads]
        return bool(wanted) and await self.switch_thread(wanted[0])

    async def _load_commands(self) -> None:
        from roder_core.server.errors import RpcError
        from roder_core.server.protocol_features import COMMANDS_LIST, CommandsListParams

        try:
            self.slash_commands = (await self._client().call(COMMANDS_LIST, CommandsListParams())).commands
        except RpcError:
            self.slash_commands = []
        self.prompt_bar.set_commands([(c.name, c.argument_hint, c.description) for c in self.slash_commands])

    async def _load_mcp_completions(self) -> None:
        """Once MCP servers still connecting have settled, their prompts join ``/`` completion
        and their resources ``@`` completion (as ``@server:uri``)."""
        from roder_core.server.errors import RpcError
        from roder_core.server.protocol_features import MCP_LIST, McpListParams

        try:
            servers = (await self._client().call(MCP_LIST, McpListParams(wait_ms=10_000))).servers
        except RpcError:
            return
        self.prompt_bar.set_mentions([ref.removeprefix("@") for s in servers for ref in s.resources])
        if any(s.prompts for s in servers):
            await self._load_commands()

    def _on_notify(self, event: Any) -> None:
        """One toast per title: a newer one replaces the older (a provider's retries, each a
        toast, stacked down over the prompt on a small terminal)."""
        title = event.notification.title
        if title:
            for older in [n for n in self._notifications if n.title == title]:
                self._unnotify(older, refresh=False)
        super()._on_notify(event)

    def on_worker_state_changed(self, event: Any) -> None:
        """A background action failed unexpectedly: say so instead of dying or staying silent."""
        from textual.worker import WorkerState

        if event.state is WorkerState.ERROR and event.worker.error is not None:
            error = event.worker.error
            log.error("background action %s failed", event.worker.name, exc_info=error)
            self.notify(f"{type(error).__name__}: {error}", title="something failed", severity="error", timeout=10)

    def _client(self) -> AppClient:
        if self.client is None:
            raise RuntimeError("the runtime is still starting")
        return self.client

    # ------------------------------------------------------------------ events

    async def _pump(self) -> None:
        """Consume runtime notifications. Deltas only append to buffers here; rendering happens
        in coalesced flushes, so a flood of tokens never starves input handling."""
        from roder_core.server.fanout import ClientFellBehind

        client = self._client()
        while True:
            queue = client.subscribe()
            try:
                async for event in queue:
                    await self._on_event(event)
                self._host_gone()
                return
            except ClientFellBehind:
                queue.close()
                if self.thread_id:
                    await self.switch_thread(self.thread_id)

    def _host_gone(self) -> None:
        """The notification stream ended: the host this app was attached to went away."""
        reason = getattr(self.client, "disconnected", None)
        if reason:
            self.exit_message = f"roder: detached: {reason} (`roder serve --status` tells whether the host still runs)"
            self.exit(1)

    async def _on_event(self, event: Any) -> None:
        from roder_core.threads import events as ev

        method = getattr(event, "method", "")
        if method == "thread/live":
            if event.thread_id == self.thread_id:
                await self._catch_up(event)
            return
        if method == "turn/steer/queued":
            if event.thread_id == self.thread_id:
                self.queued.add(event.item.id, event.item.text)
            return
        if method == "turn/steer/cancelled":
            self.queued.discard(event.item_id)
            return
        if method == "auth/login/completed":
            from roder_tui.sign_in_view import completion_message

            text, severity = completion_message(event)
            self.notify(text, title="/login", severity=severity, timeout=12)  # type: ignore[arg-type]
            return
        thread_id = getattr(event, "thread_id", None)
        if isinstance(event, ev.AgentMessageDelta):
            if thread_id == self.thread_id:
                self.coalescer.push(event.item_id, event.delta)
            return
        if isinstance(event, ev.ToolOutputDelta):
            if thread_id == self.thread_id:
                self.coalescer.push(f"call:{event.call_id}", event.delta)
            return
        if (
            isinstance(event, ev.ThreadStarted)
            and event.thread.parent is not None
            and event.thread.parent.thread_id in self._family
        ):
            self._family.add(event.thread.id)
        if isinstance(event, ev.ApprovalRequested | ev.ApprovalResolved) and thread_id in self._family:
            await self.coalescer.drain()
            self._on_approval_event(event)
            return
        if isinstance(event, ev.UserInputRequested) and thread_id in self._family:
            self.questions.add(event)
            return
        if isinstance(event, ev.TurnCompleted):
            self.questions.turn_ended(event.turn.id)
        if method == "tasks/updated":
            self.tasks_view.task_updated(event.task)
            return
        if method == "workflows/updated":
            self.workflows_view.updated(event)
            return
        if method == "plugins/changed":  # the server reloaded its plugins: their commands join `/` now
            self.run_worker(self._load_mcp_completions(), group="mcp-completions", exit_on_error=False)
            await self._load_commands()
            return
        if isinstance(event, ev.PlanReviewUpdated):
            await self._on_plan_review(event)
            return
        if isinstance(event, ev.TeamUpdated):
            if thread_id == self.thread_id:
                await self.teams.on_updated(event.team)
            return
        if isinstance(event, ev.ItemCompleted) and self.team_panes.member_of_thread(thread_id or ""):
            self.team_panes.add_item(thread_id or "", event.item)
            return
        if thread_id not in (self.thread_id, "", None):
            if isinstance(event, ev.TurnCompleted) and thread_id in self._left_running:
                self._left_running.discard(thread_id)
                await self._release_thread(thread_id)
            if method in ("thread/status/changed", "thread/title/changed", "thread/started"):
                self.refresh_sidebar()
            return
        await self.coalescer.drain()
        if isinstance(event, ev.ItemStarted):
            if event.item.type == "userMessage":
                self.queued.discard(event.item.id)  # a steer reached the model
            await self.transcript.add_item(event.item, live=True)
        elif isinstance(event, ev.ItemCompleted):
            await self.transcript.add_item(event.item, live=False)
        elif isinstance(event, ev.TurnStarted):
            self.turn_id, self.turn_started = event.turn_id, time.monotonic()
            self._set_activity("working")
        elif isinstance(event, ev.TurnCompleted):
            self.turn_id = None
            status = event.turn.status
            self.transcript.settle()
            mine = {q.item_id for q in self.queued.queued}  # a team's messages are the team's to deliver again
            self._return_unsent([m.text for m in event.unsent_steers if m.id in mine])
            if status == "interrupted":
                from roder_tui.widgets.messages import interrupted_marker

                await self.transcript.add_item(interrupted_marker(event.turn.id))
            if status == "failed" and event.turn.error is not None:
                self.notify(event.turn.error.message, title="turn failed", severity="error", timeout=10)
            self._set_activity("idle")
            self.status_bar.update_state(git_branch=git_branch(self.cwd))
            self.refresh_sidebar()
        elif isinstance(event, ev.TokenUsageUpdated):
            from roder_ext_tui.segments import cache_state

            self.status_bar.update_state(
                context_tokens=event.context_tokens,
                context_window=event.context_window,
                cost_usd=event.total.cost_usd,
                **cache_state(event.usage, event.total),
            )
        elif isinstance(event, ev.ModelRetrying):
            self.notify(event.notice(), title="retrying", severity="warning", timeout=max(event.wait, 5.0))
        elif isinstance(event, ev.ModeChanged):
            self.status_bar.update_state(mode=event.mode)
        elif isinstance(event, ev.ThreadModelChanged):
            self.status_bar.update_state(provider=event.provider, model=event.model, context_window=None)
        elif isinstance(event, ev.ThreadTitleChanged | ev.ThreadStatusChanged):
            self.refresh_sidebar()
        elif isinstance(event, ev.ErrorEvent):
            self.notify(event.message, title=event.kind, severity="error", timeout=10)

    def _on_approval_event(self, event: Any) -> None:
        """Approvals of the visible thread and of subagents it (or a thread left running) started."""
        from roder_core.threads import events as ev

        if isinstance(event, ev.ApprovalRequested):
            self._queue_approval(event.request)
            return
        self._approvals = [r for r in self._approvals if r.approval_id != event.approval_id]
        if self._approval_open == event.approval_id:
            from roder_tui.screens.approval import ApprovalScreen
            from roder_tui.screens.plan_review import PlanReviewScreen

            if isinstance(self.screen, ApprovalScreen | PlanReviewScreen):
                self._approval_open = None
                self.pop_screen()
                self._next_approval()
        if self.turn_id:
            self._set_activity("working")
        elif not self._approvals:  # a workflow step's or a thread left running: nothing waits now
            self._set_activity("idle")

    async def _flush_deltas(self, batch: dict[str, str]) -> None:
        for key, text in batch.items():
            await self.transcript.stream(key, text)

    def _set_activity(self, activity: str) -> None:
        elapsed = time.monotonic() - self.turn_started if activity != "idle" and self.turn_id else None
        self.status_bar.update_state(activity=activity, elapsed=elapsed)
        if activity == "idle" and self._elapsed_timer is not None:
            self._elapsed_timer.stop()
            self._elapsed_timer = None
        elif activity != "idle" and self._elapsed_timer is None:
            # One tick a second while a turn runs; nothing at all while idle.
            self._elapsed_timer = self.set_interval(1.0, self._tick_elapsed)

    def _tick_elapsed(self) -> None:
        if self.turn_id:
            self.status_bar.update_state(elapsed=time.monotonic() - self.turn_started)

    # ------------------------------------------------------------------ approvals

    def _queue_approval(self, request: ApprovalRequest) -> None:
        """Show an approval once, however many ways it arrived (live, replayed, caught up)."""
        if request.approval_id == self._approval_open or any(r.approval_id == request.approval_id for r in self._approvals):
            return
        self._approvals.append(request)
        self._set_activity("waiting for approval")
        self._next_approval()

    async def _catch_up(self, live: ThreadLive) -> None:
        """A thread opened while its turn runs (another client's, or from before this one
        attached): the text streamed so far, running tools' output, queued messages, and the
        approvals waiting for a person."""
        await self.coalescer.drain()
        for streaming in live.streaming:
            await self.transcript.resume_stream(streaming.item_id, streaming.text)
        for call_id, output in live.tool_output.items():
            self.transcript.resume_tool_output(f"call:{call_id}", output)
        for steer in live.queued_steers:
            self.queued.add(steer.id, steer.text)
        if live.turn_id is not None and self.turn_id != live.turn_id:
            # The counter goes on from the turn's age on the host, not from when we attached.
            self.turn_id, self.turn_started = live.turn_id, time.monotonic() - (live.turn_elapsed_ms or 0) / 1000
            self._set_activity("working")
        for request in live.pending_approvals:
            self._queue_approval(request)

    def _next_approval(self) -> None:
        if self._approval_open is not None or not self._approvals:
            return
        from roder_tui.screens.approval import ApprovalScreen

        request = self._approvals.pop(0)
        self._approval_open = request.approval_id
        if request.tool == PLAN_TOOL and "reviewId" in request.arguments:
            self.run_worker(self.open_plan_review(str(request.arguments["reviewId"]), request), group="plan-review")
            return

        def answered(decision: ApprovalDecision | None) -> None:
            self._approval_open = None
            if decision is not None:
                self.run_worker(self._resolve(request, decision), group="approval", exit_on_error=False)
            self._next_approval()

        self.push_screen(ApprovalScreen(request), answered)

    async def _resolve(self, request: ApprovalRequest, decision: ApprovalDecision) -> None:
        from roder_core.server.protocol import SESSION_RESOLVE_APPROVAL, ResolveApprovalParams

        params = ResolveApprovalParams(approval_id=request.approval_id, decision=decision.decision, rule=decision.rule)
        await self._client().call(SESSION_RESOLVE_APPROVAL, params)

    # ------------------------------------------------------------------ plan review

    async def open_plan_review(self, review_id: str | None = None, request: ApprovalRequest | None = None) -> None:
        """Show a plan review (the thread's latest without an id): rendered blocks, comments, keys."""
        from roder_core.server.errors import RpcError
        from roder_core.server.protocol_plan_review import PLAN_REVIEW_READ, PlanReviewReadParams
        from roder_tui.screens.plan_review import PlanReviewScreen

        params = PlanReviewReadParams(review_id=review_id) if review_id else PlanReviewReadParams(thread_id=self.open_thread())
        try:
            review = (await self._client().call(PLAN_REVIEW_READ, params)).review
        except RpcError as exc:
            if request is not None:
                self._approval_open = None
            self.notify(exc.message, title="plan review", severity="error", timeout=10)
            return

        def closed(outcome: str | None) -> None:
            if request is not None and self._approval_open == request.approval_id:
                self._approval_open = None
                if outcome is None:
                    self.notify("The plan waits for your review; /plan-review opens it again.", title="plan review")
                self._next_approval()

        self.push_screen(PlanReviewScreen(review, self._client(), agent=request.agent if request else None), closed)

    async def _on_plan_review(self, event: Any) -> None:
        from roder_tui.screens.plan_review import PlanReviewScreen

        screen = self.screen
        if isinstance(screen, PlanReviewScreen) and screen.review.review_id == event.review.review_id:
            if event.change == "abandoned":
                self.pop_screen()
                self.notify("The plan's turn ended before an answer.", title="plan review")
            else:
                await screen.show(event.review)

    # ------------------------------------------------------------------ teams (team_control.py)

    @property
    def teams(self) -> TeamControl:
        if self._teams is None:
            from roder_tui.team_control import TeamControl

            self._teams = TeamControl(self, self.team_panes, self._client, self._family)
        return self._teams

    async def action_team_next_pane(self) -> None:
        await self.teams.next_pane()

    # ------------------------------------------------------------------ threads

    async def new_thread(self) -> None:
        from roder_core.server.protocol import THREAD_START, ThreadStartParams

        result = await self._client().call(THREAD_START, ThreadStartParams(cwd=str(self.cwd)))
        await self._show_thread(result.thread)

    async def switch_thread(self, thread_id: str) -> bool:
        from roder_core.server.errors import RpcError
        from roder_core.server.protocol import THREAD_RESUME, ThreadResumeParams

        try:
            params = ThreadResumeParams(thread_id=thread_id, last_turns=RECENT_TURNS)
            result = await self._client().call(THREAD_RESUME, params)
        except RpcError as exc:
            self.notify(exc.message, title="cannot open thread", severity="error", timeout=10)
            return False
        older = None
        if result.older_turns:
            first = result.thread.turns[0].id

            async def older() -> list[Any]:
                return await self._items_before(thread_id, first)

        await self._show_thread(result.thread, older)
        return True

    async def _items_before(self, thread_id: str, turn_id: str) -> list[Any]:
        """The shown items of a thread's turns before ``turn_id`` (scrolled back to)."""
        from roder_core.server.protocol import THREAD_READ, ThreadReadParams
        from roder_tui.widgets.messages import shown_items

        thread = (await self._client().call(THREAD_READ, ThreadReadParams(thread_id=thread_id, include_turns=True))).thread
        cut = next((i for i, turn in enumerate(thread.turns) if turn.id == turn_id), 0)
        return shown_items(thread.model_copy(update={"turns": thread.turns[:cut]}))

    async def _show_thread(self, thread: Thread, older: Callable[[], Awaitable[list[Any]]] | None = None) -> None:
        await self.coalescer.drain()
        previous, self.thread_id = self.thread_id, thread.id
        self._family.add(thread.id)
        self._left_running.discard(thread.id)
        self.queued.take_all()
        if previous is not None and previous != thread.id:
            await self._leave_thread(previous)
        from roder_tui.widgets.messages import shown_items

        running = thread.turns[-1] if thread.turns and thread.turns[-1].status == "inProgress" else None
        self.turn_id = None
        live_calls = frozenset(f"call:{i.call_id}" for i in running.items if i.type == "toolCall") if running else frozenset()
        await self.transcript.load(self._with_shell_cards(thread.id, shown_items(thread)), live_calls, older)
        await self.teams.show_team_of(thread.id)
        await self._load_pending_media(thread.id)
        # The live state comes back as a thread/live notification too, in order with the deltas.
        from roder_core.server.protocol_attach import THREAD_LIVE, ThreadLiveParams

        live = await self._client().call(THREAD_LIVE, ThreadLiveParams(thread_id=thread.id))
        last = next((t for t in reversed(thread.turns) if t.usage.total_tokens), None)
        from roder_ext_tui.segments import cache_state

        self.status_bar.update_state(
            provider=thread.provider or self.status_bar.state.get("provider"),
            model=thread.model or self.status_bar.state.get("model"),
            context_tokens=last.usage.input_tokens + last.usage.output_tokens if last else 0,
            context_window=live.context_window,
            cost_usd=thread.usage.cost_usd,
            **cache_state(last.usage if last else None, thread.usage),
        )
        self.refresh_sidebar()

    async def _load_pending_media(self, thread_id: str) -> None:
        from roder_core.server.protocol_media import MEDIA_LIST, MediaListParams

        listed = (await self._client().call(MEDIA_LIST, MediaListParams(thread_id=thread_id))).media
        self.pending_media.show_items([m for m in listed if m.pending])

    async def action_paste_image(self) -> None:
        """alt+v, /paste-image: the clipboard's image is attached to the next prompt."""
        from roder_core.server.errors import RpcError
        from roder_core.server.protocol_media import MEDIA_ATTACH_TO_TURN, MediaAttachParams
        from roder_tui.clipboard_image import ClipboardError, read_clipboard_image

        try:
            data = await asyncio.to_thread(read_clipboard_image, dict(os.environ))
        except ClipboardError as exc:
            self.notify(str(exc), title="paste image", severity="warning", timeout=10)
            return
        params = MediaAttachParams(
            thread_id=self.open_thread(),
            data_base64=base64.b64encode(data).decode("ascii"),
            name=f"clipboard-{len(self.pending_media.items) + 1}.png",
            source="clipboard",
        )
        try:
            result = await self._client().call(MEDIA_ATTACH_TO_TURN, params)
        except RpcError as exc:
            self.notify(exc.message, title="paste image", severity="error", timeout=10)
            return
        self.pending_media.add(result.media)
        for warning in result.warnings:
            self.notify(warning, title="paste image", severity="warning", timeout=10)

    def _with_shell_cards(self, thread_id: str, items: list[Any]) -> list[Any]:
        """The thread's items with the ``!cmd`` cards run in it, each after the item it followed."""
        for anchor, card in self._shell_cards.get(thread_id, []):
            index = next((i + 1 for i, item in enumerate(items) if item.id == anchor), 0 if anchor is None else len(items))
            items.insert(index, card)
        return items

    async def _leave_thread(self, thread_id: str) -> None:
        """Give up writing a thread we switched away from, so ``roder -c``/``-r`` in another
        terminal can continue it; a thread still running is released when its turn ends. On a
        shared host other clients may have it open, so it stays open there."""
        from roder_core.server.protocol import SESSION_GET, SessionGetParams

        if self._client().shared:
            self._family.discard(thread_id)
            return
        if thread_id in (await self._client().call(SESSION_GET, SessionGetParams())).active_turns:
            self._left_running.add(thread_id)
        else:
            await self._release_thread(thread_id)

    async def _release_thread(self, thread_id: str) -> None:
        from roder_core.server.errors import RpcError
        from roder_core.server.protocol import THREAD_CLOSE, ThreadCloseParams

        self._family.discard(thread_id)
        try:
            await self._client().call(THREAD_CLOSE, ThreadCloseParams(thread_id=thread_id))
        except RpcError as exc:  # still locked here is an inconvenience, not a failure to show
            self.notify(exc.message, title="thread close", severity="warning")

    @work(exclusive=True, group="sidebar", exit_on_error=False)
    async def refresh_sidebar(self) -> None:
        from roder_core.server.errors import RpcError
        from roder_core.server.protocol import THREAD_LIST, ThreadListParams

        if self.client is None:
            return
        try:
            threads = (await self.client.call(THREAD_LIST, ThreadListParams(cwd=str(self.cwd), limit=200))).threads
        except RpcError as exc:  # the list is a convenience: say why it is stale, keep working
            self.notify(exc.message, title="thread list", severity="warning")
            return
        self.sidebar.show(threads, self.thread_id)

    @on(Sidebar.Selected)
    async def _sidebar_selected(self, event: Sidebar.Selected) -> None:
        if event.thread_id != self.thread_id:
            await self.switch_thread(event.thread_id)
        self.prompt_bar.input.focus()

    # ------------------------------------------------------------------ input

    @on(PromptInput.Submitted)
    def _submitted(self, event: PromptInput.Submitted) -> None:
        # A worker, so a long ``!cmd`` or a slow call never blocks keys (esc must still work).
        self.run_worker(self.send(event.text), group="send", exit_on_error=False)

    async def send(self, text: str) -> None:
        """Send what the user typed: ``!cmd``, ``/command``, a steer during a turn, or a prompt."""
        from roder_core.server.errors import RpcError
        from roder_core.server.protocol import TURN_START, TURN_STEER, InputItem, TurnStartParams, TurnSteerParams

        if not self.ready.is_set():
            await self.ready.wait()
        stripped = text.strip()
        try:
            if stripped.startswith("!") and len(stripped) > 1:
                await self.run_shell(stripped[1:].strip())
            elif stripped.startswith("/") and len(stripped) > 1 and not stripped.startswith("//"):
                await self.run_slash(stripped)
            elif self.team_panes.focused is not None and self.team_panes.team is not None:
                await self.teams.message_focused(text)
            elif self.turn_id is not None:
                steer = TurnSteerParams(thread_id=self.open_thread(), expected_turn_id=self.turn_id, prompt=text)
                steered = await self._client().call(TURN_STEER, steer)
                self.queued.add(steered.item_id, text)
            else:
                from roder_tui.media_input import image_inputs, prompt_images

                images = prompt_images(text, self.cwd)
                known = set(await self.prompt_bar.known_files()) if self.files_remote and "@" in text else None
                files = [InputItem(type="file", path=str(p)) for p in attachments_in(text, self.cwd, known) if p not in images]
                await self.transcript.action_jump_end()  # a new prompt: follow the new turn
                self._redo.clear()
                params = TurnStartParams(thread_id=self.open_thread(), prompt=text, input=[*image_inputs(text, self.cwd), *files])
                await self._client().call(TURN_START, params)
                self.pending_media.show_items([])  # the turn took them
        except RpcError as exc:
            # Refused (an image for a model that cannot see, a bad command...): nothing typed is lost.
            self._give_back([text])
            self.notify(exc.message, severity="error", timeout=10)

    def _give_back(self, texts: list[str]) -> None:
        """Put text that was not sent back into the prompt, before anything typed since."""
        prompt = self.prompt_bar.input
        prompt.text = "\n\n".join([*texts, prompt.text] if prompt.text.strip() else texts)
        prompt.move_cursor(prompt.document.end)

    def _return_unsent(self, texts: list[str]) -> None:
        """Steer messages the turn never delivered go back into the prompt (before any draft),
        never into the next turn."""
        self.queued.take_all()
        if not texts:
            return
        self._give_back(texts)
        self.notify("queued messages were not sent; they are back in the prompt", title="steer")

    @on(PromptInput.RecallQueued)
    async def _recall_queued(self) -> None:
        from roder_core.server.protocol import TURN_STEER_CANCEL, TurnSteerCancelParams

        if not self.queued.queued or self.thread_id is None:
            return
        newest = self.queued.queued[-1]
        taken = await self._client().call(
            TURN_STEER_CANCEL, TurnSteerCancelParams(thread_id=self.thread_id, item_id=newest.item_id)
        )
        self.queued.discard(newest.item_id)
        if taken.cancelled and taken.text is not None:
            prompt = self.prompt_bar.input
            prompt.text = taken.text
            prompt.move_cursor(prompt.document.end)
        else:
            self.notify("the model already received it", title="steer")

    def open_thread(self) -> str:
        """The open thread's id (an error when none is open)."""
        if self.thread_id is None:
            raise RuntimeError("no thread is open")
        return self.thread_id

    async def run_shell(self, command: str) -> None:
        """``!cmd``: the control plane's command/exec runs it after policy evaluation."""
        from roder_core.ir import CommandExecutionItem
        from roder_core.server.protocol_host import COMMAND_EXEC, CommandExecParams

        result = await self._client().call(COMMAND_EXEC, CommandExecParams(command=["bash", "-lc", command], cwd=str(self.cwd)))
        last = self.transcript.model.entries[-1].items[-1].id if len(self.transcript.model) else None
        card = CommandExecutionItem(
            command=command,
            cwd=str(self.cwd),
            exit_code=result.exit_code,
            output=result.stdout + result.stderr,
            duration_ms=result.duration_ms,
            timed_out=result.timed_out,
            call_id=f"shell-{time.monotonic_ns()}",
        )
        # Not part of the thread (the model never saw it): kept here so it survives switching away.
        if self.thread_id is not None:
            self._shell_cards.setdefault(self.thread_id, []).append((last, card))
        await self.transcript.add_item(card)

    async def run_slash(self, line: str) -> None:
        from roder_core.server.errors import METHOD_NOT_FOUND, RpcError
        from roder_core.server.protocol_features import COMMANDS_RUN, CommandsRunParams

        name, _, arguments = line[1:].partition(" ")
        client = self._client()
        local = self._local_slash(name, arguments)
        if local is not None:
            await _perform(local)
            return
        try:
            outcome = await client.call(COMMANDS_RUN, CommandsRunParams(thread_id=self.thread_id, name=name, arguments=arguments))
        except RpcError as exc:
            if exc.code != METHOD_NOT_FOUND:
                raise
            self.notify(f"/{name} is not available in this build", severity="error")
            return
        if outcome.kind == "action":
            action = self._local_slash(outcome.action or name, outcome.arguments)
            if action is not None:
                await _perform(action)
            else:
                self.notify(outcome.message or f"/{name} done")
        elif outcome.kind == "done" and outcome.message:
            message = outcome.message
            if message.count("\n") > 3:
                self.show_info(f"/{name}", message)
            else:
                self.notify(message, title=f"/{name}", timeout=8)
            data = outcome.data
            if "mode" in data:
                self.status_bar.update_state(mode=data["mode"])
            if "model" in data:
                self.status_bar.update_state(provider=data.get("provider"), model=data["model"])

    def _local_slash(self, name: str, arguments: str) -> Callable[[], Any] | None:
        """Built-ins that act on the screen; None for the ones the runtime performs."""
        from roder_tui import sign_in_view

        if name == "model" and not arguments.strip():
            return self.pick_model
        actions: dict[str, Callable[[], Any]] = {
            "new": self.new_thread,
            "clear": self.new_thread,
            "resume": lambda: self._resume(arguments.strip()),
            "fork": self.fork_thread,
            "rewind": self.action_rewind,
            "undo": self.undo,
            "redo": self.redo,
            "export": lambda: self.export_thread(*(arguments.split() or ["md"])[:2]),
            "tools": lambda: self._list_tools(mcp_only=False),
            "mcp": lambda: self._mcp(arguments),
            "skills": self._list_skills,
            "agents": self._list_agents,
            "plugin": lambda: self._open_plugins(arguments),
            "plugins": lambda: self._open_plugins(arguments),
            "trust": self._trust_folder,
            "paste-image": self.action_paste_image,
            "team": lambda: self.teams.command(arguments),
            "plan-review": self.open_plan_review,
            "login": lambda: sign_in_view.start_sign_in(self, arguments),
            "quit": lambda: self.exit(0),
            "exit": lambda: self.exit(0),
        }
        return actions.get(name)

    def show_info(self, title: str, text: str) -> None:
        from roder_tui.screens.info import InfoScreen

        self.push_screen(InfoScreen(title, text))

    async def _mcp(self, arguments: str) -> None:
        """``/mcp`` lists the servers; ``/mcp login NAME`` and ``/mcp logout NAME`` sign in and out."""
        from roder_tui.mcp_sign_in import mcp_command

        if not await mcp_command(self, arguments):
            await self._list_tools(mcp_only=True)

    async def _list_tools(self, *, mcp_only: bool) -> None:
        text = await listings.tools_text(self._client(), self.thread_id, mcp_only=mcp_only)
        self.show_info("/mcp" if mcp_only else "/tools", text)

    async def _list_skills(self) -> None:
        self.show_info("/skills", listings.skills_text(self.slash_commands))

    async def _list_agents(self) -> None:
        self.show_info("/agents", await listings.agents_text(self._client(), str(self.cwd)))

    async def _open_plugins(self, arguments: str = "") -> None:
        """``/plugin``; ``/plugin marketplace add SOURCE`` adds a marketplace, then shows it."""
        from roder_tui.screens.plugins import PluginScreen

        words = arguments.split()
        if words and (words[:2] != ["marketplace", "add"] or len(words) != 3):
            self.notify("usage: /plugin, or /plugin marketplace add SOURCE", title="/plugin", severity="error")
            return
        screen = PluginScreen(self._client())
        await self.push_screen(screen)
        if words:
            await screen.add_marketplace(words[2])

    async def _trust_folder(self) -> None:
        from roder_core.server.protocol import TRUST_SET, TrustSetParams

        result = await self._client().call(TRUST_SET, TrustSetParams(cwd=str(self.cwd), trusted=True))
        if result.loaded:
            self.notify("This folder is trusted and its own items are loaded.", title="/trust")
        else:
            self.notify(
                "This folder is trusted: restart roder to load its config, hooks, skills, commands, agents and MCP servers.",
                title="/trust",
                timeout=10,
            )

    async def _resume(self, thread_id: str) -> None:
        if thread_id:
            await self.switch_thread(thread_id)
        else:
            self.action_resume_picker()

    async def fork_thread(
        self, *, turn_id: str | None = None, before_item: str | None = None, quiet: bool = False, title: str | None = None
    ) -> None:
        from roder_core.server.protocol import THREAD_FORK, ThreadForkParams

        params = ThreadForkParams(thread_id=self.open_thread(), turn_id=turn_id, before_item_id=before_item, title=title)
        thread = (await self._client().call(THREAD_FORK, params)).thread
        if not quiet:
            self.notify(f"forked into {thread.id}", title="fork")
        await self.switch_thread(thread.id)

    async def pick_model(self, provider: str | None = None) -> None:
        """``/model`` without an argument: choose among every configured provider's models; the
        open thread switches at once (``providers/select`` with its id)."""
        from roder_core.server.protocol import MODEL_LIST, PROVIDERS_LIST, ModelListParams
        from roder_tui.screens.choice import ChoiceScreen

        client = self._client()
        providers = await client.call(PROVIDERS_LIST)
        rows: list[tuple[str, str]] = []
        for entry in providers.providers:
            if entry.auth_configured is False or (provider and entry.id != provider):
                continue
            try:
                listed = (await client.call(MODEL_LIST, ModelListParams(provider=entry.id))).models
            except Exception as exc:  # one unreachable provider must not hide the others
                log.info("model/list %s: %s", entry.id, exc)
                continue
            rows += [(f"{entry.id}/{m.id}", f"{entry.id}/{m.id}") for m in listed]
        current = f"{self.status_bar.state.get('provider')}/{self.status_bar.state.get('model')}"
        chosen = await self.push_screen_wait(
            ChoiceScreen("Model for this thread", rows, highlight=current, empty="no configured provider lists models")
        )
        if not chosen:
            return
        provider_id, _, model = chosen.partition("/")
        from roder_core.kernel.services import PaletteCommand

        await self._run_palette_command(
            PaletteCommand(
                "model",
                chosen,
                "providers/select",
                {"provider": provider_id, "model": model, **({"threadId": self.thread_id} if self.thread_id else {})},
            )
        )

    async def _read_host_directory(self, path: str) -> list[tuple[str, bool]]:
        """One folder of the host's workspace (``fs/readDirectory``, .gitignore respected)."""
        from roder_core.server.errors import RpcError
        from roder_core.server.protocol_host import FS_READ_DIRECTORY, FsReadDirectoryParams

        try:
            result = await self._client().call(FS_READ_DIRECTORY, FsReadDirectoryParams(path=path, respect_gitignore=True))
        except RpcError:
            return []
        return [(e.name, e.kind == "dir") for e in result.entries]

    async def export_thread(self, fmt: str = "md", path: str | None = None) -> None:
        from roder_core.server.protocol import THREAD_READ, ThreadReadParams

        thread = (
            await self._client().call(THREAD_READ, ThreadReadParams(thread_id=self.open_thread(), include_turns=True))
        ).thread
        fmt = "json" if fmt.lower() in ("json", "jsonl") else "md"
        here = Path.cwd() if self.files_remote else self.cwd  # the file is written on this machine
        target = Path(path) if path else here / f"roder-{thread.id}.{fmt}"
        target = target if target.is_absolute() else here / target
        from roder_core.threads.transcript import render_markdown  # the one renderer, with safe fences

        text = json.dumps(thread.wire(), indent=2) if fmt == "json" else render_markdown(thread)
        try:
            target.write_text(text, encoding="utf-8")
        except OSError as exc:
            self.notify(f"could not write {target}: {exc}", severity="error")
            return
        self.notify(str(target), title="exported")

    # ------------------------------------------------------------------ palette

    def action_command_palette(self) -> None:
        from roder_tui.screens.command_palette import CommandPaletteScreen

        if not isinstance(self.screen, CommandPaletteScreen):
            self.push_screen(self._palette_screen())

    def _palette_screen(self) -> Screen[Any]:
        from roder_tui.screens.command_palette import CommandPaletteScreen

        return self._installed(PALETTE_SCREEN, lambda: CommandPaletteScreen(self._palette_rows, self.run_palette_command))

    def _installed(self, name: str, make: Callable[[], Screen[Any]]) -> Screen[Any]:
        """A modal opened often (palette, help), installed on first use and reused on every open:
        composing and styling one costs far more than showing it."""
        if not self.is_screen_installed(name):
            self.install_screen(make(), name)
        return self.get_screen(name)

    def _build_modals(self) -> None:
        """Compose, style and mount the palette and help after the first frame, while the runtime
        starts, so ctrl+p and F1 only show them (Textual starts an installed screen when it is
        first pushed; ``_get_screen`` is that step). The palette's rows load once the runtime is
        ready."""
        from roder_tui.screens.help import HelpScreen

        self._get_screen(self._palette_screen())
        self._get_screen(self._installed(HELP_SCREEN, HelpScreen))

    async def _palette_rows(self) -> list[PaletteCommand]:
        from roder_tui.palette import palette_rows

        await self.ready.wait()
        return await palette_rows(self._client(), await self.palette_state())

    async def palette_state(self) -> dict[str, Any]:
        """What the palette's sources build their rows from (``roder_tui.palette.palette_state``)."""
        from roder_tui.palette import palette_state

        return await palette_state(
            self._client(),
            cwd=str(self.cwd),
            thread_id=self.thread_id,
            mode=self.status_bar.state.get("mode"),
            themes=sorted(self.themes.themes),
            theme=self.roder_theme.name,
            commands=self.slash_commands,
        )

    def run_palette_command(self, command: PaletteCommand) -> None:
        self.run_worker(self._run_palette_command(command), group="palette", exit_on_error=False)

    async def _run_palette_command(self, command: PaletteCommand) -> None:
        from roder_core.server.errors import RpcError
        from roder_core.server.protocol import ProvidersSelectResult, SessionModeResult

        params, method = dict(command.params), command.method
        local: dict[str, Callable[[], Any]] = {
            "tui/thread/new": self.new_thread,
            "tui/thread/pick": self.action_resume_picker,
            "tui/thread/fork": self.fork_thread,
            "tui/rewind": self.action_rewind,
            "tui/thread/switch": lambda: self.switch_thread(params["threadId"]),
            "tui/model/pick": lambda: self.pick_model(params.get("provider")),
            "tui/theme/set": lambda: self._set_theme_async(params["name"]),
            "tui/export": lambda: self.export_thread(params.get("format", "md")),
            "tui/slash": lambda: self.run_slash(f"/{params['name']}"),
            "tui/copy_last": self.action_copy_focused,
            "tui/sidebar": self.action_toggle_sidebar,
            "tui/help": self.action_help,
            "tui/tasks": self.action_tasks,
            "tui/workflows": self.action_workflows,
        }
        try:
            if method in local:
                await _perform(local[method])
                return
            result = await self._client().call_method(method, params)
        except RpcError as exc:
            self.notify(exc.message, severity="error", timeout=10)
            return
        if isinstance(result, SessionModeResult):
            self.status_bar.update_state(mode=result.mode)
        elif isinstance(result, ProvidersSelectResult):
            self.status_bar.update_state(provider=result.provider, model=result.model)
            self.notify(f"{result.provider}/{result.model}", title="model")

    # ------------------------------------------------------------------ themes

    def apply_theme(self, theme: RoderTheme, *, save: bool = True) -> None:
        from rich.theme import Theme as RichTheme

        self.roder_theme = theme
        CodeStyle.name = theme.code_theme
        if self._pushed_theme:
            self.console.pop_theme()
        self.console.push_theme(RichTheme(rich_styles(theme)))
        self._pushed_theme = True
        self.theme = theme.name
        transcript = getattr(self, "transcript", None)
        if transcript is not None and transcript.is_attached:
            transcript.rerender()
        if save:
            try:
                save_theme_choice(self.config_dir / "config.toml", theme.name)
            except OSError as exc:
                self.notify(f"theme not saved: {exc}", severity="warning")

    async def _set_theme_async(self, name: str) -> None:
        if name not in self.themes.themes:
            self.notify(f"unknown theme {name!r}", severity="error")
            return
        self.apply_theme(self.themes.themes[name])
        self.notify(name, title="theme")

    async def _add_plugin_themes(self) -> None:
        """Enabled plugins' themes join the picker (read after the first frame: startup stays
        fast); a chosen plugin theme is applied once it is known."""
        errors = len(self.themes.errors)
        added = await asyncio.to_thread(add_plugin_themes, self.themes, self.cwd)
        for theme in added:
            self.register_theme(theme.to_textual())
        for problem in self.themes.errors[errors:]:
            self.notify(problem, title="theme skipped", severity="warning", timeout=8)
        wanted = str(self.config_data.get("theme") or "")
        if any(t.name == wanted for t in added) and self.roder_theme.name != wanted:
            self.apply_theme(self.themes.themes[wanted], save=False)

    # ------------------------------------------------------------------ actions (keymap.py)

    async def action_ctrl_c(self) -> None:
        """Copy a selection; else interrupt the running turn; else clear the prompt; on an idle,
        empty prompt, a second press within two seconds quits."""
        from roder_core.server.protocol import TURN_INTERRUPT, TurnInterruptParams

        focused = self.focused
        if isinstance(focused, PromptInput) and focused.selected_text:
            self.action_copy_text(focused.selected_text)
            return
        if self.client is not None and self.thread_id and self.turn_id:
            self._ctrl_c_at = 0.0
            await self.client.call(TURN_INTERRUPT, TurnInterruptParams(thread_id=self.thread_id, turn_id=self.turn_id))
            return
        prompt = self.prompt_bar.input
        if prompt.text:
            prompt.clear()
            return
        now = time.monotonic()
        if now - self._ctrl_c_at <= CTRL_C_WINDOW:
            await self.action_quit()
            return
        self._ctrl_c_at = now
        self.notify("press ctrl+c again to quit (or ctrl+q)", timeout=CTRL_C_WINDOW)

    async def action_quit(self) -> None:
        """Quit; a turn cut off by quitting is interrupted and saved, and the shell says how to
        continue it."""
        if self.turn_id is not None and self.thread_id is not None and self.client is not None and self.client.shared:
            self.exit_message = "roder: detached; the turn goes on in the host (`roder attach` returns to it)"
        elif self.turn_id is not None and self.thread_id is not None:
            self.exit_message = (
                f"roder: the running turn was interrupted; continue this thread with `roder -c` (or `roder -r {self.thread_id}`)"
            )
        self.exit(0)

    def action_copy_text(self, text: str) -> None:
        from roder_tui.clipboard import copy_text

        if not text:
            self.notify("nothing to copy")
            return
        where = copy_text(self, text)
        self.notify(f"copied {len(text)} characters to the {where}")

    def action_copy_focused(self) -> None:
        entry = self.transcript.focused_entry() or self.transcript.last_answer()
        self.action_copy_text(entry.copy_text() if entry else "")

    async def action_cycle_mode(self) -> None:
        from roder_core.server.protocol import SESSION_SET_MODE, SessionSetModeParams

        if self.client is None:
            return
        current = self.status_bar.state.get("mode") or Mode.ASK
        mode = MODES[(MODES.index(current) + 1) % len(MODES)] if current in MODES else Mode.ASK
        result = await self.client.call(SESSION_SET_MODE, SessionSetModeParams(mode=Mode(mode), reason="shift+tab"))
        self.status_bar.update_state(mode=result.mode)

    def action_toggle_sidebar(self) -> None:
        if self.size.width < SIDEBAR_MIN_WIDTH and not self.sidebar.display:
            self.sidebar_wanted = True
            self.sidebar.display = True  # an explicit request wins over the narrow default
            return
        self.sidebar_wanted = not self.sidebar.display
        self.sidebar.display = self.sidebar_wanted

    def action_sidebar_wider(self) -> None:
        self._resize_sidebar(+SIDEBAR_STEP)

    def action_sidebar_narrower(self) -> None:
        self._resize_sidebar(-SIDEBAR_STEP)

    def _resize_sidebar(self, step: int) -> None:
        """The sidebar starts at a share of the width; these keys set its width in cells."""
        if not self.sidebar.display:
            return
        width = self.sidebar.outer_size.width + step
        self.sidebar.styles.width = max(SIDEBAR_MIN_CELLS, min(width, self.size.width // 2))

    async def action_tasks(self) -> None:
        await self.tasks_view.open()

    async def action_workflows(self) -> None:
        await self.workflows_view.open()

    def action_help(self) -> None:
        from roder_tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(self._installed(HELP_SCREEN, HelpScreen))

    async def action_new_thread(self) -> None:
        if self.client is not None:
            await self.new_thread()
            self.prompt_bar.input.focus()

    @work(group="picker")
    async def action_resume_picker(self) -> None:
        from roder_core.server.protocol import THREAD_LIST, ThreadListParams
        from roder_tui.screens.resume import ResumePicker

        if self.client is None:
            return
        threads = (await self.client.call(THREAD_LIST, ThreadListParams(cwd=str(self.cwd)))).threads
        chosen = await self.push_screen_wait(ResumePicker(threads))
        if chosen:
            await self.switch_thread(chosen)

    def action_focus_transcript(self) -> None:
        widgets = self.transcript._entry_widgets()
        (widgets[-1] if widgets else self.transcript).focus()

    def action_focus_prompt(self) -> None:
        self.prompt_bar.input.focus()

    def action_external_editor(self) -> None:
        from roder_tui.external_editor import EditorError, edit_text

        prompt = self.prompt_bar.input
        try:
            prompt.text = edit_text(self, prompt.text)
        except EditorError as exc:
            self.notify(str(exc), title="editor", severity="error", timeout=8)
            return
        prompt.move_cursor(prompt.document.end)
        prompt.focus()

    async def action_interrupt(self) -> None:
        """esc: close the completion list, else interrupt the running turn, else (twice on an
        empty prompt) open the rewind list."""
        from roder_core.server.protocol import TURN_INTERRUPT, TurnInterruptParams

        if self.prompt_bar.popup_open:
            self.prompt_bar.close_popup()
            return
        if self.client is not None and self.thread_id and self.turn_id:
            await self.client.call(TURN_INTERRUPT, TurnInterruptParams(thread_id=self.thread_id, turn_id=self.turn_id))
            return
        if self.prompt_bar.input.text or self.thread_id is None:
            return
        now = time.monotonic()
        if now - self._esc_at <= ESC_ESC_WINDOW:
            self._esc_at = 0.0
            self.action_rewind()
        else:
            self._esc_at = now

    # ------------------------------------------------------------------ rewind, undo, redo (rewind.py)

    @work(group="rewind", exclusive=True, exit_on_error=False)
    async def action_rewind(self) -> None:
        """Choose an earlier prompt, then what to restore: the conversation, the code, or both."""
        from roder_tui import rewind
        from roder_tui.screens.choice import ChoiceScreen

        client, thread_id = self._client(), self.open_thread()
        labelled = await rewind.rewind_rows(client, thread_id)
        points = [point for point, _label in labelled]
        rows = [(point.id, text) for point, text in labelled]
        chosen = await self.push_screen_wait(
            ChoiceScreen("Rewind to before a prompt", rows, highlight="@last", empty="no prompts in this thread yet")
        )
        point = next((p for p in points if p.id == chosen), None)
        if point is None:
            return
        changes = await rewind.changes_since(client, thread_id, point.id)
        how = await self.push_screen_wait(
            ChoiceScreen(
                "Restore",
                [
                    (rewind.BOTH, "Restore the code and the conversation"),
                    (rewind.CONVERSATION, "Restore the conversation (fork before this prompt)"),
                    (rewind.CODE, "Restore the code (revert Roder's file changes since this prompt)"),
                ],
                note=rewind.describe(changes),
            )
        )
        if how:
            await self.rewind_to(point, how)

    async def rewind_to(self, point: UserMessageItem, how: str) -> rewind_mod.CodeRestore | None:
        from roder_tui import rewind

        client, thread_id = self._client(), self.open_thread()
        restored = None
        if how in (rewind.BOTH, rewind.CODE):
            restored = await rewind.restore_code(client, thread_id, point.id)
            self._show_restore(restored)
        if how in (rewind.BOTH, rewind.CONVERSATION):
            title = await rewind.fork_title(client, thread_id, point.id)
            await self.fork_thread(before_item=point.id, quiet=True, title=title)
            self.prompt_bar.input.text = point.text
            self.prompt_bar.input.move_cursor(self.prompt_bar.input.document.end)
            self.prompt_bar.input.focus()
        return restored

    def _show_restore(self, restored: rewind_mod.CodeRestore) -> None:
        if restored.failed or restored.unrestorable:
            self.show_info("rewind: code", restored.summary())
        else:
            self.notify(restored.summary(), title="rewind")

    async def undo(self) -> None:
        """``/undo``: revert the last prompt's file changes and its messages (redo with /redo)."""
        from roder_tui import rewind

        client, thread_id = self._client(), self.open_thread()
        points = await rewind.rewind_points(client, thread_id)
        if not points:
            self.notify("nothing to undo in this thread", title="/undo")
            return
        restored = await self.rewind_to(points[-1], rewind.BOTH)
        assert restored is not None
        self._redo.append(rewind.Undone(thread_id, restored.hunk_ids, points[-1].text))

    async def redo(self) -> None:
        """``/redo``: re-apply what the last /undo reverted and return to the thread that holds it."""
        from roder_tui import rewind

        if not self._redo:
            self.notify("nothing to redo", title="/redo")
            return
        undone = self._redo.pop()
        problems = await rewind.reapply(self._client(), undone)
        if await self.switch_thread(undone.thread_id) and self.prompt_bar.input.text == undone.text:
            self.prompt_bar.input.clear()
        if problems:
            self.show_info("redo", "\n".join(problems))
        else:
            self.notify(f"re-applied {len(undone.hunk_ids)} change(s)", title="/redo")

    async def action_fork_here(self) -> None:
        """On a focused message: fork there (before a prompt, which returns to the prompt to edit;
        after the turn of any other message)."""
        from roder_core.server.protocol import THREAD_READ, ThreadReadParams

        entry = self.transcript.focused_entry()
        if entry is None or self.thread_id is None:
            return
        item = entry.items[0]
        if item.type == "userMessage" and not item.steer:
            await self.rewind_to(item, "conversation")
            return
        thread = (await self._client().call(THREAD_READ, ThreadReadParams(thread_id=self.thread_id, include_turns=True))).thread
        turn = next((t for t in thread.turns if any(i.id == item.id for i in t.items)), None)
        if turn is not None:
            await self.fork_thread(turn_id=turn.id)

    async def on_unmount(self) -> None:
        self.coalescer.close()
        if self.client is not None:
            with contextlib.suppress(Exception):
                await self.client.close()


async def _perform(action: Callable[[], Any]) -> None:
    """Run an app action that may or may not be a coroutine."""
    result = action()
    if inspect.isawaitable(result):
        await result


def run_app(args: argparse.Namespace) -> int:
    """``roder [PROMPT]``: open the app; returns the process exit code."""
    import sys

    if not sys.stdin.isatty() or not sys.stdout.isatty():
        sys.stderr.write("roder: the app needs a terminal; use `roder -p PROMPT` for one-shot answers\n")
        return 2
    _prepare_image_previews()
    app = RoderApp(args)
    code = app.run()
    if app.exit_message:
        sys.stderr.write(app.exit_message + "\n")
    return int(code or 0)


def _prepare_image_previews() -> None:
    """Inline previews need textual-image loaded before the app owns the terminal; only in
    terminals that draw images (``roder_tui.graphics``), so other starts never pay for it."""
    import os

    from roder_tui.graphics import image_protocol, prepare_previews
    from roder_tui.widgets.transcript import PREVIEWS

    setting = str(configured(roder_home_paths()[0]).get("image_preview") or "")
    PREVIEWS.protocol = prepare_previews(image_protocol(os.environ, setting))
