"""What a plugin runs, applied to a running session without a restart: its process extension
starts (and stops only after the call that uses it), its language server serves the next edit
(and is shut down cleanly when the plugin goes), and a plugin installed by ``roder plugin`` in
another terminal reaches the session. Real processes throughout: the Python SDK's probe
extension, a small stdio language server, the ``roder`` command; the control plane in process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from roder_ext_command_hooks import PluginHooksExtension
from roder_ext_process.services import ProcessToolSet

from roder_core.plugins.store import PluginStore
from roder_core.runtime.bootstrap import StartSettings
from roder_core.server.client import LocalAppClient
from roder_core.server.protocol import (
    THREAD_READ,
    THREAD_START,
    TURN_START,
    ThreadReadParams,
    ThreadStartParams,
    TurnStartParams,
)
from roder_core.server.protocol_plugins import (
    PLUGINS_INSTALL,
    PLUGINS_PREVIEW_INSTALL,
    PLUGINS_UNINSTALL,
    InstallParams,
    PluginParams,
    UninstallParams,
)
from roder_core.settings.paths import RoderPaths
from tests.builders import next_event, scripted_client, until
from tests.plugins.support import marketplace, write, write_json
from tests.process_extensions.test_process_extensions import PROBE, call, probe_env
from tests.server.support import roder_command

TINY_LSP = Path(__file__).with_name("tiny_lsp.py")


def plugin_catalog(root: Path, name: str, files: dict[str, Path | str], manifests: dict[str, Any]) -> str:
    """A catalog holding one plugin (files copied or written, JSON manifests), added; its id."""
    folder = root / name
    write_json(folder / ".claude-plugin" / "plugin.json", {"name": name, "version": "1.0.0"})
    for relative, content in files.items():
        if isinstance(content, Path):
            shutil.copy(content, folder / relative)
        else:
            write(folder / relative, content)
    for relative, data in manifests.items():
        write_json(folder / relative, data)
    marketplace(root, f"{name}-market", [{"name": name, "source": f"./{name}"}])
    PluginStore(RoderPaths.from_env()).add_marketplace(str(root))
    return f"{name}@{name}-market"


async def install(app: LocalAppClient, identifier: str) -> Any:
    """Through the control plane, as ``/plugin`` and editors do (consenting to what it runs)."""
    preview = await app.call(PLUGINS_PREVIEW_INSTALL, PluginParams(plugin=identifier))
    return await app.call(PLUGINS_INSTALL, InstallParams(plugin=identifier, consent=preview.consent))


async def tool_results(app: LocalAppClient, thread_id: str) -> list[Any]:
    read = (await app.call(THREAD_READ, ThreadReadParams(thread_id=thread_id, include_turns=True))).thread
    return [item for turn in read.turns for item in turn.items if item.type == "toolResult"]


def probe_table(marks: Path) -> dict[str, Any]:
    """A plugin's ``.roder-extensions.json`` running the SDK's probe from the installed copy."""
    return {
        "probe": {
            "command": sys.executable,
            "args": ["${CLAUDE_PLUGIN_ROOT}/probe_extension.py"],
            "capabilities": ["fs.write.workspace"],
            "env": probe_env(marks),
        }
    }


def marks_folder(workspace: Path) -> Path:
    folder = workspace / "marks"
    folder.mkdir()
    return folder


async def test_a_plugins_process_extension_starts_live_and_stops_only_after_the_call_using_it(
    roder_home: Path, workspace: Path, tmp_path: Path
) -> None:
    marks = marks_folder(workspace)
    extension = probe_table(marks)
    identifier = plugin_catalog(
        tmp_path / "catalog", "probe-plugin", {"probe_extension.py": PROBE}, {".roder-extensions.json": extension}
    )
    steps = [call("instance"), {"text": "done"}, call("hold"), {"text": "done"}]
    async with scripted_client(workspace, tmp_path, steps) as app:
        runtime = app.runtime
        assert "instance" not in runtime.tool_names()
        installed = await install(app, identifier)
        assert "Roder extensions" in installed.applied and installed.next_start == [] and not installed.restart_required
        assert {"instance", "hold"} <= set(runtime.tool_names())  # for the next turn
        thread = (await app.call(THREAD_START, ThreadStartParams())).thread
        events = app.subscribe(thread.id)
        await app.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="go"))
        await next_event(events, "turn/completed")
        (answered,) = await tool_results(app, thread.id)
        assert not answered.is_error and len(answered.text) == 32  # the process answered

        [tools] = [s for s in runtime.registry.services("ToolProvider") if isinstance(s, ProcessToolSet)]
        await app.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="again"))
        await until(lambda: (marks / "holding").exists())  # the call is running in the process
        await app.call(PLUGINS_UNINSTALL, UninstallParams(plugin=identifier))
        assert "hold" not in runtime.tool_names()  # gone for the next turn ...
        assert tools.supervisor.state().state == "running"  # ... but not under the call in flight
        (marks / "release").write_text("go")
        await next_event(events, "turn/completed")
        (_, held) = await tool_results(app, thread.id)
        assert not held.is_error and held.text == "released"  # the call finished on its process
        await until(lambda: tools.supervisor.state().state != "running")  # stopped once that turn ended


async def test_a_plugins_language_server_serves_the_next_edit_and_is_shut_down_cleanly_when_removed(
    roder_home: Path, workspace: Path, tmp_path: Path
) -> None:
    server = {
        "tiny": {
            "command": sys.executable,
            "args": ["${CLAUDE_PLUGIN_ROOT}/tiny_lsp.py"],
            "extensionToLanguage": {".tiny": "tiny"},
        }
    }
    identifier = plugin_catalog(tmp_path / "catalog", "tiny-lsp", {"tiny_lsp.py": TINY_LSP}, {".lsp.json": server})
    write_call = {"name": "write", "arguments": {"path": "a.tiny", "content": "fine\nBROKEN here\n"}}
    again = {"name": "write", "arguments": {"path": "b.tiny", "content": "BROKEN too\n"}}
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps({"steps": [{"tool_calls": [write_call]}, {"text": "done"}, {"tool_calls": [again]}, {"text": "done"}]})
    )
    # trusted: a plugin's language server waits for trust, as at start (``launch.plan``)
    env = {**os.environ, "RODER_MOCK_SCRIPT": str(script)}
    settings = StartSettings(cwd=workspace, provider="mock", mode="bypass", interactive=False, trust=True, env=env)
    async with LocalAppClient.start(settings) as app:
        installed = await install(app, identifier)
        assert "LSP servers" in installed.applied and installed.next_start == []
        thread = (await app.call(THREAD_START, ThreadStartParams())).thread
        events = app.subscribe(thread.id)
        await app.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="go"))
        await next_event(events, "turn/completed")
        (wrote,) = await tool_results(app, thread.id)
        assert (
            "Diagnostics this change introduced (tiny)" in wrote.text
            and "a.tiny:2:1 error: tiny: this line is broken" in wrote.text
        )

        [lsp] = [s for s in app.runtime.registry.services("ToolProvider") if s.id() == "lsp-tools"]
        manager = lsp.slot.made
        client = manager.states["tiny"].client
        assert client is not None and client.alive
        await app.call(PLUGINS_UNINSTALL, UninstallParams(plugin=identifier))
        assert "tiny" not in manager.states
        assert client.process is not None and client.process.returncode == 0  # shutdown and exit, not killed

        await app.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="again"))
        await next_event(events, "turn/completed")
        (_, wrote_again) = await tool_results(app, thread.id)
        assert not wrote_again.is_error and "Diagnostics" not in wrote_again.text  # no server for .tiny now


async def test_a_plugin_installed_by_the_command_in_another_terminal_reaches_the_running_session(
    roder_home: Path, workspace: Path, tmp_path: Path
) -> None:
    hook = {"hooks": [{"type": "command", "command": "echo elsewhere-hook-mark"}]}
    identifier = plugin_catalog(
        tmp_path / "catalog",
        "far-kit",
        {"commands/far.md": "---\ndescription: From afar\n---\nSay hi from afar.\n"},
        {"hooks/hooks.json": {"hooks": {"UserPromptSubmit": [hook]}}},
    )
    async with scripted_client(workspace, tmp_path, [{"text": "done"}]) as app:
        notes = app.subscribe()
        assert "far-kit" not in str(await app.runtime.plugins_changed())
        done = subprocess.run(
            roder_command("plugin", "install", identifier, "--yes"),
            cwd=workspace,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, done.stderr
        changed = await next_event(notes, "plugins/changed")
        assert changed.elsewhere and changed.plugins == [identifier]
        assert changed.applied == ["commands", "hooks"] and changed.next_start == []
        assert any(isinstance(e, PluginHooksExtension) for e in app.runtime.registry.extensions().values())


async def test_a_turn_in_flight_keeps_the_hooks_it_started_with_and_the_next_turn_runs_the_new_ones(
    roder_home: Path, workspace: Path, tmp_path: Path
) -> None:
    """A PostToolUse hook installed while a call runs does not run for that call (the turn's set
    is the one it started with), and runs for the next turn's call."""
    hook = {"hooks": [{"type": "command", "command": 'echo "$CLAUDE_PLUGIN_ROOT" >> "$CLAUDE_PROJECT_DIR/post.log"'}]}
    identifier = plugin_catalog(tmp_path / "catalog", "audit-kit", {}, {"hooks/hooks.json": {"hooks": {"PostToolUse": [hook]}}})
    waiting = "touch holding; while [ ! -e release ]; do sleep 0.05; done; echo released"
    steps = [call("bash", command=waiting), {"text": "done"}, call("bash", command="echo again"), {"text": "done"}]
    async with scripted_client(workspace, tmp_path, steps) as app:
        thread = (await app.call(THREAD_START, ThreadStartParams())).thread
        events = app.subscribe(thread.id)
        await app.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="go"))
        await until(lambda: (workspace / "holding").exists())  # the call runs
        installed = await install(app, identifier)
        assert installed.applied == ["hooks"] and installed.next_start == []
        (workspace / "release").write_text("go")
        await next_event(events, "turn/completed")
        (first,) = await tool_results(app, thread.id)
        assert "released" in first.text
        assert not (workspace / "post.log").exists()  # not for the call that began before the install

        await app.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="again"))
        await next_event(events, "turn/completed")
        assert len((workspace / "post.log").read_text().splitlines()) == 1  # the next turn's call


