"""Images in the transcript and under the prompt: a text card (name, type, dimensions, size) in
every terminal, and an inline preview where the terminal draws images (``roder_tui.graphics``).

Previews are made by the server (``media/thumbnail``), so a remote TUI shows the server's
pictures the same way; the card is drawn from the message's own reference and never waits.
"""

from __future__ import annotations

import base64
import io
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.containers import Vertical
from textual.widgets import Static

if TYPE_CHECKING:
    from roder_core.ir import Attachment, MediaArtifact
    from roder_tui.graphics import Protocol

#: Longest edge of the thumbnail asked for (the widget scales it into a few cells).
PREVIEW_PIXELS = 256
PREVIEW_HEIGHT = 8


def human_size(size: int | None) -> str:
    if size is None:
        return ""
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def card_text(name: str, mime: str, width: int | None, height: int | None, size: int | None, note: str = "") -> Text:
    """``▣ shot.png  PNG · 1280x800 · 312 KB``."""
    details = [mime.split("/", 1)[-1].upper()]
    if width and height:
        details.append(f"{width}x{height}")
    if size is not None:
        details.append(human_size(size))
    text = Text.assemble(("▣ ", "roder.accent"), (name, "bold"), "  ", (" · ".join(details), "roder.muted"))
    if note:
        text.append(f"  {note}", style="dim")
    return text


def attachment_card(attachment: Attachment) -> Text:
    return card_text(attachment.name, attachment.mime_type, attachment.width, attachment.height, attachment.size)


def artifact_card(media: MediaArtifact, note: str = "") -> Text:
    return card_text(media.name, media.mime_type, media.width, media.height, media.size, note)


class MediaPreview(Vertical):
    """One image drawn inline: fetched as a thumbnail, then handed to textual-image."""

    DEFAULT_CSS = f"""
    MediaPreview {{ height: {PREVIEW_HEIGHT}; width: auto; max-width: 40; margin: 0 0 0 2; }}
    """

    def __init__(self, media_id: str, widget_class: Any) -> None:
        super().__init__(classes="media-preview")
        self.media_id = media_id
        self._widget_class = widget_class

    def on_mount(self) -> None:
        self.run_worker(self._load(), exclusive=True, group=f"preview-{self.media_id}")

    async def _load(self) -> None:
        from PIL import Image

        from roder_core.server.protocol_media import MEDIA_THUMBNAIL, MediaThumbnailParams

        app: Any = self.app  # the transcript shows the app's current thread
        params = MediaThumbnailParams(thread_id=app.thread_id, media_id=self.media_id, size=PREVIEW_PIXELS)
        try:
            result = await app._client().call(MEDIA_THUMBNAIL, params)
        except Exception:  # deleted, or the server is gone: the card above says what it was
            self.remove()
            return
        data = base64.b64decode(result.data_base64)
        image = Image.open(io.BytesIO(data))
        await self.mount(self._widget_class(image))


def preview_class(protocol: Protocol | None) -> Any | None:
    from roder_tui.graphics import preview_widget_class

    return preview_widget_class(protocol)


class PendingMedia(Static):
    """Images waiting for the next prompt (pasted from the clipboard), shown above the prompt."""

    DEFAULT_CSS = """
    PendingMedia { height: auto; padding: 0 1; display: none; }
    PendingMedia.-shown { display: block; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.items: list[MediaArtifact] = []

    def show_items(self, items: list[MediaArtifact]) -> None:
        self.items = list(items)
        lines = [artifact_card(m, "attached to your next prompt") for m in self.items]
        self.update(Text("\n").join(lines))
        self.set_class(bool(self.items), "-shown")

    def add(self, media: MediaArtifact) -> None:
        self.show_items([*(m for m in self.items if m.id != media.id), media])
