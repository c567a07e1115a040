"""``roder plugin`` is a client of the marketplaces/* and plugins/* methods: what it prints is what
they answer, its failures are theirs (a message and exit 1, never a traceback), and it keeps the
trust rules (a folder's plugin settings count only once the user trusted it; a headless command
never trusts by itself).

The catalogs are copies (the official one from shared/testdata) in a temporary folder. The
comparisons run ``roder_tui.cli.main``, the entry point, in process; the exit-code, error and trust
checks run the real ``roder`` process. The methods are called through a second in-process client
over the same RODER_HOME and folder, started as the command starts its own.
"""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from roder_core.runtime.bootstrap import StartSettings
from roder_core.server.client import LocalAppClient
from roder_core.server.errors import RpcError
from roder_core.server.protocol_plugins import (
    MARKETPLACES_LIST,
    MARKETPLACES_SEARCH,
    PLUGINS_ENABLE,
    PLUGINS_LIST_INSTALLED,
    PLUGINS_PREVIEW_INSTALL,
    PLUGINS_READ,
    PluginOptionsParams,
    PluginParams,
    SearchParams,
)
from roder_core.settings.paths import RoderPaths
from roder_tui.cli import main
from tests.plugins.support import copy_official, formatter_variants, write, write_json
from tests.server.support import roder_command

T = TypeVar("T")
HOOKIFY = "hookify@claude-plugins-official"


