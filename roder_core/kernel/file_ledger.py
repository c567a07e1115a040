"""What one thread last saw of each file it read or wrote, so a whole-file write cannot silently
drop what changed on disk since (the user's edit, a formatter's, another agent's).

A file's *digest* is the SHA-256 of its bytes (size and modification time for very large files).
The tools record one after every read and every change, in the tool result's data under
``DIGESTS_KEY`` as well, so a resumed thread rebuilds its ledger from the stored results; each
thread (a subagent's too) has its own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

#: ``ToolResult.data`` key: {real path: digest, or None when the call deleted the file}.
DIGESTS_KEY = "file_digests"
#: Files larger than this are stamped by size and modification time instead of hashed.
MAX_HASHED_BYTES = 16 * 1024 * 1024


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def digest_of_large(size: int, mtime: float) -> str:
    return f"stat:{size}:{mtime!r}"


class FileLedger:
    """One thread's last known digest of each file (keyed by resolved path)."""

    def __init__(self) -> None:
        self._seen: dict[str, str | None] = {}

    @classmethod
    def from_results(cls, results: Iterable[Mapping[str, Any]]) -> FileLedger:
        """Rebuilt from the data of a thread's stored tool results, oldest first."""
        ledger = cls()
        for data in results:
            ledger.update(data.get(DIGESTS_KEY))
        return ledger

    def update(self, digests: Any) -> None:
        if not isinstance(digests, Mapping):
            return
        for path, digest in digests.items():
            if isinstance(path, str) and (digest is None or isinstance(digest, str)):
                self._seen[path] = digest

    def last(self, path: str) -> str | None:
        """The digest this thread last saw of ``path``; None if it never read or wrote it (or
        deleted it)."""
        return self._seen.get(path)
