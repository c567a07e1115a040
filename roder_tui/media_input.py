"""Images named in a prompt: ``@shot.png`` (a workspace file) or a path pasted into the prompt,
as terminals paste a file dropped on them (``/home/me/Shot 1.png`` quoted, ``Shot\\ 1.png``
escaped, or a ``file://`` URL).

Images inside the workspace are sent by path, so the server reads them through the workspace's
file broker; a picture pasted from elsewhere (``~/Desktop``) is read here, by the user's own
client, and sent as bytes. Only files whose first bytes are an image count, so a pasted path to
a text file stays text.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from roder_tui.file_mentions import mentioned_paths

if TYPE_CHECKING:
    from roder_core.server.protocol import InputItem

_QUOTED = re.compile(r"""(?:^|\s)(['"])((?:/|~/|file://)[^'"\n]+)\1""")
_TRAILING = ",.;:!?)]}'\""
_BARE = re.compile(r"(?:^|\s)((?:/|~/|\./|file://)(?:\\ |[^\s])+)")


def _candidates(text: str, workspace: Path) -> list[Path]:
    """Every path-like token, in the order it appears; a token ending in punctuation also
    counts without it (``@shot.png,``)."""
    found: list[tuple[int, str]] = mentioned_paths(text)
    found += [(m.start(2), m.group(2)) for m in _QUOTED.finditer(text)]
    found += [(m.start(1), m.group(1).replace("\\ ", " ")) for m in _BARE.finditer(text)]
    paths: list[Path] = []
    for _, token in sorted(found):
        for raw in dict.fromkeys((token, token.rstrip(_TRAILING))):
            if raw.startswith("file://"):
                raw = unquote(urlsplit(raw).path)
            path = Path(raw).expanduser()
            paths.append(path if path.is_absolute() else workspace / path)
    return paths


def is_image_file(path: Path) -> bool:
    from roder_core.media.images import sniff_image  # loaded only when a prompt names a file

    try:
        with path.open("rb") as handle:
            return sniff_image(handle.read(16)) is not None
    except OSError:
        return False


def prompt_images(text: str, workspace: Path) -> list[Path]:
    """Image files the prompt names, each once, in the order they appear."""
    images: list[Path] = []
    for path in _candidates(text, workspace):
        try:
            resolved = path.resolve()
        except (OSError, RuntimeError):
            continue
        if resolved not in images and resolved.is_file() and is_image_file(resolved):
            images.append(resolved)
    return images


def image_inputs(text: str, workspace: Path) -> list[InputItem]:
    """Turn input items for the prompt's images (see the module doc for why two forms)."""
    from roder_core.server.protocol import InputItem

    return [InputItem.model_validate(wire) for wire in image_input_wires(text, workspace)]


def image_input_wires(text: str, workspace: Path) -> list[dict[str, str]]:
    """``image_inputs`` in their wire form (camelCase dicts), for a client that sends them to a
    running host without loading the protocol's models."""
    root = workspace.resolve()
    items: list[dict[str, str]] = []
    for path in prompt_images(text, workspace):
        if path.is_relative_to(root):
            items.append({"type": "image", "path": str(path), "name": path.name})
            continue
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        items.append({"type": "image", "name": path.name, "dataBase64": data})
    return items
