"""The app attached to a real ``roder serve`` host over its unix socket (Pilot-driven): a
prompt's answer, a message queued by another client showing here, the palette's rows coming
from the host and changing its mode."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from roder_core.server.protocol import (
    INITIALIZE,
    SESSION_GET,
    TURN_STEER,
    ClientInfo,
    InitializeParams,
    SessionGetParams,
    TurnSteerParams,
)
from roder_core.server.protocol_attach import (
    PALETTE_COMMANDS,
    PaletteCommandsParams,
)
from roder_core.server.remote_client import RemoteAppClient
from roder_core.testing.fake_server import ThreadedFakeServer
from roder_tui.app import RoderApp
from tests.e2e.host_support import HostProcess, write_local_provider
from tests.tui.helpers import ready, until

STEPS = [
    {"text": "Working on the first part of it now.", "chunk_size": 5, "gate": "mid", "gate_after": 3},
    {"text": "Done, and I saw your note. ATTACHED-OK"},
]


def attached_app(host: HostProcess, workspace: Path) -> RoderApp:
    args = argparse.Namespace(attach=True, prompt=[], resume=None, continue_last=False, provider=None)
    app = RoderApp(args, client_factory=lambda: RemoteAppClient.connect_unix(host.socket), cwd=workspace)
    app.animation_level = "none"
    return app


async def test_the_attached_app_streams_shows_other_clients_queue_and_uses_the_hosts_palette(
    roder_home: Path, workspace: Path
) -> None:
    with ThreadedFakeServer(STEPS, models=("my-model",)) as server:
        write_local_provider(roder_home, server.base_url)
        host = await asyncio.to_thread(HostProcess, workspace, roder_home, "--provider", "local", "--model", "my-model")
        try:
            app = attached_app(host, workspace)
            async with app.run_test(size=(100, 30)) as pilot:
                await ready(pilot)
                assert app.client is not None and app.client.shared
                await pilot.press(*"start please", "enter")
                await asyncio.to_thread(server.gate_reached("mid").wait, 60)
                await until(pilot, lambda: app.turn_id is not None, what="the running turn")

                other = await RemoteAppClient.connect_unix(host.socket)
                await other.call(INITIALIZE, InitializeParams(client_info=ClientInfo(name="phone")))
                steered = await other.call(
                    TURN_STEER,
                    TurnSteerParams(
                        thread_id=app.thread_id or "", expected_turn_id=app.turn_id or "", prompt="mind the tests too"
                    ),
                )
                await until(pilot, lambda: any(q.item_id == steered.item_id for q in app.queued.queued), what="the queue")
                server.open_gate("mid")
                await until(
                    pilot, lambda: any("ATTACHED-OK" in e.copy_text() for e in app.transcript.model.entries), 60, "the answer"
                )
                await until(pilot, lambda: not app.queued.queued and app.turn_id is None, what="the queue to empty")

                rows = (
                    await app._client().call(PALETTE_COMMANDS, PaletteCommandsParams(state=await app.palette_state()))
                ).commands
                titles = [r.title for r in rows]
                assert "New thread" in titles and any(t.startswith("Mode: plan") for t in titles)
                await pilot.press("ctrl+p")
                await pilot.press(*"Mode: plan")
                await until(pilot, lambda: bool(app.panels and app.panels[0].shown), what="palette rows")
                await pilot.press("enter")
                await until(pilot, lambda: app.status_bar.state.get("mode") == "plan", what="plan mode")
                assert (await other.call(SESSION_GET, SessionGetParams())).mode == "plan"  # it changed on the host
                await other.close()
                await pilot.press("ctrl+q")
        finally:
            await asyncio.to_thread(host.stop)


async def test_attached_from_another_machine_the_hosts_files_complete_and_attach(roder_home: Path, workspace: Path) -> None:
    """``files_remote``: the workspace is the host's; ``@`` lists it through fs/readDirectory and
    an ``@file`` in a prompt is attached by the host (this machine never reads it)."""
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text("print('hello from the host')\n")
    (workspace / "node_modules").mkdir()
    (workspace / "node_modules" / "app_dep.js").write_text("skip me")
    with ThreadedFakeServer([{"text": "I read it. FILE-OK"}], models=("my-model",)) as server:
        write_local_provider(roder_home, server.base_url)
        host = await asyncio.to_thread(HostProcess, workspace, roder_home, "--provider", "local", "--model", "my-model")
        try:
            args = argparse.Namespace(attach=True, prompt=[], resume=None, continue_last=False, provider=None)
            app = RoderApp(
                args, client_factory=lambda: RemoteAppClient.connect_unix(host.socket), cwd=workspace, files_remote=True
            )
            app.animation_level = "none"
            async with app.run_test(size=(100, 30)) as pilot:
                await ready(pilot)
                assert app.prompt_bar.read_directory is not None
                await pilot.press(*"look at @app")
                await until(pilot, lambda: app.prompt_bar._files == ["src/app.py"], what="the host's file list")
                app.prompt_bar.input.text = ""
                await app.send("look at @src/app.py please")
                await until(
                    pilot, lambda: any("FILE-OK" in e.copy_text() for e in app.transcript.model.entries), 60, "the answer"
                )
                assert "hello from the host" in str(server.calls[-1].json["messages"])
        finally:
            await asyncio.to_thread(host.stop)
