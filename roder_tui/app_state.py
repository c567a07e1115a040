"""The app's state, its widgets and its look: what every other part of the app builds on.

``RoderApp`` is composed of layers, each a class in its own module that builds on the one below
and calls only what is below it (no module of the app imports one above it, so no import circle):
state and widgets here, then key actions (``app_keys``), threads and the sidebar (``app_threads``),
approvals and plan reviews (``app_approvals``), rewind, undo and redo (``app_rewind``), slash
commands and the palette (``app_commands``), turns and the runtime's events (``app_turns``), and on
top start-up and the runtime connection (``app``).
"""

from __future__ import annotations

from roder_tui.remote import stream_budget, stream_fps, tune_for_link

#: Over SSH: fewer frames and no animations, set before Textual is imported (it reads them then).
REMOTE = tune_for_link()

import argparse  # noqa: E402
import asyncio  # noqa: E402
import time  # noqa: E402
from collections.abc import Awaitable, Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

from textual import events  # noqa: E402
from textual.app import App, ComposeResult  # noqa: E402
from textual.containers import Horizontal, Vertical  # noqa: E402
from textual.widgets import Static  # noqa: E402

from roder_core.modes import Mode  # noqa: E402
from roder_tui.coalesce import DeltaCoalescer  # noqa: E402
from roder_tui.home_config import configured, roder_home_paths  # noqa: E402
from roder_tui.input_pause import InputPause  # noqa: E402
from roder_tui.notices import NoticeLog  # noqa: E402
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
from roder_tui.widgets.prompt import PromptBar, PromptHistory  # noqa: E402
from roder_tui.widgets.queued import QueuedSteers  # noqa: E402
from roder_tui.widgets.sidebar import Sidebar  # noqa: E402
from roder_tui.widgets.status_bar import StatusBar  # noqa: E402
from roder_tui.widgets.team_panes import TeamPanes, WorkArea  # noqa: E402
from roder_tui.widgets.transcript import Transcript  # noqa: E402
from roder_tui.workflows_view import WorkflowsView  # noqa: E402

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel
    from textual.screen import Screen
    from textual.widget import AwaitMount

    from roder_core.ir import ApprovalRequest
    from roder_core.server.app_client import AppClient
    from roder_core.server.protocol_features import CommandInfoModel
    from roder_tui import rewind as rewind_mod
    from roder_tui.team_control import TeamControl
    from roder_tui.widgets.command_palette import CommandPalette
    from roder_tui.widgets.help_panel import HelpPanel


MODES = tuple(Mode)
PLAN_TOOL = "exit_plan"
SIDEBAR_MIN_WIDTH = 80
CTRL_C_WINDOW = 2.0
ESC_ESC_WINDOW = 0.8
NOTICES_TITLE = "Notices"
SIDEBAR_STEP = 4
SIDEBAR_MIN_CELLS = 16
#: Turns a thread opens with; older ones are fetched when the transcript is scrolled back to them.
RECENT_TURNS = 30
#: Seconds without a key after which start-up's remaining background work begins.
INPUT_PAUSE = 0.5
#: Makes the app's control-plane client: in process by default, a host's client when attached.
ClientFactory = Callable[[], "AppClient | Awaitable[AppClient]"]


