"""The palette's and help's see-through background is drawn from the rows of the screen below
(``roder_tui.screens.tinted``) instead of Textual's Rich round trip: the same picture."""

from __future__ import annotations

from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.screen import ModalScreen
from textual.strip import Strip
from textual.widgets import Static

from roder_tui.screens.tinted import TintedModalScreen, TintedScreen

CSS = "ModalScreen { background: $background 60%; }"


class _Plain(ModalScreen[None]):
    DEFAULT_CSS = CSS


class _Tinted(TintedModalScreen[None]):
    DEFAULT_CSS = CSS


class _Colourful(App[None]):
    CSS = """
    #a { background: red; color: yellow; height: 3; }
    #b { background: $panel; color: $text-muted; text-style: bold; height: 4; }
    """

    def compose(self) -> ComposeResult:
        yield Static("[link='https://example.invalid']a link[/] and [green on blue]colours[/]", id="a")
        yield Static("muted, bold\nsecond line", id="b")
        yield Static("plain text on the screen's own background")


def _background(app: _Colourful) -> list[Strip]:
    screen = app.screen
    return screen.render_lines(Region(0, 0, screen.size.width, screen.size.height))


async def test_the_tint_is_drawn_as_textual_draws_it(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: list[int] = []
    render_strips = TintedScreen.render_strips

    def counted(self: TintedScreen, *args: Any) -> list[Strip]:
        drawn.append(1)
        return render_strips(self, *args)

    monkeypatch.setattr(TintedScreen, "render_strips", counted)
    app = _Colourful()
    async with app.run_test(size=(50, 12)) as pilot:
        await app.push_screen(_Plain())
        await pilot.pause()
        textual_drawn = _background(app)
        app.pop_screen()
        await pilot.pause()
        await app.push_screen(_Tinted())
        await pilot.pause()
        ours = _background(app)
        assert drawn  # by TintedScreen, not by Textual's BackgroundScreen
        assert len(ours) == len(textual_drawn) == 12
        for mine, theirs in zip(ours, textual_drawn, strict=True):
            assert list(mine) == list(theirs)
        assert any("colours" in mine.text for mine in ours)