async def test_a_plugins_extension_the_registry_refuses_is_said_and_its_process_stopped(
    roder_home: Path, workspace: Path, tmp_path: Path
) -> None:
    """Two plugins shipping the same extension (one id): the second is not loaded, the result
    and the notification say why, its process does not stay behind, the first keeps working."""
    marks = marks_folder(workspace)
    extension = probe_table(marks)
    first = plugin_catalog(tmp_path / "one", "probe-one", {"probe_extension.py": PROBE}, {".roder-extensions.json": extension})
    second = plugin_catalog(tmp_path / "two", "probe-two", {"probe_extension.py": PROBE}, {".roder-extensions.json": extension})
    async with scripted_client(workspace, tmp_path, [{"text": "done"}]) as app:
        notes = app.subscribe()
        assert (await install(app, first)).not_loaded == []
        refused = await install(app, second)
        assert refused.not_loaded == ["Probe not loaded: extension id 'probe' is already installed"]
        changed = await next_event(notes, "plugins/changed", plugins=[second])
        assert changed.not_loaded == refused.not_loaded
        source = app.runtime.registry.extensions()["roder-ext-plugin-processes"]
        [kept] = [e for e in source.current if e.name == "probe-one:probe"]
        [dropped] = [e for e in source.current if e.name == "probe-two:probe"]
        assert app.runtime.registry.extensions()["probe"] is kept
        assert dropped.supervisor.state().state != "running" and kept.supervisor.state().state == "running"


async def test_what_truly_waits_for_a_restart_is_named_and_nothing_else(
    roder_home: Path, workspace: Path, tmp_path: Path
) -> None:
    """A plugin's bin/ folder joins the commands' PATH when a session's brokers are made: named
    as waiting, while its command and hook applied."""
    hook = {"hooks": [{"type": "command", "command": "true"}]}
    identifier = plugin_catalog(
        tmp_path / "catalog",
        "tool-kit",
        {"commands/go.md": "Go.\n", "bin/kit-tool": "#!/bin/sh\necho kit\n"},
        {"hooks/hooks.json": {"hooks": {"Stop": [hook]}}},
    )
    async with scripted_client(workspace, tmp_path, [{"text": "done"}]) as app:
        installed = await install(app, identifier)
    assert installed.applied == ["commands", "hooks"]
    assert installed.next_start == ["bin/ commands"] and installed.restart_required
