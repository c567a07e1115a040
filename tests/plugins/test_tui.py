"""The ``/plugin`` screen with Textual's Pilot: search, preview what runs, refuse, accept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input, OptionList, Static

from roder_core.plugins.store import PluginStore
from roder_core.settings.paths import RoderPaths
from roder_tui.app import RoderApp
from roder_tui.screens.plugins import PluginOptionsScreen, PluginScreen
from tests.plugins.support import copy_official, marketplace, write, write_json
from tests.tui.helpers import make_app, ready, until


def shown(screen: PluginScreen, widget_id: str) -> str:
    return str(screen.query_one(widget_id, Static).render())


async def plugin_screen(pilot: Any, app: RoderApp) -> PluginScreen:
    """``/plugin`` run from the app, once its screen is up."""
    await app.run_slash("/plugin")
    await until(pilot, lambda: isinstance(app.screen, PluginScreen), what="the plugin screen")
    screen = app.screen
    assert isinstance(screen, PluginScreen)
    return screen


async def test_browse_preview_and_install_with_keys(
    tmp_path: Path, workspace: Path, roder_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    PluginStore(RoderPaths.from_env()).install_default(copy_official(tmp_path / "catalogs", ["hookify", "commit-commands"]))
    app = make_app(workspace, [], monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press(*"/plugin")
        await pilot.press("escape", "enter")  # close the completion menu, then send
        await until(pilot, lambda: isinstance(app.screen, PluginScreen), what="the plugin screen")
        screen = app.screen
        assert isinstance(screen, PluginScreen)
        await until(pilot, lambda: len(screen.results) > 100, what="the catalog listed")
        await pilot.press(*"hookify")
        await until(pilot, lambda: [r.name for r in screen.results][:1] == ["hookify"], what="the search")
        assert screen.query_one(Input).value == "hookify"
        await pilot.press("enter")
        await until(pilot, lambda: screen.preview is not None, what="the preview")
        text = shown(screen, "#plugin-preview")
        assert "hookify@claude-plugins-official" in text and "Runs code while enabled:" in text
        assert 'hook PreToolUse: python3 "${CLAUDE_PLUGIN_ROOT}/hooks/pretooluse.py"' in text
        assert screen.query_one(OptionList).has_focus
        await pilot.press("i")
        await until(pilot, lambda: "Install it? y accepts" in shown(screen, "#plugin-status"), what="the question")
        await pilot.press("n")
        await until(pilot, lambda: shown(screen, "#plugin-status") == "not installed", what="the refusal")
        records = roder_home / "data" / "plugins" / "installed_plugins.json"
        assert not records.exists()
        await pilot.press("i")
        await until(pilot, lambda: "Install it?" in shown(screen, "#plugin-status"), what="the question again")
        await pilot.press("y")
        await until(pilot, lambda: shown(screen, "#plugin-status").startswith("installed hookify"), what="the install")
        data = json.loads(records.read_text())["plugins"]
        assert data["hookify@claude-plugins-official"][0]["enabled"] is True
        await pilot.press("d")
        await until(pilot, lambda: "disabled hookify" in shown(screen, "#plugin-status"), what="disable")
        assert json.loads(records.read_text())["plugins"]["hookify@claude-plugins-official"][0]["enabled"] is False
        await pilot.press("e")  # no options to ask for: plugins/enable at once
        await until(pilot, lambda: "enabled hookify" in shown(screen, "#plugin-status"), what="enable")
        assert json.loads(records.read_text())["plugins"]["hookify@claude-plugins-official"][0]["enabled"] is True
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, PluginScreen), what="the screen to close")


def options_catalog(root: Path) -> Path:
    plugin = root / "configured"
    options = {
        "API_TOKEN": {"type": "string", "title": "API token", "sensitive": True, "required": True},
        "REGION": {"type": "string", "title": "Region", "default": "eu"},
    }
    write_json(plugin / ".claude-plugin" / "plugin.json", {"name": "configured", "version": "1.0.0", "userConfig": options})
    write(plugin / "commands" / "go.md", "Go.")
    return marketplace(root, "opts", [{"name": "configured", "source": "./configured"}])


async def test_installing_asks_for_the_plugins_options_in_a_dialog(
    tmp_path: Path, workspace: Path, roder_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = PluginStore(RoderPaths.from_env())
    store.add_marketplace(str(options_catalog(tmp_path / "opts")))
    app = make_app(workspace, [], monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        screen = await plugin_screen(pilot, app)
        await until(pilot, lambda: [r.name for r in screen.results] == ["configured"], what="the catalog listed")
        await pilot.press("enter")
        await until(pilot, lambda: screen.preview is not None, what="the preview")
        assert "asks for option API token (required, sensitive)" in shown(screen, "#plugin-preview")
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, PluginOptionsScreen), what="the options dialog")
        dialog = app.screen
        token = dialog.query_one("#option-API_TOKEN", Input)
        assert token.password and dialog.query_one("#option-REGION", Input).value == "eu"
        await pilot.press(*"tok-0123456789abcdef")
        await pilot.press("enter")  # to the next field
        await until(pilot, lambda: dialog.query_one("#option-REGION", Input).has_focus, what="the next field")
        await pilot.press("backspace", "backspace", *"us", "enter")
        await until(pilot, lambda: shown(screen, "#plugin-status").startswith("installed configured"), what="the install")
    assert store.options.values("configured@opts") == {"REGION": "us", "API_TOKEN": "tok-0123456789abcdef"}


async def test_a_plugins_theme_joins_the_themes_and_can_be_the_chosen_one(
    tmp_path: Path, workspace: Path, roder_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin = tmp_path / "themes" / "tinted"
    write_json(plugin / ".claude-plugin" / "plugin.json", {"name": "tinted", "version": "1.0.0"})
    overrides = {"claude": "#ff00aa", "background": "#001122", "shimmer": "#ffffff"}
    write_json(plugin / "themes" / "ocean.json", {"name": "ocean", "base": "dark", "overrides": overrides})
    store = PluginStore(RoderPaths.from_env())
    store.add_marketplace(str(marketplace(tmp_path / "themes", "looks", [{"name": "tinted", "source": "./tinted"}])))
    store.install("tinted@looks")
    write(roder_home / "config.toml", 'theme = "tinted:ocean"\n')
    app = make_app(workspace, [], monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await until(pilot, lambda: app.roder_theme.name == "tinted:ocean", what="the plugin theme applied")
        theme = app.themes.themes["tinted:ocean"]
        assert theme.dark and theme.colors["primary"].lower() == "#ff00aa" and theme.colors["background"].lower() == "#001122"
        assert "no Roder colour for: shimmer" in theme.source
        assert app.theme == "tinted:ocean"


async def test_enabling_asks_for_the_required_options_it_lacks(
    tmp_path: Path, workspace: Path, roder_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = PluginStore(RoderPaths.from_env())
    store.add_marketplace(str(options_catalog(tmp_path / "opts")))
    store.install("configured@opts", options={"API_TOKEN": "tok-old-0123456789"})
    store.set_enabled("configured@opts", False)
    store.options.forget("configured@opts")
    app = make_app(workspace, [], monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        screen = await plugin_screen(pilot, app)
        await until(pilot, lambda: [r.name for r in screen.results] == ["configured"], what="the catalog listed")
        await pilot.press("enter")
        await until(pilot, lambda: screen.preview is not None, what="the preview")
        assert "installed (disabled) · e enables" in shown(screen, "#plugin-preview")
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, PluginOptionsScreen), what="the options dialog")
        dialog = app.screen
        assert [field.id for field in dialog.query(Input)] == ["option-API_TOKEN"]  # only what is missing
        await pilot.press("escape")
        await until(pilot, lambda: shown(screen, "#plugin-status") == "not enabled", what="the refusal")
        assert not store.installed()["configured@opts"].enabled
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, PluginOptionsScreen), what="the options dialog again")
        await pilot.press(*"tok-new-0123456789", "enter")
        await until(pilot, lambda: shown(screen, "#plugin-status").startswith("enabled configured@opts"), what="enable")
    assert store.installed()["configured@opts"].enabled
    assert store.options.values("configured@opts")["API_TOKEN"] == "tok-new-0123456789"


async def test_a_plugins_description_is_shown_as_written_not_read_as_markup(
    tmp_path: Path, workspace: Path, roder_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A catalog is somebody else's text: its brackets are drawn, never styled, linked or refused."""
    description = "[bold]loud[/bold] [link=http://127.0.0.1:9/x]here[/link] [/]"
    plugin = tmp_path / "catalog" / "marked"
    write_json(plugin / ".claude-plugin" / "plugin.json", {"name": "marked", "version": "1.0.0"})
    entry = {"name": "marked", "source": "./marked", "description": description}
    PluginStore(RoderPaths.from_env()).add_marketplace(str(marketplace(tmp_path / "catalog", "marks", [entry])))
    app = make_app(workspace, [], monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        screen = await plugin_screen(pilot, app)
        await until(pilot, lambda: [r.name for r in screen.results] == ["marked"], what="the catalog listed")
        options = screen.query_one(OptionList)
        await until(pilot, lambda: options.option_count == 1, what="the row")
        await pilot.pause()
        rows = [options.render_line(y).text for y in range(options.size.height)]
        assert any(f"marked  {description}" in row for row in rows), rows
