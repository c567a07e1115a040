"""``InputPause``: start-up's remaining background work (the answer renderers' import) waits for a
pause in the typing, or starts at once when a prompt is sent."""

from __future__ import annotations

import asyncio

from roder_tui.input_pause import InputPause


async def test_waits_while_the_keyboard_is_busy_and_returns_when_needed() -> None:
    pause = InputPause(3600.0)  # a pause that never comes within the test
    waiting = asyncio.create_task(pause.wait())
    for _ in range(20):
        await asyncio.sleep(0)
        pause.typed()
    assert not waiting.done()
    pause.needed()  # a prompt was sent
    async with asyncio.timeout(10):
        await waiting


async def test_returns_once_the_keyboard_has_paused() -> None:
    pause = InputPause(0.0)
    pause.typed()
    async with asyncio.timeout(10):
        await pause.wait()


async def test_a_key_restarts_the_pause() -> None:
    pause = InputPause(3600.0)
    pause.last_input -= 3600.0  # the keyboard has been still for the whole pause
    async with asyncio.timeout(10):
        await pause.wait()
    pause.typed()
    waiting = asyncio.create_task(pause.wait())
    await asyncio.sleep(0)
    assert not waiting.done()
    waiting.cancel()
