"""Paths built from data: the one place they are checked.

A plugin manifest's ``version``, a marketplace or plugin name, a client's thread id, a batch
task id, a workflow or team id: each becomes part of a path under one of Roder's folders. Data
can say anything (``"version": "../../.."``), so every such component goes through
``component`` (one plain file name: no separator, not ``.`` or ``..``, no NUL or control
characters, not empty, at most 255 bytes), and every destination through ``contained`` (inside
its root both as written and with the links of its existing part resolved) before anything is
written or removed there; ``remove_tree`` is the only way Roder removes a folder it built from
data. A refusal is an ``UnsafePathError`` naming what was wrong; nothing is touched.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from roder_core.errors import UnsafePathError

#: The longest file name Linux file systems take.
MAX_COMPONENT_BYTES = 255


def component(value: object, what: str) -> str:
    """``value`` when it is one plain path component; ``UnsafePathError`` otherwise."""
    if not isinstance(value, str) or not value:
        raise UnsafePathError(f"{what} {value!r} is not a name: it must be a non-empty string")
    problem = None
    if value in (".", ".."):
        problem = "it names a folder above or the folder itself"
    elif "/" in value or "\\" in value:
        problem = "it holds a path separator"
    elif any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        problem = "it holds a control character"
    elif len(value.encode("utf-8", errors="surrogatepass")) > MAX_COMPONENT_BYTES:
        problem = f"it is longer than {MAX_COMPONENT_BYTES} bytes"
    if problem is not None:
        raise UnsafePathError(f"{what} {value!r} is not a plain name ({problem}); nothing was written")
    return value


def child(root: Path, *parts: str, what: str) -> Path:
    """``root / parts...`` with each part a checked component, checked to lie inside ``root``."""
    for part in parts:
        component(part, what)
    return contained(root, root.joinpath(*parts), what)


def contained(root: Path, target: Path, what: str) -> Path:
    """``target`` when it lies strictly inside ``root``, as written and with links resolved;
    ``UnsafePathError`` otherwise (a link in the existing part of the path that leads out counts
    as out)."""
    lexical_root = Path(os.path.normpath(os.path.abspath(root)))
    lexical = Path(os.path.normpath(os.path.abspath(target)))
    real_root = Path(os.path.realpath(root))
    real = Path(os.path.realpath(target))
    for form, base in ((lexical, lexical_root), (real, real_root)):
        if form == base or not form.is_relative_to(base):
            raise UnsafePathError(f"{what}: {target} is not inside {root}; nothing was written or removed")
    return target


def remove_tree(root: Path, target: Path, what: str) -> None:
    """Remove ``target`` (a folder, a file or a link, never what a link points at) after
    checking it lies inside ``root``; a missing target is fine."""
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return
    lexical_root = Path(os.path.normpath(os.path.abspath(root)))
    lexical = Path(os.path.normpath(os.path.abspath(target)))
    real_root = Path(os.path.realpath(root))
    real_parent = Path(os.path.realpath(lexical.parent))
    if (
        lexical == lexical_root
        or not lexical.is_relative_to(lexical_root)
        or not (real_parent == real_root or real_parent.is_relative_to(real_root))
    ):
        raise UnsafePathError(f"{what}: {target} is not inside {root}; nothing was removed")
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(target)  # fd-based on Linux: a link met inside is removed, not followed
    else:
        os.unlink(target)
