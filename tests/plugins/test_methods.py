"""The marketplace and plugin methods over real stdio pipes and a real WebSocket."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.plugins.support import copy_official, marketplace, write, write_json
from tests.server.support import PipePeer, RemoteServer, RpcPeer, WsPeer, trusted_workspace

pytestmark = pytest.mark.e2e
TOKEN = "plugin-token-0123456789"
METHODS = {
    "marketplaces/list",
    "marketplaces/install_default",
    "marketplaces/add",
    "marketplaces/remove",
    "marketplaces/refresh",
    "marketplaces/search",
    "marketplaces/plugin",
    "plugins/preview_install",
    "plugins/install",
    "plugins/install_all_variants",
    "plugins/list_installed",
    "plugins/disable",
    "plugins/uninstall",
    "plugins/read",
    "plugins/enable",
    "plugins/configure",
    "plugins/preview_import_claude",
    "plugins/import_claude",
}


def catalogs(tmp_path: Path) -> tuple[Path, Path, Path]:
    official = copy_official(tmp_path / "catalogs", ["hookify", "commit-commands"])
    variants = []
    for name in ("alpha", "beta"):
        root = marketplace(tmp_path / "catalogs" / name, name, [{"name": "formatter", "source": "./formatter"}])
        write_json(root / "formatter" / ".claude-plugin" / "plugin.json", {"name": "formatter", "version": f"1.0.{len(name)}"})
        write(root / "formatter" / "commands" / "fmt.md", "---\ndescription: format\n---\nFormat the code.")
        variants.append(root)
    return official, variants[0], variants[1]


async def exercise(peer: RpcPeer, official: Path, alpha: Path, beta: Path) -> None:
    info = await peer.call("initialize", {"clientInfo": {"name": "pytest"}})
    [group] = [g for g in info["methodGroups"] if g["name"] == "marketplaces"]
    assert group["available"] and set(group["methods"]) == METHODS
    assert (await peer.call("marketplaces/list"))["marketplaces"] == []

    added = (await peer.call("marketplaces/install_default", {"path": str(official)}))["marketplace"]
    assert added["name"] == "claude-plugins-official" and added["official"] and added["pluginCount"] == 286
    for root in (alpha, beta):
        assert (await peer.call("marketplaces/add", {"source": str(root)}))["marketplace"]["name"] == root.name
    assert [m["name"] for m in (await peer.call("marketplaces/list"))["marketplaces"]] == [
        "alpha",
        "beta",
        "claude-plugins-official",
    ]

    found = (await peer.call("marketplaces/search", {"query": "formatter"}))["results"]
    assert found[0]["name"] == "formatter"  # a name match ranks before a description match
    assert [v["id"] for v in found[0]["variants"]] == ["formatter@alpha", "formatter@beta"]
    assert all(r["name"] != "formatter" for r in found[1:])  # one result per plugin name
    hookify = (await peer.call("marketplaces/search", {"query": "hookify"}))["results"][0]["variants"][0]
    assert hookify["id"] == "hookify@claude-plugins-official" and hookify["source"] == {
        "source": "relative",
        "path": "./plugins/hookify",
    }
    detail = await peer.call("marketplaces/plugin", {"plugin": "hookify@claude-plugins-official"})
    assert detail["entry"]["name"] == "hookify" and "Hookify" in detail["readme"]

    preview = await peer.call("plugins/preview_install", {"plugin": "hookify@claude-plugins-official"})
    assert preview["componentsKnown"] and "/hookify:hookify" in preview["components"]["commands"]
    assert any(line.startswith("hook PreToolUse: python3") for line in preview["runsCode"])
    refused = await peer.request("plugins/install", {"plugin": "hookify@claude-plugins-official"})
    assert refused["error"]["code"] == -32000 and "runs code when enabled" in refused["error"]["message"]
    wrong = await peer.request("plugins/install", {"plugin": "hookify@claude-plugins-official", "consent": "forged"})
    assert wrong["error"]["code"] == -32000
    installed = await peer.call("plugins/install", {"plugin": "hookify@claude-plugins-official", "consent": preview["consent"]})
    assert installed["installed"]["enabled"] and not installed["restartRequired"]
    # its hooks apply in this session as its commands and agents do: nothing waits for a restart
    assert installed["applied"] == ["commands", "skills", "agents", "hooks"] and installed["nextStart"] == []
    assert installed["installed"]["components"]["agents"] == ["hookify:conversation-analyzer"]

    every = await peer.call("plugins/install_all_variants", {"name": "formatter"})
    assert [(p["id"], p["enabled"]) for p in every["installed"]] == [("formatter@alpha", True), ("formatter@beta", False)]
    listed = (await peer.call("plugins/list_installed"))["plugins"]
    assert [p["id"] for p in listed] == ["formatter@alpha", "formatter@beta", "hookify@claude-plugins-official"]
    assert [p["active"] for p in listed] == [True, False, True]  # the disabled variant does not apply

    disabled = await peer.call("plugins/disable", {"plugin": "hookify"})
    assert disabled["plugin"]["enabled"] is False
    assert (await peer.call("plugins/uninstall", {"plugin": "hookify@claude-plugins-official"}))["uninstalled"] == (
        "hookify@claude-plugins-official"
    )
    refreshed = (await peer.call("marketplaces/refresh", {"name": "alpha"}))["marketplaces"]
    assert [m["name"] for m in refreshed] == ["alpha"]
    removed = await peer.call("marketplaces/remove", {"name": "beta"})
    assert removed == {"removed": "beta", "uninstalled": ["formatter@beta"]}

    missing = await peer.request("plugins/preview_install", {"plugin": "nope@alpha"})
    assert missing["error"]["code"] == -32000 and "has no plugin 'nope'" in missing["error"]["message"]
    bad = await peer.request("plugins/install", {})
    assert bad["error"]["code"] == -32602


async def test_every_method_over_stdio(tmp_path: Path) -> None:
    workspace, env = trusted_workspace(tmp_path)
    peer = await PipePeer.start(workspace, env)
    try:
        await exercise(peer, *catalogs(tmp_path))
    finally:
        code, stderr = await peer.close()
    assert code == 0, stderr


async def test_every_method_over_websocket(tmp_path: Path) -> None:
    workspace, env = trusted_workspace(tmp_path)
    env["RODER_TEST_TOKEN"] = TOKEN
    server = await RemoteServer.start(workspace, env, "--auth-token", "env:RODER_TEST_TOKEN", "--print-qr=false")
    peer: Any = None
    try:
        peer = await WsPeer.connect(server.url, TOKEN)
        await exercise(peer, *catalogs(tmp_path))
    finally:
        if peer is not None:
            await peer.close()
        await server.stop()
