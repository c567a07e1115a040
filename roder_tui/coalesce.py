"""Stream-delta coalescing: however fast tokens arrive, the screen is updated at most ``fps``
times a second, and, with a CPU budget, no more often than the budget pays for.

Deltas are appended to per-key buffers (O(1), no rendering); a single flush is scheduled
``interval`` after the previous one and hands every buffer over at once. Nothing is scheduled
while no deltas arrive, so an idle app wakes for nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

Flush = Callable[[dict[str, str]], Awaitable[None]]


class CpuBudget:
    """Paces flushes so the event loop's thread uses about ``share`` of a core while text streams.

    What a flush costs is mostly what it sets off later, out of the flush's own call: Textual
    laying out and composing the frame (twice when a widget grew), writing its rows. So the
    budget is measured, not predicted: at each flush, the process's CPU since the previous one
    over the wall time since then is the share the stream really used, frames and deltas alike
    (all threads: Textual writes each frame to the terminal from a thread of its own, and the
    goal is the app's CPU, not its event loop's);
    the next interval is stretched (or shrunk back) by how far that share is from the budget,
    between ``1/fastest`` and ``1/slowest`` seconds. Spans shorter than the fastest interval (a
    drain forcing a flush right after another) are measured together with the next one; a gap
    longer than twice the slowest interval is a pause in the stream, not a measurement.
    """

    def __init__(self, share: float, fastest: float, slowest: float, cpu_clock: Callable[[], float] = time.process_time) -> None:
        self.share = share
        self.shortest = 1.0 / fastest
        self.longest = 1.0 / slowest
        self._cpu_clock = cpu_clock
        self._mark: tuple[float, float] | None = None

    def next_interval(self, interval: float, now: float) -> float:
        """The interval to wait after the flush starting at ``now`` (monotonic seconds)."""
        cpu = self._cpu_clock()
        mark = self._mark
        if mark is not None and now - mark[0] < self.shortest:
            return interval  # a flush forced right after another (a drain): measure a longer span
        self._mark = (now, cpu)
        if mark is None or now - mark[0] > 2 * self.longest:
            return interval
        used = (cpu - mark[1]) / (now - mark[0])
        wanted = interval * used / self.share
        # Halfway there each time: one expensive frame (a block of code highlighted, the answer's
        # first widgets mounted) must not throw the rate to the floor by itself.
        return min(max((interval + wanted) / 2, self.shortest), self.longest)


class DeltaCoalescer:
    def __init__(self, flush: Flush, fps: float = 30.0, budget: CpuBudget | None = None) -> None:
        self._flush = flush
        self.interval = 1.0 / fps
        self.budget = budget
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
            if self.budget is not None:
                self.interval = self.budget.next_interval(self.interval, self._last)
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
