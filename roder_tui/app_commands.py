"""The app's slash commands, listings and command palette: local commands run here, the rest
through the client."""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roder_tui import listings
from roder_tui.app_rewind import AppRewind

if TYPE_CHECKING:
    from roder_core.kernel.services import PaletteCommand
    from roder_tui.widgets.command_palette import CommandPalette
    from roder_tui.widgets.help_panel import HelpPanel
    from roder_tui.widgets.overlay import OverlayPanel


log = logging.getLogger(__name__)

#: The formats ``/export`` names, and the one each means.
_EXPORT_FORMATS = {"md": "md", "markdown": "md", "json": "json", "jsonl": "json"}


def export_arguments(arguments: str) -> tuple[str, str | None]:
    """``/export [md|json] [path]`` as (format, path or None). A path alone (``/export
    notes/today.json``) is the path, its format told by its suffix; it was read as an unknown
    format, and the thread went to the default file instead, silently. The rest of the line is
    the path, spaces included."""
    rest = arguments.strip()
    first, _, tail = rest.partition(" ")
    if first.lower() in _EXPORT_FORMATS:
        return _EXPORT_FORMATS[first.lower()], tail.strip() or None
    if not rest:
        return "md", None
    return ("json" if rest.lower().endswith((".json", ".jsonl")) else "md"), rest


class AppCommands(AppRewind):
    """Slash commands, listings and the command palette, each running a layer below's action."""

    async def _load_commands(self) -> None:
        from roder_core.server.errors import RpcError
        from roder_core.server.protocol_features import COMMANDS_LIST, CommandsListParams

        try:
            self.slash_commands = (await self._client().call(COMMANDS_LIST, CommandsListParams())).commands
        except RpcError:
            self.slash_commands = []
        self.prompt_bar.set_commands([(c.name, c.argument_hint, c.description) for c in self.slash_commands])
        self.palette_inputs_changed()  # the palette lists every slash command

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
            "export": lambda: self.export_thread(*export_arguments(arguments)),
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
        rows = [(row_id, f"{label} ✓" if row_id == current else label) for row_id, label in rows]  # as the palette marks it
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

    async def export_thread(self, fmt: str = "md", path: str | None = None) -> None:
        from roder_core.server.protocol import THREAD_READ, ThreadReadParams

        thread = (
            await self._client().call(THREAD_READ, ThreadReadParams(thread_id=self.open_thread(), include_turns=True))
        ).thread
        fmt = _EXPORT_FORMATS.get(fmt.lower(), "md")
        here = Path.cwd() if self.files_remote else self.cwd  # the file is written on this machine
        target = Path(path) if path else here / f"roder-{thread.id}.{fmt}"
        target = target if target.is_absolute() else here / target
        from roder_core.threads.transcript import render_markdown  # the one renderer, with safe fences

        text = json.dumps(thread.wire(), indent=2) if fmt == "json" else render_markdown(thread)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)  # `/export md notes/today.md` makes notes/
            target.write_text(text, encoding="utf-8")
        except OSError as exc:
            self.notify(f"could not write {target}: {exc}", severity="error")
            return
        self.notify(str(target), title="exported")

    def action_command_palette(self) -> None:
        palette, _help = self.mount_panels()
        self._open_panel(palette)

    def action_help(self) -> None:
        _palette, help_panel = self.mount_panels()
        self._open_panel(help_panel)

    async def prebuild_panels(self) -> None:
        """Build the palette and help once the app is idle (started, and the typing paused), so
        that ctrl+p and F1 only show them; help's key table is laid out, and the palette's first
        view drawn, for the screen's size too. A key pressed before that builds them on the spot
        (``mount_panels``)."""
        await self.input_pause.wait()
        palette, help_panel = self.mount_panels()
        if self._panels_mounted is not None:
            await self._panels_mounted
        palette.prepare(self.screen_stack[0].size)
        help_panel.prepare(self.screen_stack[0].size)

    def mount_panels(self) -> tuple[CommandPalette, HelpPanel]:
        """The palette and help, mounted on the main screen's overlay layer once (when the app is
        idle, or by the first ctrl+p or F1 before that), hidden until opened. They come first
        among the screen's children: Textual numbers the painting order of a container's
        children from the last one, so a panel shown after them would renumber every widget of
        the screen and redraw all of it on each open and close. The palette's rows load once
        the runtime is ready."""
        if self.panels is None:
            from roder_tui.widgets.command_palette import CommandPalette
            from roder_tui.widgets.help_panel import HelpPanel

            palette = CommandPalette(self._palette_rows, self.run_palette_command)
            help_panel = HelpPanel(self._keymap)
            self.panels = (palette, help_panel)
            self._panels_mounted = self.screen_stack[0].mount(palette, help_panel, before=0)
        return self.panels

    def _open_panel(self, panel: OverlayPanel) -> None:
        """Show ``panel`` over the main screen (once mounted); over a dialog, say that it comes first."""
        if self.screen is not self.screen_stack[0]:
            self.notify("Close this dialog first (esc): help and the palette open over the main screen.", timeout=4)
        elif panel.is_mounted:
            panel.open()
        else:  # a key pressed before the first frame
            self.run_worker(self._open_when_mounted(panel), group="panels")

    async def _open_when_mounted(self, panel: OverlayPanel) -> None:
        if self._panels_mounted is not None:
            await self._panels_mounted
        self._open_panel(panel)

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


async def _perform(action: Callable[[], Any]) -> None:
    """Run an app action that may or may not be a coroutine."""
    result = action()
    if inspect.isawaitable(result):
        await result
