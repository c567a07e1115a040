"""Stream-delta coalescing: however fast tokens arrive, the screen is updated at most ``fps``
times a second.

Deltas are appended to per-key buffers (O(1), no rendering); a single flush is scheduled
``1/fps`` after the first pending delta and hands every buffer over at once. Nothing is
scheduled while no deltas arrive, so an idle app wakes for nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

Flush = Callable[[dict[str, str]], Awaitable[None]]


class DeltaCoalescer:
    def __init__(self, flush: Flush, fps: float = 30.0) -> None:
        self._flush = flush
        self.interval = 1.0 / fps
        self._pending: dict[str, list[str]] = {}
        self._handle: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._last = 0.0
        self.flushes = 0

    def push(self, key: str, text: str) -> None:
        if not text:
            return
        self._pending.setdefault(key, []).append(text)
        if self._handle is None and (self._task is None or self._task.done()):
            delay = max(self.interval - (time.monotonic() - self._last), 0.0)
            self._handle = asyncio.get_running_loop().call_later(delay, self._start)

    def _start(self) -> None:
        self._handle = None
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while self._pending:
            batch = {key: "".join(parts) for key, parts in self._pending.items()}
            self._pending.clear()
            self._last = time.monotonic()
            self.flushes += 1
            await self._flush(batch)
            if self._pending:
                # More arrived while rendering: wait out the rest of the frame, then go again.
                await asyncio.sleep(max(self.interval - (time.monotonic() - self._last), 0.0))

    async def drain(self) -> None:
        """Flush everything now (before an item completes, so its final text lands in order)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._task is not None and not self._task.done():
            await self._task
        if self._pending:
            await self._run()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
