"""The full-screen Roder app.

The app drives the runtime only through a control-plane client (``AppClient``): in process
(``LocalAppClient``) or attached to a host (``RemoteAppClient``, ``roder attach``); every action
here is a method a remote client could call too. Runtime work never runs on the
event loop's critical path: the first frame is painted before the runtime is even imported, and
stream deltas are coalesced to at most ~30 repaints a second (over SSH 5, fewer when a CPU budget
says so: ``roder_tui.remote``).
"""

from __future__ import annotations

from roder_tui.app_state import REMOTE  # first: it tunes Textual for the link before Textual loads

# isort: split
import argparse
import asyncio
import contextlib
import gc
import inspect
import logging
import os
import signal
from typing import TYPE_CHECKING, Any

from textual import work

from roder_core import __version__
from roder_tui.app_turns import AppTurns
from roder_tui.home_config import configured, git_branch, roder_home_paths
from roder_tui.keymap import app_bindings
from roder_tui.startup import end_startup

if TYPE_CHECKING:
    from roder_core.server.protocol import InitializeResult

log = logging.getLogger(__name__)


def _preimport() -> None:
    """Import the runtime and the extensions on a thread while the first frame paints."""
    import roder_core.server.client  # noqa: F401
    from roder_core.kernel.distribution import discovered_factories

    discovered_factories()


def _after_idle() -> None:
    """Work of the in-process runtime that "idle" does not wait for, done on a thread right after
    it. The server's handler modules beyond its core (commands, palette, MCP, plugins): the server
    imports them on the first call of such a method, which after start-up ran on the event loop
    (about 0.1 s of CPU) while the first keystrokes waited. The tools' argument schemas, which
    their registration leaves to the first request (``kernel.tools.registration_spec``), so the
    first prompt does not wait for them either."""
    from roder_core.kernel.tool_args import build_pending_schemas
    from roder_core.server.dispatcher import load_method_modules

    load_method_modules()
    build_pending_schemas()


def _preimport_renderers() -> None:
    """The message renderers (Markdown, Pygments), imported on a thread once the in-process
    runtime is idle (where ``_preimport`` imported them before), so the first streamed answer does
    not wait for them and start-up does not share a core with them."""
    import roder_tui.widgets.messages  # noqa: F401


class RoderApp(AppTurns):
    """The top layer: start-up, the runtime connection and its notification stream."""

    TITLE = "Roder"
    BINDINGS = app_bindings()
    #: Roder's palette (widgets/command_palette.py) replaces Textual's: it is built once, not per open.
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

    def on_mount(self) -> None:
        # SIGTERM (a `kill`, a session manager, a container stop) quits as ctrl+q does: without
        # this the process died on the spot, its turn left running in the file and the terminal
        # left in the app's modes. 143 is what a shell reports for a process ended by SIGTERM.
        # (Only the main thread may take signals: an app run elsewhere keeps the default.)
        with contextlib.suppress(ValueError, RuntimeError):
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, self.leave, 128 + signal.SIGTERM)
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

    @work(exclusive=True, group="boot")
    async def _boot(self) -> None:
        try:
            info = await self._connect()
        finally:
            # The collector, off since the process started (``cli.run``), comes back once the
            # runtime is up: its imports and class building make hundreds of thousands of
            # long-lived objects, and collections over them took about a tenth of the time to
            # "idle". ``end_startup`` freezes them first.
            end_startup()
        client = self.client
        if info is None or client is None:
            return
        # What the prompt does not need comes after "idle": the renderers of answers (once the
        # keyboard pauses), plugins' themes, the sandbox probe's verdict, commands, MCP
        # completions, the thread list.
        in_process = self._client_factory is None
        if in_process:
            methods = asyncio.create_task(asyncio.to_thread(_after_idle))
            self.run_worker(self._import_renderers(), group="renderers", exit_on_error=False)
        await self._add_plugin_themes()
        await self._show_sandbox()
        if REMOTE:
            from roder_tui.widgets.messages import ToolCardView

            ToolCardView.animate_spinner = False
        if in_process:
            await methods
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
        await self._open_initial_thread()
        # Everything alive now lives as long as the app: keep it out of the cyclic collector's
        # full passes, which otherwise stall streaming for 100+ ms on a large heap; and make full
        # passes ten times rarer (young garbage is still collected as often as ever).
        gc.freeze()
        gen0, gen1, _gen2 = gc.get_threshold()
        gc.set_threshold(gen0, gen1, 100)
        self.ready.set()
        self.run_worker(self.prebuild_panels(), group="panels", exit_on_error=False)
        self.prompt_bar.input.starting = False
        prompt = " ".join(getattr(self.args, "prompt", None) or []).strip()
        if prompt:
            await self.send(prompt)

    async def _connect(self) -> InitializeResult | None:
        """Start the runtime (or connect to a host's), initialize, and show "idle"; None when the
        app exits instead (the user quit at the trust prompt, or the runtime did not start)."""
        from roder_core.errors import RoderError
        from roder_core.kernel.registry import RegistryError
        from roder_core.server.errors import RpcError
        from roder_core.server.protocol import INITIALIZE, ClientInfo, InitializeParams
        from roder_core.settings.config import ConfigError

        if not await self._ask_trust():
            self.exit(0)
            return None
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
            return None
        for warning in info.warnings:
            self.notify(warning, severity="warning", timeout=8)
        # Segments render on this side; palette rows come from the host (palette/commands).
        self.status_bar.set_segments(await asyncio.to_thread(client.status_segments, info.cwd))
        self.status_bar.update_state(provider=info.provider, model=info.model, mode=info.mode, activity="idle")
        return info

    async def _ask_trust(self) -> bool:
        """On the first open of a folder that brings its own config, hooks, extensions, skills,
        commands, agents or MCP servers, ask whether to trust it, before the runtime starts (so
        "yes" loads them now); the answer is remembered. False: the user chose to quit. Attached,
        the folder is the host's business; ``--trust`` has already answered."""
        if getattr(self.args, "attach", False) or getattr(self.args, "trust", False):
            return True
        from roder_core.policy.trust import TrustStore, project_items
        from roder_core.settings.paths import RoderPaths

        paths = RoderPaths.from_env(dict(os.environ))
        if not await asyncio.to_thread(TrustStore(paths).needs_prompt, self.cwd):
            return True
        from roder_core.policy.audit import AuditLog
        from roder_core.server.methods.trust import record_trust
        from roder_tui.screens.trust_prompt import TrustPromptScreen

        end_startup()  # the answer may take minutes: the collector runs meanwhile, not after it
        choice = await self.push_screen_wait(TrustPromptScreen(str(self.cwd), project_items(self.cwd)))
        if choice == "quit":
            return False
        # off the event loop: the audit record is an appended, synced file write
        await asyncio.to_thread(record_trust, paths, self.cwd, choice == "trust", AuditLog(paths.audit_file).record, "roder-tui")
        return True

    async def _import_renderers(self) -> None:
        """Import the answer renderers on a thread in the first pause of the typing (or when a
        prompt is sent), so no keystroke waits for the import; the objects it made are kept out
        of the collector's full passes like the rest of start-up's."""
        self.input_pause.typed()  # the pause counts from "idle"
        await self.input_pause.wait()
        await asyncio.to_thread(_preimport_renderers)
        gc.freeze()

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

    async def on_unmount(self) -> None:
        with contextlib.suppress(ValueError, RuntimeError):
            asyncio.get_running_loop().remove_signal_handler(signal.SIGTERM)
        self.coalescer.close()
        if self.client is not None:
            with contextlib.suppress(Exception):
                await self.client.close()


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
