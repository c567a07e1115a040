"""The file tools' side of the thread's file ledger (``roder_core.kernel.file_ledger``).

``read``, ``write``, ``edit`` and ``apply_patch`` record what they saw or left; ``write`` refuses
to replace a file this thread never read, or one that changed on disk since it last read or
wrote it, because a whole-file write would silently drop what changed; ``edit`` and
``apply_patch`` say when their text no longer matches because the file changed since.
"""

from __future__ import annotations

from typing import Any

from roder_core.brokers import FileSystemBroker
from roder_core.kernel.file_ledger import DIGESTS_KEY, MAX_HASHED_BYTES, digest_of, digest_of_large
from roder_core.kernel.tools import ToolExecutionContext

from .common import ToolInputError


class StaleFileError(ToolInputError):
    """The file is not what this thread last saw of it; nothing was written."""


def key_of(fs: FileSystemBroker, path: str) -> str:
    return str(fs.resolve(path))


def digest_on_disk(fs: FileSystemBroker, path: str, data: bytes | None = None) -> str | None:
    """The file's digest now (None when it does not exist); ``data``: its bytes, if already read."""
    if data is not None:
        return digest_of(data)
    if not fs.exists(path):
        return None
    info = fs.stat(path)
    if info.size > MAX_HASHED_BYTES:
        return digest_of_large(info.size, info.mtime)
    return digest_of(fs.read_bytes(path))


def record(ctx: ToolExecutionContext, digests: dict[str, str | None]) -> dict[str, Any]:
    """Remember ``digests`` for this thread; returns them as result data (for a resumed thread)."""
    if ctx.files is not None:
        ctx.files.update(digests)
    return {DIGESTS_KEY: digests}


def check_whole_write(ctx: ToolExecutionContext, path: str, shown: str, data: bytes | None) -> None:
    """Refuse to replace an existing file this thread has not read, or that changed since.

    ``data``: the file's current bytes (None: it does not exist, and creating it is fine)."""
    if ctx.files is None or data is None:
        return
    last = ctx.files.last(key_of(ctx.brokers.fs, path))
    if last is None:
        raise StaleFileError(
            f"refused: {shown} already exists and has not been read in this conversation; read it first (write replaces "
            "the whole file), or change part of it with edit"
        )
    if last != digest_on_disk(ctx.brokers.fs, path, data):
        raise StaleFileError(
            f"refused: {shown} changed on disk since you last read or wrote it (a command, the user, a formatter or "
            "another agent changed it); writing now would discard those changes. Read it again and redo your "
            "change on its current content"
        )


def changed_since_note(ctx: ToolExecutionContext, path: str, data: bytes) -> str:
    """A sentence to add when an edit's text was not found and the file changed since this
    thread last read or wrote it; empty otherwise."""
    if ctx.files is None:
        return ""
    last = ctx.files.last(key_of(ctx.brokers.fs, path))
    if last is None or last == digest_of(data):
        return ""
    return " The file changed on disk since you last read or wrote it; read it again before editing."