class AppState(App[int]):
    """The bottom layer: the app's state (client, thread, turn), its widgets (``compose``), its
    layout and themes, and the helpers every layer above uses (``_client``, ``notify``...)."""

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
        #: The ``!cmd`` running now (esc and ctrl+c stop it), None when none runs.
        self._shell_run: asyncio.Task[None] | None = None
        self._elapsed_timer: Any = None
        #: The keyboard's pauses: the answer renderers are imported in the first one.
        self.input_pause = InputPause(INPUT_PAUSE)
        #: The command palette and help: panels of the main screen, built once the app is idle
        #: (``AppCommands.prebuild_panels``) or on the first ctrl+p / F1 before that.
        self.panels: tuple[CommandPalette, HelpPanel] | None = None
        self._panels_mounted: AwaitMount | None = None
        #: The open thread and the threads (id, title, parent) the sidebar last listed.
        self._threads_listed: tuple[str | None, list[tuple[str, str, str | None]]] | None = None
        self._pushed_theme = False
        self.coalescer = DeltaCoalescer(self._flush_deltas, stream_fps(REMOTE), stream_budget(REMOTE))
        for theme in self.themes.themes.values():
            self.register_theme(theme.to_textual())
        # Chosen before the first stylesheet parse: switching later re-parses all CSS (~40 ms).
        self.apply_theme(self.roder_theme, save=False)
        #: What the user's [keys] remaps take over or cannot do (shown once the app is up).
        self.keymap_notes: list[str] = []
        #: Every notice of this session, whole: a toast shows what fits (``notices.py``).
        self.notices = NoticeLog()
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

    def _on_notify(self, event: Any) -> None:
        """Every notice, however raised (``notify`` of the app or a widget, or a ``Notify``
        message), is logged whole here: its toast shows what fits in the room toasts have, and
        the notices key shows the rest."""
        self.notices.add(event.notification)
        super()._on_notify(event)

    def _refresh_notifications(self) -> None:
        """Toasts shown over a dialog keep clear of it (``widgets/toast_room.py``): placed before
        they show, and again once a dialog just pushed is laid out. (Over the main screen, an
        open panel places them when it opens.) Each layout of a screen showing toasts cuts each
        to the room it has, with a marker (``notices.py``)."""
        from roder_tui.notices import watch_toasts

        self._toasts_clear_of_dialog()
        super()._refresh_notifications()
        self.call_after_refresh(self._toasts_clear_of_dialog)
        if self._screen_stack:
            watch_toasts(self.screen)

    def action_notices(self) -> None:
        """The notices of this session, whole and newest first (a toast may show only its start).
        Its key works over any dialog (a cut toast shows there too), so it is a priority key;
        pressed in the notices dialog itself, it does nothing."""
        from roder_tui.screens.info import InfoScreen

        if not (isinstance(self.screen, InfoScreen) and self.screen.title_text == NOTICES_TITLE):
            self.show_info(NOTICES_TITLE, self.notices.text())

    def _toasts_clear_of_dialog(self) -> None:
        from textual.geometry import Region
        from textual.widgets._toast import ToastRack
        from textual.widgets._tooltip import Tooltip

        from roder_tui.main_screen import MainScreen
        from roder_tui.widgets.toast_room import keep_toasts_clear

        if not self._screen_stack or isinstance(screen := self.screen, MainScreen):
            return
        own = (ToastRack, Tooltip)  # Textual's, on every screen
        parts = [child.region for child in screen.children if child.display and child.region and not isinstance(child, own)]
        keep_toasts_clear(screen, Region.from_union(parts) if parts else None)

    def get_default_screen(self) -> Screen[Any]:
        from roder_tui.main_screen import MainScreen

        return MainScreen(id="_default")

    async def on_event(self, event: events.Event) -> None:
        """Where a key or a paste goes, decided in one place: while a panel (the palette, help)
        is open on the main screen, to the panel, which keeps the focus where it was
        (``widgets/overlay.py`` says why); else as Textual sends it, to the focused widget. The
        app's priority keys (``ctrl+q``, ``shift+tab``, ``ctrl+p``) run first either way."""
        from roder_tui.main_screen import MainScreen

        if isinstance(event, events.Key):
            self.input_pause.typed()
        if isinstance(event, (events.Key, events.Paste)) and not event.is_forwarded and self._screen_stack:
            screen = self.screen
            owner = screen.key_owner if isinstance(screen, MainScreen) else None
            if owner is not None:
                self.app_focus = True
                if isinstance(event, events.Paste) or not await self._check_bindings(event.key, priority=True):
                    owner._forward_event(event)
                return
        await super().on_event(event)

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

    def palette_inputs_changed(self) -> None:
        """Something the palette's rows are made from changed (the slash commands, the threads,
        the open thread, mode, model, theme): the built palette loads its rows again now, so the
        next open lists them as they are. Every such change calls this; the palette also asks for
        fresh rows once it is drawn (for changes made elsewhere, like threads another session
        started), but never shows rows older than the last change made here."""
        if self.panels is not None and self.panels[0].is_mounted:
            self.panels[0].reload()

    def on_status_bar_changed(self, event: StatusBar.Changed) -> None:
        if event.keys & {"mode", "provider", "model"}:
            self.palette_inputs_changed()

    def on_resize(self, event: Any) -> None:
        self._layout_for_width(event.size.width)
        for panel in self.panels or ():
            if panel.is_open:
                panel.place(event.size)

    def _layout_for_width(self, width: int) -> None:
        self.sidebar.display = self.sidebar_wanted and width >= SIDEBAR_MIN_WIDTH

    def arrange_team(self) -> None:
        """After a team change: the panes laid out again for the work area's width (its own
        resizes do that for every resize and sidebar toggle), and the team bar."""
        self.work.arrange_panes()
        self.team_bar.display = self.team_panes.team is not None
        if self.team_panes.team is not None:
            self.team_bar.update(self.team_panes.summary())

    def _client(self) -> AppClient:
        if self.client is None:
            raise RuntimeError("the runtime is still starting")
        return self.client

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

    @property
    def teams(self) -> TeamControl:
        if self._teams is None:
            from roder_tui.team_control import TeamControl

            self._teams = TeamControl(self, self.team_panes, self._client, self._family)
        return self._teams

    def show_info(self, title: str, text: str) -> None:
        from roder_tui.screens.info import InfoScreen

        self.push_screen(InfoScreen(title, text))

    def open_thread(self) -> str:
        """The open thread's id (an error when none is open)."""
        if self.thread_id is None:
            raise RuntimeError("no thread is open")
        return self.thread_id

    async def _read_host_directory(self, path: str) -> list[tuple[str, bool]]:
        """One folder of the host's workspace (``fs/readDirectory``, .gitignore respected)."""
        from roder_core.server.errors import RpcError
        from roder_core.server.protocol_host import FS_READ_DIRECTORY, FsReadDirectoryParams

        try:
            result = await self._client().call(FS_READ_DIRECTORY, FsReadDirectoryParams(path=path, respect_gitignore=True))
        except RpcError:
            return []
        return [(e.name, e.kind == "dir") for e in result.entries]

    def _with_shell_cards(self, thread_id: str, items: list[Any]) -> list[Any]:
        """The thread's items with the ``!cmd`` cards run in it, each after the item it followed."""
        for anchor, card in self._shell_cards.get(thread_id, []):
            index = next((i + 1 for i, item in enumerate(items) if item.id == anchor), 0 if anchor is None else len(items))
            items.insert(index, card)
        return items

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
        self.palette_inputs_changed()  # the palette marks the theme in use
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