@pytest.fixture
def here(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(workspace)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # no terminal: nothing is asked
    return workspace


def out(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["plugin", *args]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def answer(workspace: Path, use: Callable[[LocalAppClient], Awaitable[T]]) -> T:
    """``use(client)`` on a client started like the command starts its own (headless)."""

    async def run() -> T:
        async with LocalAppClient.start(StartSettings(cwd=workspace, interactive=False), persist_config=False) as client:
            return await use(client)

    return asyncio.run(run())


def roder_plugin(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        roder_command("plugin", *args), cwd=workspace, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )


def test_each_subcommand_prints_what_its_method_answers(tmp_path: Path, here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    official = copy_official(tmp_path / "catalogs", ["hookify", "commit-commands"])
    alpha, beta = formatter_variants(tmp_path / "catalogs")
    added = out(capsys, "marketplace", "add-default", "--path", str(official))
    assert added.startswith("added claude-plugins-official  ") and " plugins  (directory " in added
    assert out(capsys, "marketplace", "add", str(alpha)) == f"added alpha  1 plugin  (directory {alpha})\n"
    out(capsys, "marketplace", "add", str(beta))

    async def catalog(client: LocalAppClient) -> dict[str, Any]:
        return {
            "markets": [m.wire() for m in (await client.call(MARKETPLACES_LIST)).marketplaces],
            "search": (await client.call(MARKETPLACES_SEARCH, SearchParams(query="format"))).wire(),
            "preview": (await client.call(PLUGINS_PREVIEW_INSTALL, PluginParams(plugin="hookify"))).wire(),
        }

    got = answer(here, catalog)
    assert [m["name"] for m in got["markets"]] == ["alpha", "beta", "claude-plugins-official"]
    assert json.loads(out(capsys, "marketplace", "list", "--json")) == got["markets"]
    assert json.loads(out(capsys, "search", "format", "--json")) == got["search"]
    assert json.loads(out(capsys, "preview", "hookify", "--json")) == got["preview"]
    searched = out(capsys, "search", "formatter")
    assert searched.startswith(
        "formatter  \n  formatter@alpha  -  relative path ./formatter\n  formatter@beta  -  relative path ./formatter\n"
    )
    shown = out(capsys, "preview", "hookify")
    assert shown.startswith(f"{HOOKIFY}  version {got['preview']['version']}  ")
    assert "Runs code while enabled:\n  - hook PreToolUse: python3" in shown
    assert not list((RoderPaths.from_env().data_dir / "plugins").glob("staging/.fetch-*"))  # a preview keeps nothing

    # declining (no terminal to ask on, no --yes) installs nothing and exits 2
    assert main(["plugin", "install", "hookify"]) == 2
    assert capsys.readouterr().err.endswith("not installed\n")
    assert answer(here, lambda c: c.call(PLUGINS_LIST_INSTALLED)).plugins == []
    assert f"installed {HOOKIFY} " in out(capsys, "install", "hookify", "--yes")
    assert out(capsys, "install", "formatter@alpha").endswith(
        "installed formatter@alpha 1.0.0 (enabled; new sessions load it, and /plugin applies changes in a running one)\n"
    )
    installed = answer(here, lambda c: c.call(PLUGINS_LIST_INSTALLED))
    assert json.loads(out(capsys, "list", "--json")) == installed.wire()
    assert out(capsys, "list").startswith(f"formatter@alpha  1.0.0  enabled\n  commands: /formatter:fmt\n{HOOKIFY}  ")

    # enable, disable, configure, uninstall, refresh and remove: the method's answer, in a line
    assert out(capsys, "disable", "formatter") == "disabled formatter@alpha (applies to sessions started from now on)\n"
    assert not answer(here, lambda c: c.call(PLUGINS_READ, PluginParams(plugin="formatter@alpha"))).plugin.enabled
    assert out(capsys, "enable", "formatter@alpha") == "enabled formatter@alpha (applies to sessions started from now on)\n"
    assert answer(here, lambda c: c.call(PLUGINS_READ, PluginParams(plugin="formatter@alpha"))).plugin.enabled
    assert main(["plugin", "configure", "hookify", "-o", "COLOR=red"]) == 1
    assert capsys.readouterr().err == f"roder plugin: plugin {HOOKIFY} has no option COLOR (it has: none)\n"
    assert out(capsys, "uninstall", "formatter@alpha", "--keep-data") == "uninstalled formatter@alpha\n"
    assert out(capsys, "marketplace", "refresh", "alpha") == f"refreshed alpha  1 plugin  (directory {alpha})\n"
    assert out(capsys, "marketplace", "remove", "beta") == "removed beta\n"
    assert [m["name"] for m in json.loads(out(capsys, "marketplace", "list", "--json"))] == ["alpha", "claude-plugins-official"]


def test_failures_are_the_methods_messages_with_exit_1_and_no_traceback(
    tmp_path: Path, workspace: Path, roder_home: Path
) -> None:
    (alpha, _) = formatter_variants(tmp_path / "catalogs")
    assert roder_plugin(workspace, "marketplace", "add", str(alpha)).returncode == 0

    async def refusals(client: LocalAppClient) -> list[str]:
        messages = []
        for call in (
            client.call(PLUGINS_PREVIEW_INSTALL, PluginParams(plugin="nope@alpha")),
            client.call(PLUGINS_ENABLE, PluginOptionsParams(plugin="ghost")),
        ):
            with pytest.raises(RpcError) as refused:
                await call
            messages.append(refused.value.message)
        return messages

    missing_plugin, not_installed = answer(workspace, refusals)
    for args, message in (
        (("install", "nope@alpha", "--yes"), missing_plugin),
        (("enable", "ghost"), not_installed),
        (("configure", "formatter", "--option", "novalue"), "--option 'novalue': write KEY=VALUE"),
        (("marketplace", "add", str(tmp_path / "no-such-folder")), None),
    ):
        done = roder_plugin(workspace, *args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert done.stderr.startswith("roder plugin: "), done.stderr
        assert "Traceback" not in done.stderr
        if message is not None:
            assert done.stderr == f"roder plugin: {message}\n"
    write(roder_home / "config.toml", "this is = = not toml\n")
    broken = roder_plugin(workspace, "list")
    assert broken.returncode == 2  # a configuration error: the same status and line as every command's
    assert broken.stderr.startswith("roder: ") and "config.toml" in broken.stderr
    assert "Traceback" not in broken.stderr


def test_a_folders_plugin_settings_count_only_once_it_is_trusted(tmp_path: Path, workspace: Path) -> None:
    official = copy_official(tmp_path / "catalogs", ["hookify"])
    assert roder_plugin(workspace, "marketplace", "add-default", "--path", str(official)).returncode == 0
    assert roder_plugin(workspace, "install", "hookify", "--yes").returncode == 0
    write_json(
        workspace / ".claude" / "settings.json",
        {
            "enabledPlugins": {HOOKIFY: False},
            "extraKnownMarketplaces": {"team": {"source": {"source": "github", "repo": "acme/team-plugins"}}},
        },
    )
    # headless, in a folder nobody trusted: the folder's settings are not read
    untrusted = roder_plugin(workspace, "list").stdout
    assert f"{HOOKIFY}  " in untrusted
    assert "(not loaded here)" not in untrusted
    assert "team" not in roder_plugin(workspace, "marketplace", "list").stdout
    assert subprocess.run(roder_command("trust", str(workspace)), capture_output=True, text=True).returncode == 0
    # trusted: the folder turns the plugin off here and declares its own catalog
    assert "enabled (not loaded here)" in roder_plugin(workspace, "list").stdout
    listed = roder_plugin(workspace, "marketplace", "list").stdout
    assert "team  declared by this project, not added  (github acme/team-plugins)" in listed
