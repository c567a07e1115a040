"""Trust and policy: what a project may declare, what a disabled plugin may still do (nothing),
``!`` lines under policy, and ``import-claude`` reading without writing."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import roder_ext_command_hooks
import roder_ext_mcp

from roder_core.customization.definitions import DefinitionRoots
from roder_core.customization.slash_commands import CommandRegistry
from roder_core.kernel.distribution import make_host
from roder_core.plugins.components import discover_with_plugins
from roder_core.plugins.enabled import active_plugins
from roder_core.plugins.service import PluginService
from roder_core.plugins.store import PluginStore
from roder_core.settings.paths import RoderPaths
from tests.plugins.support import claude_home, copy_official, file_stamps, marketplace, write, write_json
from tests.server.support import roder_command


def installed_hookify(tmp_path: Path) -> PluginStore:
    root = copy_official(tmp_path / "catalogs", ["hookify", "commit-commands"])
    plugins = PluginStore(RoderPaths.from_env())
    plugins.install_default(root)
    plugins.install("hookify", plugins.preview("hookify").consent)
    plugins.install("commit-commands", plugins.preview("commit-commands").consent)
    return plugins


def plugin_hooks(workspace: Path, trusted: bool) -> list[Any]:
    """The hooks of the plugins' hook extensions the factory makes for this folder."""
    made = roder_ext_command_hooks.create(make_host(workspace, trust=trusted))
    return [h for e in made if isinstance(e, roder_ext_command_hooks.PluginHooksExtension) for h in e.hooks.hooks]


def hook_commands(workspace: Path, trusted: bool) -> list[str]:
    return [h.command for h in plugin_hooks(workspace, trusted)]


def test_hooks_and_servers_run_only_while_the_plugin_is_enabled(tmp_path: Path, workspace: Path) -> None:
    plugins = installed_hookify(tmp_path)
    commands = hook_commands(workspace, trusted=False)
    # the shell expands the plugin's root from the hook's environment (never pasted into the text)
    assert len(commands) == 4 and all('"${CLAUDE_PLUGIN_ROOT}/hooks/' in c for c in commands)
    assert all("hookify/" in dict(h.env)["CLAUDE_PLUGIN_ROOT"] for h in plugin_hooks(workspace, trusted=False))
    plugins.set_enabled("hookify@claude-plugins-official", False)
    assert hook_commands(workspace, trusted=False) == []
    fixture = marketplace(tmp_path / "srv", "srv-market", [{"name": "srv", "source": "./srv"}])
    write_json(fixture / "srv" / ".mcp.json", {"mcpServers": {"s": {"command": "server-binary"}}})
    plugins.add_marketplace(str(fixture))
    plugins.install("srv", plugins.preview("srv").consent)
    servers = roder_ext_mcp.create(make_host(workspace, trust=False)).settings.servers
    assert servers["plugin:srv:s"].command == "server-binary"
    assert servers["plugin:srv:s"].tool_prefix == "mcp__plugin_srv_s__"
    plugins.set_enabled("srv", False)
    assert "plugin:srv:s" not in roder_ext_mcp.create(make_host(workspace, trust=False)).settings.servers


def test_a_project_declares_plugins_only_when_trusted(tmp_path: Path, workspace: Path) -> None:
    installed_hookify(tmp_path)
    write_json(
        workspace / ".claude" / "settings.json",
        {
            "enabledPlugins": {"hookify@claude-plugins-official": False, "missing@team": True},
            "extraKnownMarketplaces": {"team": {"source": {"source": "github", "repo": "acme/team-plugins"}}},
        },
    )
    paths = RoderPaths.from_env()
    untrusted = active_plugins(paths, workspace, False)
    assert {p.id for p in untrusted.plugins} == {"hookify@claude-plugins-official", "commit-commands@claude-plugins-official"}
    assert untrusted.problems == []
    trusted = active_plugins(paths, workspace, True)
    assert {p.id for p in trusted.plugins} == {"commit-commands@claude-plugins-official"}
    assert trusted.problems == [
        "plugin missing@team is enabled by settings but not installed; install it with `roder plugin install missing@team`"
    ]
    listed = {m["name"]: m for m in PluginService(paths, workspace, True).list_marketplaces()}
    assert listed["team"]["declaredBy"] == "project" and listed["team"]["added"] is False
    assert "team" not in {m["name"] for m in PluginService(paths, workspace, False).list_marketplaces()}
    write_json(workspace / ".claude" / "settings.local.json", {"enabledPlugins": {"hookify@claude-plugins-official": True}})
    assert "hookify@claude-plugins-official" in {p.id for p in active_plugins(paths, workspace, True).plugins}


