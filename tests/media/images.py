"""Real image files for the media tests, drawn with Pillow."""

from __future__ import annotations

import io


def png_bytes(width: int, height: int, color: tuple[int, int, int] = (255, 0, 0), fmt: str = "PNG") -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, format=fmt)
    return out.getvalue()
