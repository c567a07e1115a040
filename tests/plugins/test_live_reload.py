"""A plugin installed, disabled or enabled in the running app is used from the next message:
its command runs, its skill is offered and its MCP server's tool reaches the model, with no
restart. Pilot drives the real ``/plugin`` screen; the model is the loopback server."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from roder_core.plugins.store import PluginStore
from roder_core.settings.paths import RoderPaths
from roder_core.testing.fake_server import FakeModelServer, RecordedRequest
from roder_tui.app import RoderApp
from roder_tui.screens.plugins import PluginScreen
from tests.plugins.support import marketplace, write, write_json
from tests.tui.helpers import make_app, ready, turn_done, until

FIXTURE_SERVER = Path(__file__).resolve().parents[1] / "ecosystem" / "mcp_fixture_server.py"
MCP_TOOL = "mcp__plugin_live-kit_fixture__echo"
HOOK_MARK = "live-hook-context-4417"


def live_kit(root: Path, hooks: bool = False) -> Path:
    """A catalog with one plugin: a command, a skill and an MCP server (and a hook if asked)."""
    plugin = root / "live-kit"
    write_json(plugin / ".claude-plugin" / "plugin.json", {"name": "live-kit", "version": "1.0.0"})
    write(plugin / "commands" / "hello.md", "---\ndescription: Greet someone\n---\nSay a warm hello to $ARGUMENTS.\n")
    write(plugin / "skills" / "greeting" / "SKILL.md", "---\nname: greeting\ndescription: How to greet politely\n---\nBow.\n")
    shutil.copy(FIXTURE_SERVER, plugin / "server.py")
    write_json(
        plugin / ".mcp.json", {"fixture": {"command": sys.executable, "args": ["${CLAUDE_PLUGIN_ROOT}/server.py", "stdio"]}}
    )
    if hooks:  # plain text a UserPromptSubmit hook prints is context for the model
        hook = {"hooks": [{"type": "command", "command": f"echo {HOOK_MARK}"}]}
        write_json(plugin / "hooks" / "hooks.json", {"hooks": {"UserPromptSubmit": [hook]}})
    return marketplace(root, "live-market", [{"name": "live-kit", "source": "./live-kit"}])


def status_of(screen: PluginScreen) -> str:
    return str(screen.query_one("#plugin-status", Static).render())


def offered(request: RecordedRequest) -> tuple[list[str], str]:
    """The tool names and the system prompt of one chat-completions request."""
    body = request.json
    tools = [t["function"]["name"] for t in body.get("tools") or []]
    system = " ".join(str(m.get("content")) for m in body["messages"] if m["role"] == "system")
    return tools, system


async def open_plugins(app: RoderApp, pilot: object) -> PluginScreen:
    await app.run_slash("/plugin")
    await until(pilot, lambda: isinstance(app.screen, PluginScreen), what="the plugin screen")
    screen = app.screen
    assert isinstance(screen, PluginScreen)
    await until(pilot, lambda: [r.name for r in screen.results] == ["live-kit"], what="the catalog listed")
    return screen


async def preview_on_screen(app: RoderApp, pilot: Any) -> PluginScreen:
    """Open ``/plugin`` and preview the listed plugin."""
    screen = await open_plugins(app, pilot)
    await pilot.press("enter")
    await until(pilot, lambda: screen.preview is not None, what="the preview")
    return screen


async def install_on_screen(app: RoderApp, pilot: Any) -> str:
    """Open ``/plugin``, preview the listed plugin, install it accepting what it runs; the status."""
    screen = await preview_on_screen(app, pilot)
    await pilot.press("i")
    await until(pilot, lambda: "Install it? y accepts" in status_of(screen), what="the question")
    await pilot.press("y")
    await until(pilot, lambda: status_of(screen).startswith("installed live-kit"), what="the install")
    return status_of(screen)


async def disable_on_screen(app: RoderApp, pilot: Any) -> str:
    """Open ``/plugin`` and disable the listed plugin; the status."""
    screen = await preview_on_screen(app, pilot)
    await pilot.press("d")
    await until(pilot, lambda: "disabled live-kit" in status_of(screen), what="the disable")
    return status_of(screen)


async def close_screen(app: RoderApp, pilot: Any) -> None:
    await pilot.press("escape")
    await until(pilot, lambda: not isinstance(app.screen, PluginScreen), what="the screen to close")


async def test_an_installed_plugin_works_from_the_next_message_and_leaves_when_disabled(
    tmp_path: Path, workspace: Path, roder_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    PluginStore(RoderPaths.from_env()).add_marketplace(str(live_kit(tmp_path / "catalog")))
    steps = [{"text": "Hello before."}, {"text": "Hello, Ada!"}, {"text": "Plain again."}]
    async with FakeModelServer(steps) as model:
        write(
            roder_home / "config.toml",
            f'[providers.local]\ndialect = "chat-completions"\nbase_url = "{model.base_url}"\n'
            'api_key_env = "LOCAL_API_KEY"\nmodels = ["my-model"]\n'
            "[mcp]\nstartup_wait = 25\n",  # the next turn waits for the new server as for one at start
        )
        monkeypatch.setenv("LOCAL_API_KEY", "sk-local-test-0123456789")
        app = make_app(workspace, None, monkeypatch, provider="local")
        async with app.run_test(size=(120, 40)) as pilot:
            await ready(pilot)
            await app.send("hi")
            await turn_done(pilot, 1)
            tools, system = offered(model.calls[0])
            assert MCP_TOOL not in tools and "live-kit:greeting" not in system

            status = await install_on_screen(app, pilot)  # its MCP server runs code: asked first
            assert status == "installed live-kit@live-market 1.0.0: commands, skills and MCP servers in use from the next message"
            await close_screen(app, pilot)
            await until(pilot, lambda: "live-kit:hello" in [c.name for c in app.slash_commands], what="the command listed")

            await app.run_slash("/live-kit:hello Ada")  # the plugin's command, in this session
            await turn_done(pilot, 2)
            tools, system = offered(model.calls[1])
            assert "Say a warm hello to Ada." in json.dumps(model.calls[1].json["messages"])
            assert "live-kit:greeting: How to greet politely" in system  # its skill is offered
            assert MCP_TOOL in tools  # its MCP server started and its tool reaches the model

            gone = "commands, skills and MCP servers gone from the next message"
            assert await disable_on_screen(app, pilot) == f"disabled live-kit@live-market: {gone}"
            await pilot.press("escape")
            await until(pilot, lambda: "live-kit:hello" not in [c.name for c in app.slash_commands], what="the command gone")
            await app.send("hi again")
            await turn_done(pilot, 3)
            tools, system = offered(model.calls[2])
            assert MCP_TOOL not in tools and "live-kit:greeting" not in system


async def test_a_plugins_hook_fires_from_the_next_message_after_a_live_install_and_stops_when_disabled(
    tmp_path: Path, workspace: Path, roder_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No restart: the note names the hooks among what applies, the next message runs the hook
    (its output reaches the model), and after a disable the next message runs it no more."""
    PluginStore(RoderPaths.from_env()).add_marketplace(str(live_kit(tmp_path / "catalog", hooks=True)))
    steps = [{"text": "one"}, {"text": "two"}]
    async with FakeModelServer(steps) as model:
        write(
            roder_home / "config.toml",
            f'[providers.local]\ndialect = "chat-completions"\nbase_url = "{model.base_url}"\n'
            'api_key_env = "LOCAL_API_KEY"\nmodels = ["my-model"]\n',
        )
        monkeypatch.setenv("LOCAL_API_KEY", "sk-local-test-0123456789")
        app = make_app(workspace, None, monkeypatch, provider="local")
        async with app.run_test(size=(120, 40)) as pilot:
            await ready(pilot)
            assert await install_on_screen(app, pilot) == (
                "installed live-kit@live-market 1.0.0: commands, skills, hooks and MCP servers in use from the next message"
            )
            await close_screen(app, pilot)
            await app.send("hi")
            await turn_done(pilot, 1)
            assert HOOK_MARK in json.dumps(model.calls[0].json["messages"])  # the hook ran for this message

            await disable_on_screen(app, pilot)
            await close_screen(app, pilot)
            await app.send("hi again")
            await turn_done(pilot, 2)
            last = model.calls[1].json["messages"][-1]
            assert last["role"] == "user" and "hi again" in json.dumps(last) and HOOK_MARK not in json.dumps(last)


