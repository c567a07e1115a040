"""What an image is, how large, and a small preview of it.

Formats are told by their first bytes (never by a file name). Pillow measures, converts and
scales; it is imported only when an image is actually handled, so startup never pays for it.
Every vision API accepts PNG, JPEG, GIF and WebP up to about 5 MB and 8000 pixels a side;
``prepare`` brings anything else a user attaches (a BMP from a clipboard, a 30 MB photo) within
those limits once, when it is stored, so no request is ever refused for its picture.
"""

from __future__ import annotations

import io
import re
import struct
import threading
import warnings
import zlib
from dataclasses import dataclass
from typing import Any

from roder_core.errors import RoderError

#: What every vision dialect accepts (OpenAI Responses and Chat Completions, Anthropic Messages).
SENDABLE = ("image/png", "image/jpeg", "image/gif", "image/webp")
EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}
#: Largest image accepted at all; bigger ones are refused with a clear error.
MAX_INPUT_BYTES = 25 * 1024 * 1024
#: What is sent: Anthropic's per-image limit is 5 MB and 8000 px a side (the strictest).
MAX_SENT_BYTES = 5 * 1024 * 1024
MAX_SIDE = 8000
THUMBNAIL_SIDE = 256
#: Largest image decoded at all, in pixels, checked from the header before any pixel is decoded:
#: a 0.7 MB PNG can declare 8000x22000 pixels (700 MB once decoded). 50 megapixels is a large
#: camera photo (8000x6250); decoded as RGBA it takes 200 MB at most.
MAX_PIXELS = 50_000_000
#: One decode at a time in this process, so that images in parallel tool calls or attachments
#: never add their decoded sizes up.
_DECODING = threading.Lock()

_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


class MediaError(RoderError):
    """An attachment that cannot be used (not an image, too large, unreadable, deleted)."""


def sniff_image(head: bytes) -> str | None:
    """The MIME type of a sendable image from its first bytes, or None."""
    for magic, mime in _MAGIC:
        if head.startswith(magic):
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


@dataclass(frozen=True)
class PreparedImage:
    data: bytes
    mime_type: str
    width: int
    height: int


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: Pillow names its in-memory file in some errors; the user and the model read "the data".
_BUFFER_REPR = re.compile(r"<_io\.BytesIO object at 0x[0-9a-fA-F]+>")


def without_bad_ancillary_chunks(data: bytes) -> bytes:
    """A PNG whose optional (ancillary) chunks have a wrong CRC, which browsers and other
    viewers accept, without those chunks; the image data itself stays checked. Anything else,
    including a PNG whose critical chunks are damaged, comes back unchanged."""
    if not data.startswith(_PNG_SIGNATURE):
        return data
    kept = [_PNG_SIGNATURE]
    offset = len(_PNG_SIGNATURE)
    dropped = False
    while offset + 12 <= len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        end = offset + 12 + length
        if end > len(data):
            return data  # truncated: left to the decoder to report
        kind = data[offset + 4 : offset + 8]
        (crc,) = struct.unpack(">I", data[end - 4 : end])
        ancillary = bool(kind[0] & 0x20)  # lowercase first letter: the chunk may be skipped (PNG spec 5.4)
        if ancillary and zlib.crc32(data[offset + 4 : end - 4]) != crc:
            dropped = True
        else:
            kept.append(data[offset:end])
        offset = end
        if kind == b"IEND":
            break
    return b"".join(kept) if dropped else data


def _pil() -> Any:
    try:
        from PIL import Image
    except ImportError as exc:  # a declared dependency; a broken install says what is missing
        raise MediaError("images need Pillow: pip install pillow") from exc
    return Image


