"""The file-mutation queue: tool calls that write the same path run one after another.

Independent calls of one model response run in parallel; two edits of one file must not
interleave their read-modify-write. Locks are taken in sorted order so two calls that touch
overlapping path sets cannot deadlock.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable


class MutationQueue:
    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}

    @contextlib.asynccontextmanager
    async def hold(self, paths: Iterable[str]) -> AsyncIterator[None]:
        keys = sorted(set(paths))
        locks = [self._locks.setdefault(key, asyncio.Lock()) for key in keys]
        acquired: list[asyncio.Lock] = []
        try:
            for lock in locks:
                await lock.acquire()
                acquired.append(lock)
            yield
        finally:
            for lock in reversed(acquired):
                lock.release()
            for key in keys:
                left = self._locks.get(key)
                if left is not None and not left.locked() and not getattr(left, "_waiters", None):
                    del self._locks[key]