def test_plugin_agents_cannot_raise_their_permission_mode(tmp_path: Path, workspace: Path) -> None:
    root = marketplace(tmp_path / "m", "agent-market", [{"name": "agents", "source": "./agents-plugin"}])
    write(
        root / "agents-plugin" / "agents" / "yolo.md",
        "---\ndescription: d\npermissionMode: bypassPermissions\nmode: bypass\nmodel: opus\n---\nGo.",
    )
    plugins = PluginStore(RoderPaths.from_env())
    plugins.add_marketplace(str(root))
    plugins.install("agents")
    from roder_core.customization.subagents import child_mode, list_agents

    agent = next(a for a in list_agents(workspace, RoderPaths.from_env(), False) if a.name == "agents:yolo")
    assert agent.mode is None and child_mode("ask", agent.mode) == "ask"
    assert agent.model is None  # Claude Code's alias "opus" means nothing to other providers: the parent's model


async def test_bang_lines_follow_policy_and_allowed_tools(tmp_path: Path, workspace: Path) -> None:
    from roder_core.runtime.bootstrap import StartSettings, start_runtime

    installed_hookify(tmp_path)
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    write(workspace / "new.txt", "x")
    started = start_runtime(StartSettings(cwd=workspace, provider="mock", mode="ask", sandbox="off", trust=False))
    runtime = started.runtime
    try:
        registry = CommandRegistry.for_runtime(runtime)
        assert registry.get("commit").name == "commit-commands:commit"  # the bare name reaches the only plugin command
        thread = await runtime.start_thread()
        from roder_core.customization.slash_commands import run_injected

        allowed = ["Bash(git status:*)"]
        status = await run_injected(runtime, thread.id, workspace, "git status --short", allowed)
        assert "?? new.txt" in status
        refused = await run_injected(runtime, thread.id, workspace, "touch made-by-injection", allowed)
        assert "not run" in refused and not (workspace / "made-by-injection").exists()
        chained = await run_injected(runtime, thread.id, workspace, "git status; touch chained", allowed)
        assert "not run" in chained and not (workspace / "chained").exists()
        touching = ["Bash(touch:*)"]
        assert await run_injected(runtime, thread.id, workspace, "touch pre-approved", touching) == ""
        assert (workspace / "pre-approved").exists()  # allowed-tools turn "ask" into "allow"
        await runtime.set_mode("plan")
        planned = await run_injected(runtime, thread.id, workspace, "touch in-plan-mode", touching)
        assert "not run" in planned and not (workspace / "in-plan-mode").exists()  # a deny wins over allowed-tools
    finally:
        await runtime.close()


def test_import_claude_reads_records_and_shows_first(tmp_path: Path, workspace: Path, roder_home: Path) -> None:
    claude = claude_home(tmp_path)
    before = file_stamps(claude)
    env = {**os.environ}
    declined = subprocess.run(
        roder_command("plugin", "import-claude", "--claude-dir", str(claude)),
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
    )
    assert declined.returncode == 2 and "hookify@claude-plugins-official  0.9.0  will be enabled" in declined.stdout
    assert "runs: hook PreToolUse: python3" in declined.stdout and "gone@claude-plugins-official" in declined.stdout
    assert not (roder_home / "data" / "plugins" / "installed_plugins.json").exists()
    done = subprocess.run(
        roder_command("plugin", "import-claude", "--claude-dir", str(claude), "--yes"),
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    records = json.loads((roder_home / "data" / "plugins" / "installed_plugins.json").read_text())["plugins"]
    assert list(records) == ["hookify@claude-plugins-official"] and records["hookify@claude-plugins-official"][0]["enabled"]
    assert file_stamps(claude) == before  # only read
    found = discover_with_plugins(DefinitionRoots(workspace, RoderPaths.from_env(), False))
    assert "hookify:hookify" in found.commands
