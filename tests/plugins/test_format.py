"""The marketplace and plugin formats, read from real files: the official catalog and the rule
breaking that community catalogs do (each problem is one line; the rest loads)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roder_core.customization.definitions import DefinitionRoots
from roder_core.plugins.components import discover_with_plugins, plugin_hooks, plugin_servers
from roder_core.plugins.enabled import active_plugins
from roder_core.plugins.layout import resolve_layout
from roder_core.plugins.manifest import ManifestError, load_manifest, load_marketplace, parse_marketplace
from roder_core.plugins.store import PluginError, PluginStore
from roder_core.settings.paths import RoderPaths
from tests.plugins.support import copy_official, marketplace, official_source, write, write_json


def store() -> PluginStore:
    return PluginStore(RoderPaths.from_env())


def test_the_official_catalog_reads_without_problems() -> None:
    market = load_marketplace(official_source())
    assert market.name == "claude-plugins-official" and market.problems == []
    kinds = {e.source.kind for e in market.entries}
    assert kinds == {"relative", "url", "git-subdir"}
    assert len(market.entries) == 286
    atomic = market.entry("atomic-agents")
    assert atomic is not None and atomic.source.kind == "url" and atomic.source.path == "claude-plugin/atomic-agents"
    lsp = market.entry("clangd-lsp")
    assert lsp is not None and lsp.strict is False and "lspServers" in lsp.components()
    assert market.resolve_rename("qodo-skills") == "qodo"


def test_renames_follow_chains_stop_at_cycles_and_removals(tmp_path: Path) -> None:
    market = parse_marketplace(
        {"name": "m", "owner": {"name": "o"}, "plugins": [], "renames": {"a": "b", "b": "c", "x": "y", "y": "x", "gone": None}},
        tmp_path,
        "m.json",
    )
    assert market.resolve_rename("a") == "c"
    assert market.resolve_rename("x") == "x"  # a cycle leaves the name as asked
    assert market.resolve_rename("gone") is None
    assert market.resolve_rename("other") == "other"


def test_a_catalog_without_a_name_or_json_is_an_error_and_bad_entries_are_skipped(tmp_path: Path) -> None:
    write(tmp_path / "broken" / ".claude-plugin" / "marketplace.json", "{not json")
    with pytest.raises(ManifestError, match="not valid JSON"):
        load_marketplace(tmp_path / "broken")
    with pytest.raises(ManifestError, match="no 'name'"):
        parse_marketplace({"plugins": []}, tmp_path, "x.json")
    market = parse_marketplace(
        {
            "name": "community",
            "owner": "someone",
            "metadata": {"description": "older placement", "version": "2.0"},
            "displayName": "unknown key",
            "plugins": [
                {"name": "ok", "source": "./plugins/ok"},
                {"name": "weird", "source": {"source": "mercurial", "url": "x"}},
                {"name": "escape", "source": "./../outside"},
                "not an object",
                {"source": "./nameless"},
                {"name": "ok", "source": "./again"},
                {"name": "bare", "source": "fmt"},
            ],
        },
        tmp_path,
        "community.json",
    )
    assert [e.name for e in market.entries] == ["ok"]
    assert market.description == "older placement" and market.version == "2.0"
    joined = "\n".join(market.problems)
    assert "'weird': source type 'mercurial' not supported; skipped" in joined
    assert "'escape': source './../outside' leaves the marketplace" in joined
    assert "plugins[3] is not an object" in joined and "plugins[4] has no name" in joined
    assert "'ok' is listed twice" in joined
    assert "'bare'" in joined  # a bare name without metadata.pluginRoot is not a path
    rooted = parse_marketplace(
        {"name": "r", "owner": {}, "metadata": {"pluginRoot": "./plugins"}, "plugins": [{"name": "fmt", "source": "fmt"}]},
        tmp_path,
        "r.json",
    )
    assert rooted.entries[0].source.path == "./plugins/fmt"


def community_plugin(root: Path) -> Path:
    """A plugin breaking the rules the way real community plugins do."""
    plugin = root / "unity-dev-toolkit"
    manifest = """{
      "name": "unity-dev-toolkit",
      "version": "1.4.0",
      "author": "A Person",
      "priority": 3,
      "hooks": "./hooks/hooks.json",
      "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo inline-stop"}]}]},
      "commands": {
        "new-script": {"source": "./cmds/new-script.md", "description": "Make a script"},
        "inline": {"content": "---\\ndescription: inline one\\n---\\nSay $ARGUMENTS inline."},
        "both": {"source": "./cmds/new-script.md", "content": "x"},
        "missing": {"source": "./cmds/none.md"}
      },
      "skills": ["./extra-skill"],
      "agents": ["./agents"],
      "mcpServers": {"shared": {"command": "from-manifest"}}
    }"""
    write(plugin / ".claude-plugin" / "plugin.json", manifest)
    write(plugin / "cmds" / "new-script.md", "Create a new Unity script with /unity:new-script.\n\nMore text.")
    write_json(
        plugin / "hooks" / "hooks.json",
        {
            "hooks": {
                "PreToolUse": [
                    {
                        "matcher": "Bash",
                        "hooks": [
                            {"type": "command", "command": "echo guard", "timeout": 30000, "enabled": True, "priority": 1},
                            {"type": "prompt", "prompt": "is this ok?"},
                            {"type": "mcp_tool", "server": "plugin:x:y", "tool": "check"},
                        ],
                    }
                ],
                "BeforeEverything": [{"hooks": [{"type": "command", "command": "x"}]}],
                "Notification": [{"hooks": [{"type": "command", "command": "notify"}]}],
            }
        },
    )
    write(plugin / "extra-skill" / "SKILL.md", "---\nname: extra\ndescription: one skill folder named directly\n---\nbody")
    write(
        plugin / "skills" / "default-one" / "SKILL.md",
        "---\ndescription: from the default folder\n---\nuse ${CLAUDE_SKILL_DIR}/x.sh",
    )
    write(
        plugin / "agents" / "review" / "sec.md",
        "---\nname: sec\ndescription: security\npermissionMode: bypassPermissions\n---\nCheck.",
    )
    write_json(
        plugin / ".mcp.json",
        {"shared": {"command": "from-file"}, "flat": {"command": "run", "args": ["${CLAUDE_PLUGIN_ROOT}/s"]}},
    )
    return plugin


def test_a_rule_breaking_community_plugin_loads_what_it_can(tmp_path: Path) -> None:
    plugin = community_plugin(tmp_path)
    manifest = load_manifest(plugin)
    layout = resolve_layout(plugin, "unity-dev-toolkit", manifest)
    commands = {c.name: c for c in layout.commands}
    assert sorted(commands) == ["inline", "new-script"]
    assert commands["new-script"].description == "Make a script" and commands["inline"].content
    assert sorted(n for n, _ in layout.skills) == ["default-one", "extra-skill"]
    assert [n for n, _ in layout.agents] == ["review:sec"]
    hooks = [(h.event, h.command, h.timeout) for h in layout.hooks]
    assert hooks == [  # hooks.json once
        ("PreToolUse", "echo guard", 30.0),
        ("PreToolUse", "model call: is this ok?", None),
        ("Stop", "echo inline-stop", None),
    ]
    servers = {s.name: s for s in layout.mcp_servers}
    assert servers["shared"].raw["command"] == "from-manifest" and "flat" in servers
    problems = "\n".join(layout.problems)
    expected = [
        "key 'hooks' appears twice; both are loaded",
        "'author' should be an object",
        "command 'both': give exactly one of 'source' and 'content'; skipped",
        "command 'missing': ./cmds/none.md does not exist; skipped",
        "hooks file ./hooks/hooks.json is listed again (hooks/hooks.json loads by itself); loaded once",
        "hook timeout 30000 looks like milliseconds; 30s is used",
        "PreToolUse hook of type 'mcp_tool' is not supported (only command, http, prompt, agent); skipped",
        "unknown hook event 'BeforeEverything'; skipped",
        "Notification hooks do not run in Roder; skipped",
        "server 'shared' is also defined in .mcp.json; plugin.json is used",
    ]
    for line in expected:
        assert line in problems, line
    assert len(layout.problems) == len(expected), layout.problems  # one line per problem, nothing else


def test_installed_components_are_namespaced_and_filled_in(tmp_path: Path, workspace: Path) -> None:
    market_root = marketplace(tmp_path / "community", "community-market", [{"name": "unity-dev-toolkit", "source": "./unity"}])
    plugin = community_plugin(tmp_path)
    plugin.rename(market_root / "unity")
    plugins = store()
    plugins.add_marketplace(str(market_root))
    preview = plugins.preview("unity-dev-toolkit")
    with pytest.raises(PluginError, match="runs code when enabled"):
        plugins.install("unity-dev-toolkit@community-market")
    record = plugins.install("unity-dev-toolkit@community-market", preview.consent)
    assert record.version == "1.4.0" and Path(record.install_path).is_dir()
    paths = RoderPaths.from_env()
    found = discover_with_plugins(DefinitionRoots(workspace, paths, False))
    assert {"unity-dev-toolkit:new-script", "unity-dev-toolkit:inline"} <= set(found.commands)
    new_script = found.commands["unity-dev-toolkit:new-script"]
    assert new_script.description == "Make a script" and new_script.template.startswith("Create a new Unity script")
    assert found.commands["unity-dev-toolkit:inline"].description == "inline one"
    skill = found.skills["unity-dev-toolkit:default-one"]
    assert skill.body == f"use {Path(record.install_path) / 'skills' / 'default-one'}/x.sh"
    agent = found.agents["unity-dev-toolkit:review:sec"]
    assert agent.mode is None and agent.prompt == "Check."  # permissionMode never reaches the agent
    assert any("permissionMode ignored" in p for p in found.problems)
    active = active_plugins(paths, workspace, False)
    [server_ids] = [[s.id for s in plugin_servers(active, workspace)]]
    assert sorted(server_ids) == ["plugin:unity-dev-toolkit:flat", "plugin:unity-dev-toolkit:shared"]
    flat = next(s for s in plugin_servers(active, workspace) if s.spec.name == "flat")
    assert flat.env["CLAUDE_PLUGIN_ROOT"] == record.install_path
    assert flat.env["CLAUDE_PLUGIN_DATA"].endswith("data/plugins/data/unity-dev-toolkit-community-market")
    [guard, judge, stop] = plugin_hooks(active, workspace)
    assert judge.spec.kind == "prompt" and judge.spec.config["prompt"] == "is this ok?"
    assert guard.spec.matcher == "Bash" and guard.env["CLAUDE_PROJECT_DIR"] == str(workspace)
    assert stop.command == "echo inline-stop" and stop.spec.origin == "plugin.json hooks"


def test_official_plugins_namespacing_and_a_plugin_without_a_manifest(tmp_path: Path, workspace: Path) -> None:
    root = copy_official(tmp_path, ["commit-commands", "code-simplifier", "receipts", "example-plugin", "github", "context7"])
    entries = json.loads((root / ".claude-plugin" / "marketplace.json").read_text())
    entries["plugins"].append({"name": "example-plugin", "source": "./plugins/example-plugin"})
    write_json(root / ".claude-plugin" / "marketplace.json", entries)
    plugins = store()
    plugins.install_default(root)
    for name in ("commit-commands", "code-simplifier", "receipts", "example-plugin", "github", "context7"):
        plugins.install(name, plugins.preview(name).consent)
    paths = RoderPaths.from_env()
    found = discover_with_plugins(DefinitionRoots(workspace, paths, False))
    assert {"commit-commands:commit", "commit-commands:commit-push-pr", "commit-commands:clean_gone"} <= set(found.commands)
    assert found.commands["commit-commands:commit"].allowed_tools == [
        "Bash(git add:*)",
        "Bash(git status:*)",
        "Bash(git commit:*)",
    ]
    assert "code-simplifier:code-simplifier" in found.agents
    assert "receipts:receipts" in found.skills  # no plugin.json: named by its catalog entry
    # example-plugin has a skill and a command called example-command: the skill wins
    assert "example-plugin:example-command" in found.skills and "example-plugin:example-command" not in found.commands
    servers = {s.id: s for s in plugin_servers(active_plugins(paths, workspace, False), workspace)}
    assert servers["plugin:github:github"].spec.raw["type"] == "http"  # the flat .mcp.json shape
    assert servers["plugin:context7:context7"].spec.raw["url"] == "https://mcp.context7.com/mcp"  # the wrapped shape
    assert found.problems == []


def test_non_strict_entries_and_a_marketplace_root_plugin(tmp_path: Path) -> None:
    root = tmp_path / "skills-repo"
    for name in ("pdf", "docx", "xlsx"):
        write(root / "skills" / name / "SKILL.md", f"---\nname: {name}\ndescription: {name} files\n---\n{name}")
    marketplace(
        root,
        "skills-market",
        [
            {"name": "documents", "source": "./", "strict": False, "skills": ["./skills/pdf", "./skills/docx"]},
            {"name": "sheets", "source": "./", "strict": False, "skills": ["./skills/xlsx"]},
            {"name": "lsp-only", "source": "./lsp", "strict": False, "lspServers": {"x": {"command": "xls"}}},
        ],
    )
    write(root / "lsp" / "LICENSE", "MIT")
    plugins = store()
    plugins.add_marketplace(str(root))
    docs = plugins.preview("documents")
    assert docs.layout is not None and sorted(n for n, _ in docs.layout.skills) == ["docx", "pdf"]
    sheets = plugins.preview("sheets")
    assert sheets.layout is not None and [n for n, _ in sheets.layout.skills] == ["xlsx"]
    lsp = plugins.preview("lsp-only")
    assert lsp.runs_code == ["LSP server x: xls (started for its languages when a file is edited)"]
    write_json(root / "lsp" / ".claude-plugin" / "plugin.json", {"name": "lsp-only", "commands": "./commands"})
    conflict = plugins.preview("lsp-only")
    assert any("conflicting manifests" in p for p in conflict.problems)


def test_reserved_names_and_unknown_plugins_are_refused_clearly(tmp_path: Path) -> None:
    fake = marketplace(tmp_path / "fake", "claude-plugins-official", [])
    plugins = store()
    with pytest.raises(PluginError, match="reserved for Anthropic"):
        plugins.add_marketplace(str(fake))
    impostor = marketplace(tmp_path / "impostor", "claudepluginsofficial", [])
    with pytest.raises(PluginError, match="reserved"):
        plugins.add_marketplace(str(impostor))
    with pytest.raises(PluginError, match="no marketplace offers a plugin named 'nothing'"):
        plugins.preview("nothing")
    with pytest.raises(PluginError, match="not a folder, a file, owner/repo or a URL with a scheme"):
        plugins.add_marketplace("example.com/catalog")
