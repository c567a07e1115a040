"""Background work that waits for a pause in the typing, so that no keystroke waits for it.

Start-up leaves heavy work for after "idle" (importing the answer renderers: about 0.2 s of CPU
on a thread that takes turns with the event loop for the interpreter lock). Started at "idle", it
kept the first keystrokes typed at once waiting 0.35-0.7 s (bench/README.md, "Modal screens").
``InputPause`` tracks the keyboard; ``wait`` returns once it has been still for ``pause`` seconds,
or at once when the work is needed now (a prompt was sent: its answer will need the renderers).
"""

from __future__ import annotations

import asyncio
import contextlib
import time


class InputPause:
    def __init__(self, pause: float) -> None:
        self.pause = pause
        self.last_input = time.monotonic()
        self._needed = asyncio.Event()

    def typed(self) -> None:
        """A key was pressed: the pause starts again."""
        self.last_input = time.monotonic()

    def needed(self) -> None:
        """The work is needed now: ``wait`` returns without waiting for a pause."""
        self._needed.set()

    async def wait(self) -> None:
        """Until the keyboard has been still for ``pause`` seconds, or the work is needed."""
        while not self._needed.is_set() and (left := self.last_input + self.pause - time.monotonic()) > 0:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await self._needed.wait()
