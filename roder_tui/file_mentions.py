"""``@path`` mentions in a prompt: how the app writes them and the one place that reads them.

A path with a space cannot be a bare ``@token`` (the space would end it), so the ``@`` completion
writes it quoted, ``@"src/my dir/notes one.md"``, as Claude Code does; a bare path stays bare.
Both the files attached when a prompt is sent and the images found in it are read through
``mentioned_paths``, so a file the completion offered is always a file the prompt attaches.
Light on purpose: one-shot mode imports it through ``media_input``.
"""

from __future__ import annotations

import re

#: ``@"a path"`` (any characters but a quote) or ``@path`` (no space), after a space or at the start.
_MENTION = re.compile(r"""(?:^|(?<=\s))@(?:"([^"\n]+)"|([^\s@"]+))""")
#: The mention being typed at the cursor: ``@"a pa`` (an open quote) or ``@pa``.
_TYPING = re.compile(r"""(?:^|(?<=\s))@(?:"([^"\n]*)|([^\s@"]*))$""")


def mention(path: str) -> str:
    """How ``path`` is written in a prompt so that it reads back whole."""
    return f'@"{path}"' if any(c.isspace() for c in path) else f"@{path}"


def mentioned_paths(text: str) -> list[tuple[int, str]]:
    """(offset, path) of every ``@`` mention in ``text``, in order (the path unquoted)."""
    return [(m.start(), m.group(1) if m.group(1) is not None else m.group(2)) for m in _MENTION.finditer(text)]


def mention_being_typed(before_cursor: str) -> tuple[str, str] | None:
    """(the token to replace, the query typed so far) when the cursor ends an ``@`` mention."""
    match = _TYPING.search(before_cursor)
    if match is None:
        return None
    return match.group(0), match.group(1) if match.group(1) is not None else match.group(2)
