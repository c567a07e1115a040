"""Modal screens that draw the screen below through their tint straight from its rows.

A modal screen with a see-through background (the palette's, help's) shows the screen below it
tinted. Textual draws that by rendering the screen below as a Rich renderable: its rows turned
into segments, each segment's colours blended with the tint, the base style added, and the
segments split into rows again, every time the modal is shown. That round trip was most of what
opening the palette or help cost (bench/README.md, "Modal screens"). ``TintedModalScreen`` takes
the rows the screen below already has and restyles each segment, blending each distinct style
once: the same picture, the same colours.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic

from rich.segment import Segment
from rich.style import Style as RichStyle
from textual.color import Color
from textual.renderables.background_screen import BackgroundScreen
from textual.screen import ModalScreen, Screen, ScreenResultType
from textual.strip import Strip
from textual.visual import Visual

if TYPE_CHECKING:
    from rich.console import RenderableType
    from textual.css.styles import RulesMap
    from textual.style import Style
    from textual.visual import RenderOptions

_PLAIN = RichStyle()


def tinted(style: RichStyle | None, tint: Color) -> RichStyle:
    """A segment's style seen through ``tint``: links and meta dropped, its colours blended
    with the tint (as Textual's ``BackgroundScreen`` does)."""
    style = _PLAIN if style is None else style.clear_meta_and_links()
    if tint.a == 0:
        return style
    color = (Color.from_rich_color(style.color) + tint).rich_color if style.color is not None else None
    bgcolor = (Color.from_rich_color(style.bgcolor) + tint).rich_color if style.bgcolor is not None else None
    return style + RichStyle.from_color(color, bgcolor)


class TintedScreen(Visual):
    """The rows of ``screen`` seen through ``tint``, under the modal's own base style."""

    def __init__(self, screen: Screen[object], tint: Color) -> None:
        self.screen = screen
        self.tint = tint

    def get_optimal_width(self, rules: RulesMap, container_width: int) -> int:
        return container_width

    def get_height(self, rules: RulesMap, width: int) -> int:
        return self.screen.size.height

    def render_strips(self, width: int, height: int | None, style: Style, options: RenderOptions) -> list[Strip]:
        base = style.rich_style
        restyled: dict[RichStyle | None, RichStyle] = {}
        rows = self.screen._compositor.render_strips()
        strips: list[Strip] = []
        for row in rows if height is None else rows[:height]:
            segments: list[Segment] = []
            for text, segment_style, _control in row:
                new = restyled.get(segment_style)
                if new is None:
                    new = restyled[segment_style] = base + tinted(segment_style, self.tint)
                segments.append(Segment(text, new))
            strip = Strip(segments, row.cell_length)
            strips.append(strip.crop(0, width) if strip.cell_length > width else strip)
        return strips


class TintedModalScreen(ModalScreen[ScreenResultType], Generic[ScreenResultType]):
    """A modal screen whose see-through background is drawn by ``TintedScreen``."""

    def render(self) -> RenderableType | Visual:  # type: ignore[override]
        below = super().render()
        if isinstance(below, BackgroundScreen):
            return TintedScreen(below.screen, below.color)
        return below