@pytest.mark.parametrize("trusted", [True, False])
async def test_a_reload_reads_a_projects_plugin_settings_only_in_a_trusted_folder(
    tmp_path: Path, workspace: Path, trusted: bool
) -> None:
    """The project enables a plugin the user disabled: after ``plugins_changed`` its skill is
    offered and its hook loaded in a trusted folder and neither in an untrusted one, exactly as
    at start."""
    from roder_core.runtime.bootstrap import StartSettings, start_runtime

    store = PluginStore(RoderPaths.from_env())
    store.add_marketplace(str(live_kit(tmp_path / "catalog", hooks=True)))
    started = start_runtime(StartSettings(cwd=workspace, provider="mock", mode="ask", sandbox="off", trust=trusted))
    runtime = started.runtime
    try:
        assert "skill" not in runtime.tool_names()
        store.install("live-kit", store.preview("live-kit").consent)
        store.set_enabled("live-kit@live-market", False)
        write_json(workspace / ".claude" / "settings.json", {"enabledPlugins": {"live-kit@live-market": True}})
        await runtime.plugins_changed()
        assert ("skill" in runtime.tool_names()) is trusted
        assert ("plugin:live-kit:hooks" in runtime.registry.extensions()) is trusted
        store.set_enabled("live-kit@live-market", True)
        (workspace / ".claude" / "settings.json").unlink()
        await runtime.plugins_changed()
        assert "skill" in runtime.tool_names()  # the user's own choice applies in any folder
        assert "plugin:live-kit:hooks" in runtime.registry.extensions()
    finally:
        await runtime.close()


async def test_a_plugin_installed_from_another_terminal_is_announced_and_its_command_works(
    tmp_path: Path, workspace: Path, roder_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``roder plugin install`` in another process: the running app says what applied, and the
    plugin's command joins ``/`` without a restart."""
    from tests.server.support import roder_command

    PluginStore(RoderPaths.from_env()).add_marketplace(str(live_kit(tmp_path / "catalog", hooks=True)))
    app = make_app(workspace, [], monkeypatch)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await ready(pilot)
        assert "live-kit:hello" not in [c.name for c in app.slash_commands]
        process = await asyncio.create_subprocess_exec(
            *roder_command("plugin", "install", "live-kit@live-market", "--yes"),
            cwd=workspace,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await process.communicate()
        assert process.returncode == 0, err.decode()
        notes = lambda: [n.message for n in app._notifications if "outside this session" in n.message]  # noqa: E731
        await until(pilot, lambda: bool(notes()), what="the notice")
        assert notes() == [
            "plugins changed outside this session (live-kit@live-market): "
            "commands, skills, hooks and MCP servers applied from the next message"
        ]
        await until(pilot, lambda: "live-kit:hello" in [c.name for c in app.slash_commands], what="the command listed")
