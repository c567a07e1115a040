"""Output files only their owner can read.

Command output spilled to a file and background tasks' logs hold what commands printed (code,
data, redacted but otherwise complete): another local user must not read them, whatever the
umask, so they are created 0600 in folders created 0700.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO


def open_private(path: Path) -> BinaryIO:
    """Open ``path`` for writing (truncated), readable by the user only; its folder is created
    0700 if missing."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    os.fchmod(fd, 0o600)  # an older file of the same name keeps its mode otherwise
    return os.fdopen(fd, "wb")