def _open(data: bytes, what: str, side: int) -> Any:
    """The image decoded, reduced while decoding where the format allows (JPEG's draft mode
    decodes at 1/2, 1/4 or 1/8 scale) to about ``side`` pixels on its longer edge, after its
    header's size was checked against ``MAX_PIXELS``. Callers hold ``_DECODING``."""
    image_module = _pil()
    try:
        with warnings.catch_warnings():  # Pillow warns of what check_pixels refuses
            warnings.simplefilter("ignore", image_module.DecompressionBombWarning)
            image = image_module.open(io.BytesIO(data))  # reads the header only
        check_pixels(image.size, what)
        if max(image.size) > side:
            image.draft(None, (side, side))
        image.load()
    except image_module.DecompressionBombError as exc:  # Pillow's own, far higher limit, in open()
        raise MediaError(f"{what} is over {MAX_PIXELS // 1_000_000} megapixels, the most Roder decodes ({exc})") from None
    except (OSError, ValueError, SyntaxError) as exc:
        reason = _BUFFER_REPR.sub("the data", str(exc))
        raise MediaError(f"{what} is not an image Roder can read ({reason})") from None
    return image


def check_pixels(size: tuple[int, int], what: str) -> None:
    """Refuse an image whose header declares more than ``MAX_PIXELS`` (before decoding it)."""
    width, height = size
    if width * height > MAX_PIXELS:
        raise MediaError(
            f"{what} is {width}x{height} pixels ({width * height / 1e6:.0f} megapixels); "
            f"images up to {MAX_PIXELS // 1_000_000} megapixels can be used"
        )


def _encode(image: Any, mime: str) -> bytes:
    out = io.BytesIO()
    if mime == "image/jpeg":
        image.convert("RGB").save(out, format="JPEG", quality=85, optimize=True)
    else:
        image.save(out, format="PNG", optimize=True)
    return out.getvalue()


def prepare(data: bytes, what: str = "the attachment") -> PreparedImage:
    """``data`` as an image every vision model accepts: its own bytes when they already are one,
    otherwise converted to PNG and scaled down (JPEG when a PNG would still be too large)."""
    if not data:
        raise MediaError(f"{what} is empty")
    if len(data) > MAX_INPUT_BYTES:
        raise MediaError(
            f"{what} is {len(data) // (1024 * 1024)} MB; images up to {MAX_INPUT_BYTES // (1024 * 1024)} MB can be attached"
        )
    with _DECODING:
        return _prepare(without_bad_ancillary_chunks(data), what)


def _prepare(data: bytes, what: str) -> PreparedImage:
    image = _open(data, what, MAX_SIDE)
    width, height = image.size
    mime = sniff_image(data[:16])
    if mime is not None and len(data) <= MAX_SENT_BYTES and max(width, height) <= MAX_SIDE:
        return PreparedImage(data, mime, width, height)
    if getattr(image, "is_animated", False):
        image.seek(0)  # a converted animation keeps its first frame
    if max(width, height) > MAX_SIDE:
        image.thumbnail((MAX_SIDE, MAX_SIDE))
    out_mime = "image/png"
    encoded = _encode(image, out_mime)
    while len(encoded) > MAX_SENT_BYTES:
        out_mime = "image/jpeg"
        encoded = _encode(image, out_mime)
        if len(encoded) <= MAX_SENT_BYTES:
            break
        image.thumbnail((max(image.size[0] // 2, 1), max(image.size[1] // 2, 1)))
    return PreparedImage(encoded, out_mime, *image.size)


def measure(data: bytes) -> tuple[int, int] | None:
    """Width and height read from the header (None when Pillow cannot tell)."""
    image_module = _pil()
    try:
        with image_module.open(io.BytesIO(without_bad_ancillary_chunks(data))) as image:
            return int(image.size[0]), int(image.size[1])
    except (OSError, ValueError, SyntaxError):
        return None


def thumbnail(data: bytes, side: int = THUMBNAIL_SIDE) -> PreparedImage:
    """A PNG preview at most ``side`` pixels on its longer edge (never enlarged)."""
    with _DECODING:
        return _thumbnail(without_bad_ancillary_chunks(data), side)


def _thumbnail(data: bytes, side: int) -> PreparedImage:
    image = _open(data, "the media item", side)
    if getattr(image, "is_animated", False):
        image.seek(0)
    if image.mode not in ("RGB", "RGBA", "L", "LA"):
        image = image.convert("RGBA")
    image.thumbnail((side, side))
    return PreparedImage(_encode(image, "image/png"), "image/png", *image.size)
