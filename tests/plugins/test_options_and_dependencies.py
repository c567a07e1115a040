"""``userConfig`` options and ``dependencies``: asked for at install (app server, CLI), stored
apart (sensitive values only in credentials.json), filled into the plugin's own hooks and MCP
servers, kept out of what the model reads and redacted; dependencies resolved, shown and
installed first, cycles and missing ones refused, dependents protected on disable/uninstall."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import roder_ext_command_hooks
from roder_ext_command_hooks import PluginHooksExtension

from roder_core.brokers.secrets import runtime_redactor
from roder_core.customization.definitions import DefinitionRoots
from roder_core.kernel.distribution import make_host
from roder_core.kernel.services import HookPoint
from roder_core.plugins.components import discover_with_plugins, plugin_servers
from roder_core.plugins.enabled import active_plugins
from roder_core.plugins.store import PluginError, PluginStore
from roder_core.settings.config import RoderConfig
from roder_core.settings.paths import RoderPaths
from tests.plugins.support import marketplace, write, write_json
from tests.server.support import PipePeer, roder_command

TOKEN = "tok-abcdef-0123456789-secret"
#: The hook records its argv and its CLAUDE_PLUGIN_OPTION_* environment where the test reads it.
RECORD_HOOK = """\
import json, os, sys
out = os.path.join(os.environ["CLAUDE_PROJECT_DIR"], "hook-saw.json")
env = {k: v for k, v in os.environ.items() if k.startswith("CLAUDE_PLUGIN_OPTION_")}
json.dump({"argv": sys.argv[1:], "env": env}, open(out, "w"))
"""


def configured_plugin(root: Path) -> Path:
    plugin = root / "configured"
    write_json(
        plugin / ".claude-plugin" / "plugin.json",
        {
            "name": "configured",
            "version": "1.0.0",
            "userConfig": {
                "API_TOKEN": {"type": "string", "title": "API token", "sensitive": True, "required": True},
                "REGION": {"type": "string", "title": "Region", "default": "eu"},
                "LIMIT": {"type": "number", "min": 1, "max": 10},
            },
        },
    )
    write(plugin / "hooks" / "record.py", RECORD_HOOK)
    write_json(
        plugin / "hooks" / "hooks.json",
        {
            "hooks": {
                "PreToolUse": [
                    {
                        "matcher": "bash",
                        "hooks": [
                            {
                                "type": "command",
                                "command": sys.executable,
                                "args": ["${CLAUDE_PLUGIN_ROOT}/hooks/record.py", "${user_config.REGION}"],
                            }
                        ],
                    }
                ]
            }
        },
    )
    server = {"command": "api-server", "args": ["--region", "${user_config.REGION}"]}
    server["env"] = {"TOKEN": "${user_config.API_TOKEN}"}
    write_json(plugin / ".mcp.json", {"api": server})
    body = "Region ${user_config.REGION}, token ${user_config.API_TOKEN}."
    write(plugin / "commands" / "where.md", f"---\ndescription: where\n---\n{body}")
    return marketplace(root, "opts", [{"name": "configured", "source": "./configured"}])


async def test_options_are_asked_stored_apart_and_reach_only_the_plugins_processes(
    tmp_path: Path, workspace: Path, roder_home: Path
) -> None:
    catalog = configured_plugin(tmp_path / "opts")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    peer = await PipePeer.start(workspace, env)
    try:
        await peer.call("initialize", {"clientInfo": {"name": "pytest"}})
        await peer.call("marketplaces/add", {"source": str(catalog)})
        preview = await peer.call("plugins/preview_install", {"plugin": "configured@opts"})
        options = {o["key"]: o for o in preview["userConfig"]}
        assert options["API_TOKEN"]["sensitive"] and options["API_TOKEN"]["required"]
        assert options["REGION"]["default"] == "eu" and options["LIMIT"]["max"] == 10
        consent = preview["consent"]
        missing = (await peer.request("plugins/install", {"plugin": "configured@opts", "consent": consent}))["error"]
        assert "needs its option API_TOKEN (API token)" in missing["message"]
        params = {"plugin": "configured@opts", "consent": consent, "options": {"API_TOKEN": TOKEN, "LIMIT": 50}}
        bad = (await peer.request("plugins/install", params))["error"]
        assert "option LIMIT must be at most 10" in bad["message"] and TOKEN not in bad["message"]
        installed = await peer.call(
            "plugins/install",
            {"plugin": "configured@opts", "consent": consent, "options": {"API_TOKEN": TOKEN, "LIMIT": "3"}},
        )
        row = installed["installed"]
        assert row["options"] == {"REGION": "eu", "LIMIT": 3} and row["sensitiveOptions"] == ["API_TOKEN"]
        listed = await peer.call("plugins/list_installed")
        assert TOKEN not in json.dumps(listed)
    finally:
        code, stderr = await peer.close()
    assert code == 0, stderr

    data = roder_home / "data"
    assert json.loads((data / "plugins" / "options.json").read_text()) == {"configured@opts": {"REGION": "eu", "LIMIT": 3}}
    assert TOKEN not in (data / "plugins" / "installed_plugins.json").read_text()
    credentials = data / "credentials.json"
    assert json.loads(credentials.read_text())["pluginOptions"] == {"configured@opts": {"API_TOKEN": TOKEN}}
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600

    paths = RoderPaths.from_env()
    active = active_plugins(paths, workspace, False)
    [server] = plugin_servers(active, workspace)
    assert server.spec.raw["env"] == {"TOKEN": TOKEN} and server.spec.raw["args"] == ["--region", "eu"]
    assert server.env["CLAUDE_PLUGIN_OPTION_API_TOKEN"] == TOKEN and server.env["CLAUDE_PLUGIN_OPTION_LIMIT"] == "3"
    # the model reads commands: only non-sensitive values are filled in
    command = discover_with_plugins(DefinitionRoots(workspace, paths, False)).commands["configured:where"]
    assert command.template == "Region eu, token ${user_config.API_TOKEN}."

    # the plugin's own hook gets the option in its exec-form argv and its environment
    [extension] = [
        e for e in roder_ext_command_hooks.create(make_host(workspace, trust=False)) if isinstance(e, PluginHooksExtension)
    ]
    payload = {"thread_id": "t1", "tool": "bash", "arguments": {"command": "ls"}, "cwd": str(workspace)}
    await extension.hooks.run(HookPoint.TOOL_CALL_BEFORE, payload)
    saw = json.loads((workspace / "hook-saw.json").read_text())
    assert saw["argv"] == ["eu"]
    assert saw["env"]["CLAUDE_PLUGIN_OPTION_API_TOKEN"] == TOKEN and saw["env"]["CLAUDE_PLUGIN_OPTION_REGION"] == "eu"
    # ... and the value never lands in a transcript or a log
    redact = runtime_redactor({"RODER_HOME": str(roder_home)}, RoderConfig())
    assert TOKEN not in redact(f"the hook printed {TOKEN}")

    # uninstalling forgets both stores
    PluginStore(paths).uninstall("configured@opts")
    assert "configured@opts" not in json.loads(credentials.read_text()).get("pluginOptions", {})
    assert json.loads((data / "plugins" / "options.json").read_text()) == {}


def test_the_cli_takes_options_as_flags_and_configure_changes_them(tmp_path: Path, workspace: Path, roder_home: Path) -> None:
    catalog = configured_plugin(tmp_path / "opts")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(roder_command("plugin", *args), cwd=workspace, capture_output=True, text=True, timeout=120)

    assert cli("marketplace", "add", str(catalog)).returncode == 0
    refused = cli("install", "configured@opts", "--yes")
    assert refused.returncode == 1 and "needs its option API_TOKEN" in refused.stderr
    done = cli("install", "configured@opts", "--yes", "--option", f"API_TOKEN={TOKEN}", "-o", "REGION=us")
    assert done.returncode == 0, done.stderr
    assert "option API_TOKEN (string, required, sensitive)" in done.stdout and TOKEN not in done.stdout
    assert cli("configure", "configured@opts", "--option", "REGION=ap").returncode == 0
    store = PluginStore(RoderPaths.from_env())
    assert store.options.values("configured@opts") == {"REGION": "ap", "API_TOKEN": TOKEN}
    wrong = cli("configure", "configured@opts", "--option", "COLOR=red")
    assert wrong.returncode == 1 and "has no option COLOR" in wrong.stderr
    # enabling asks for a required option that has no value (here: no terminal, so it refuses)
    assert cli("disable", "configured@opts").returncode == 0
    store.options.forget("configured@opts")
    refused = cli("enable", "configured@opts")
    assert refused.returncode == 1 and "needs its option API_TOKEN" in refused.stderr
    assert not store.installed()["configured@opts"].enabled
    assert cli("enable", "configured@opts", "-o", f"API_TOKEN={TOKEN}").returncode == 0
    assert store.installed()["configured@opts"].enabled and store.options.values("configured@opts")["API_TOKEN"] == TOKEN


def dependency_catalog(root: Path, plugins: dict[str, dict[str, Any]], **extra: Any) -> Path:
    """A catalog of small plugins: name -> plugin.json fields (a ``hook`` key adds a Stop hook)."""
    for name, fields in plugins.items():
        hook = fields.pop("hook", None)
        write_json(root / name / ".claude-plugin" / "plugin.json", {"name": name, **fields})
        write(root / name / "commands" / f"{name}.md", f"The {name} command.")
        if hook:
            stop = [{"hooks": [{"type": "command", "command": hook}]}]
            write_json(root / name / "hooks" / "hooks.json", {"hooks": {"Stop": stop}})
    return marketplace(root, root.name, [{"name": n, "source": f"./{n}"} for n in plugins], **extra)


def test_dependencies_are_previewed_installed_first_and_protected(tmp_path: Path, workspace: Path) -> None:
    dependency_catalog(
        tmp_path / "deps",
        {
            "app": {"version": "2.0.0", "dependencies": ["lib", {"name": "util", "version": "^1.0"}]},
            "lib": {"version": "1.1.0", "dependencies": ["util"]},
            "util": {"version": "1.2.0", "hook": "echo util-stop"},
        },
    )
    store = PluginStore(RoderPaths.from_env())
    store.add_marketplace(str(tmp_path / "deps"))
    preview = store.preview("app@deps")
    assert [(d.variant.id, d.version) for d in preview.dependencies] == [("util@deps", "1.2.0"), ("lib@deps", "1.1.0")]
    assert "dependency util@deps: hook Stop: echo util-stop" in preview.runs_code  # what a dependency runs is shown
    with pytest.raises(PluginError, match="runs code when enabled"):
        store.install("app@deps")  # no consent: nothing installed
    assert store.installed() == {}
    store.install("app@deps", preview.consent)
    records = store.installed()
    assert records["app@deps"].dependencies == ["lib@deps", "util@deps"] and not records["app@deps"].auto_installed
    assert records["lib@deps"].auto_installed and records["util@deps"].auto_installed
    active = [p.id for p in active_plugins(RoderPaths.from_env(), workspace, False).plugins]
    assert active == ["app@deps", "lib@deps", "util@deps"]

    with pytest.raises(PluginError, match=r"util@deps cannot be disabled: app@deps, lib@deps depend\(s\) on it"):
        store.set_enabled("util@deps", False)
    with pytest.raises(PluginError, match=r"lib@deps cannot be uninstalled: app@deps depend\(s\) on it"):
        store.uninstall("lib@deps")
    store.set_enabled("app@deps", False)
    store.set_enabled("lib@deps", False)
    store.set_enabled("app@deps", True)  # enabling a plugin enables what it depends on
    assert store.installed()["lib@deps"].enabled

    store.uninstall("app@deps")
    assert sorted(store.prune()) == ["lib@deps", "util@deps"]  # lib first frees util
    assert store.installed() == {}


def test_cycles_missing_and_unsuitable_dependencies_install_nothing(tmp_path: Path) -> None:
    dependency_catalog(
        tmp_path / "bad",
        {
            "a": {"dependencies": ["b"]},
            "b": {"dependencies": ["a"]},
            "c": {"dependencies": ["ghost"]},
            "d": {"dependencies": [{"name": "util", "version": ">=2"}]},
            "e": {"dependencies": ["fmt@elsewhere"]},
            "util": {"version": "1.2.0"},
        },
    )
    store = PluginStore(RoderPaths.from_env())
    store.add_marketplace(str(tmp_path / "bad"))
    with pytest.raises(PluginError, match=r"dependency cycle: a@bad -> b@bad -> a@bad; nothing was installed"):
        store.preview("a@bad")
    with pytest.raises(PluginError, match=r"missing dependency ghost \(c@bad -> ghost@bad\)"):
        store.install("c@bad")
    with pytest.raises(PluginError, match=r"d@bad needs util >=2, but util@bad is version 1.2.0"):
        store.install("d@bad")
    with pytest.raises(PluginError, match=r"does not allow dependencies from 'elsewhere'"):
        store.install("e@bad")
    assert store.installed() == {}
    assert not any((store.dirs.staging).glob(".fetch-*"))


def test_a_watcher_that_sees_the_options_file_change_reads_the_new_secret(
    roder_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A running session reloads when the plain options file changes (it watches that file, not
    the credentials): the sensitive value is stored before the plain file is written, so the
    reload it triggers never reads the old secret."""
    import roder_core.plugins.options as options_module
    from roder_core.plugins.options import OptionSpec, OptionStore
    from roder_core.plugins.records import PluginDirs
    from roder_core.plugins.records import write_json as real_write

    store = OptionStore(PluginDirs.of(RoderPaths.from_env()))
    specs = {"API_TOKEN": OptionSpec("API_TOKEN", sensitive=True), "REGION": OptionSpec("REGION")}
    secret_when_plain_written: list[dict[str, str]] = []

    def watching_write(path: Path, data: Any) -> None:
        secret_when_plain_written.append(store.secrets.plugin_options("p@m"))
        real_write(path, data)

    monkeypatch.setattr(options_module, "write_json", watching_write)
    store.save("p@m", specs, {"API_TOKEN": "first-secret", "REGION": "eu"})
    store.save("p@m", specs, {"API_TOKEN": "second-secret", "REGION": "eu"})
    store.forget("p@m")
    assert secret_when_plain_written == [{"API_TOKEN": "first-secret"}, {"API_TOKEN": "second-secret"}, {}]
