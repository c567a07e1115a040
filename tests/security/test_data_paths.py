"""Paths taken from data are checked in one place (``brokers.data_paths``).

A plugin manifest's ``version``, a client's thread id, a workflow, team or media id: each is one
plain name, and every destination lies inside its root before anything is written or removed.
The plugin cases run the real store (catalog, fetch, preview, install, reinstall); the id cases
go through the app server's dispatcher as a client would send them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from roder_core.brokers.data_paths import child, component, contained, remove_tree
from roder_core.errors import UnsafePathError
from roder_core.plugins.service import fetch_settings
from roder_core.plugins.store import PluginError, PluginStore
from roder_core.runtime.bootstrap import StartSettings
from roder_core.server.client import LocalAppClient
from roder_core.server.errors import RpcError
from roder_core.settings.paths import RoderPaths
from tests.plugins.support import marketplace, write, write_json

BAD_NAMES = ["..", ".", "../../victim", "a/b", "/abs", "x\x00y", "tab\there", "", "\\..\\x", "x" * 300]


@pytest.mark.parametrize("value", BAD_NAMES, ids=[repr(v)[:20] for v in BAD_NAMES])
def test_a_component_is_one_plain_name(value: str) -> None:
    with pytest.raises(UnsafePathError, match="not a"):
        component(value, "version")


def test_destinations_stay_inside_their_root_through_links(tmp_path: Path) -> None:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "keep").write_text("keep")
    (root / "mid").symlink_to(outside)  # a linked folder in the middle of the path
    with pytest.raises(UnsafePathError, match="not inside"):
        child(root, "mid", "x", what="plugin")
    with pytest.raises(UnsafePathError, match="not inside"):
        contained(root, root, "plugin")
    assert child(root, "a", "1.0.0", what="plugin") == root / "a" / "1.0.0"
    # removing a link removes the link, never what it points at
    remove_tree(root, root / "mid", "plugin")
    assert not (root / "mid").exists() and (outside / "keep").read_text() == "keep"
    with pytest.raises(UnsafePathError):
        remove_tree(root, outside, "plugin")
    assert (outside / "keep").exists()


def _plugin(root: Path, name: str, version: str) -> Path:
    write_json(root / ".claude-plugin" / "plugin.json", {"name": name, "version": version})
    write(root / "commands" / "hello.md", "---\ndescription: hello\n---\nSay hello.")
    write(root / ".bashrc", "echo pwned\n")
    return root


@pytest.mark.parametrize("escape", ["../../../../../../../..{victim}", "..", "../..", "{victim}", "1.0/../../.."])
def test_a_plugin_version_never_writes_or_removes_outside_the_cache(escape: str, tmp_path: Path, roder_home: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("the user's file")
    version = escape.format(victim=victim)
    catalog = tmp_path / "catalog"
    _plugin(catalog / "plugins" / "evil", "evil", version)
    marketplace(catalog, "market", [{"name": "evil", "source": "./plugins/evil"}])
    paths = RoderPaths.from_env()
    store = PluginStore(paths, fetch_settings(paths))
    store.add_marketplace(str(catalog))
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if "roder-home" not in p.parts}
    with pytest.raises(PluginError, match="not a plain name"):
        store.preview("evil")
    with pytest.raises(PluginError, match="not a plain name"):
        store.install("evil")
    with pytest.raises(PluginError, match="not a plain name"):  # a reinstall removes nothing either
        store.install("evil")
    assert (victim / "keep.txt").read_text() == "the user's file"
    assert not (victim / ".bashrc").exists()
    after = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if "roder-home" not in p.parts}
    assert after == before
    assert "evil@market" not in store.installed()


async def test_client_ids_that_are_paths_are_refused_and_touch_nothing(workspace: Path, roder_home: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.jsonl"
    victim.write_text('{"keep": true}\n')
    relative = os.path.relpath(victim.with_suffix(""), RoderPaths.from_env().threads_dir)
    client = LocalAppClient.start(StartSettings(cwd=workspace, provider="mock", interactive=False))
    try:
        for method in ("thread/resume", "thread/read", "thread/delete", "thread/fork"):
            with pytest.raises(RpcError) as caught:
                await client.request(method, {"threadId": relative})
            message = caught.value.message
            assert "no thread" in message or "not a thread id" in message or "not a plain name" in message, (
                method,
                message,
            )
    finally:
        await client.close()
    assert victim.read_text() == '{"keep": true}\n'


def test_stores_keyed_by_ids_refuse_path_ids(tmp_path: Path) -> None:
    from roder_ext_jsonl_store.files import thread_path

    from roder_core.media.images import MediaError
    from roder_core.media.library import MediaLibrary
    from roder_core.teams.files import TeamFiles
    from roder_core.teams.model import TeamError
    from roder_core.workflows.journal import WorkflowJournal
    from roder_core.workflows.model import WorkflowError

    with pytest.raises(UnsafePathError):
        thread_path(tmp_path, "../x")
    with pytest.raises((MediaError, UnsafePathError)):
        MediaLibrary(tmp_path / "media").folder("..")
    with pytest.raises((TeamError, UnsafePathError)):
        TeamFiles(tmp_path / "teams").load("../x")
    with pytest.raises((WorkflowError, UnsafePathError)):
        WorkflowJournal(tmp_path / "wf").path("..x/..")


async def test_an_mcp_server_named_like_a_path_writes_no_log_outside_the_cache(
    workspace: Path, roder_home: Path, tmp_path: Path
) -> None:
    """A server's name names its log file in Roder's cache; a name that is a path (from a
    plugin's ``.mcp.json``, a project's, the config) is a failed server with the reason, whose
    log is never made, here or anywhere."""
    import json
    import sys

    from roder_core.server.protocol_features import MCP_LIST, McpListParams

    escape = f"../../../../../../../../{tmp_path.relative_to('/')}/escaped"
    (roder_home / "config.toml").write_text(
        f"[mcp.servers.{json.dumps(escape)}]\ncommand = {json.dumps(sys.executable)}\n"
        "args = ['-c', 'import sys; sys.stderr.write(\"server log\\\\n\")']\n"
    )
    settings = StartSettings(cwd=workspace, provider="mock", interactive=False, env={**os.environ, "RODER_HOME": str(roder_home)})
    async with LocalAppClient.start(settings) as app:
        (server,) = (await app.call(MCP_LIST, McpListParams(wait_ms=10_000))).servers
    assert not (tmp_path / "escaped.log").exists()
    assert server.status == "failed", server
    assert "not a plain name" in (server.error or ""), server
