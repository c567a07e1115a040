"""One-shot mode's runtime built in this process: a ``roder_tui.ask_turn.Session`` over the in-process
app server (``LocalAppClient``), for when no compatible host runs.

Kept apart from ``roder_tui.ask`` and ``roder_tui.ask_turn`` because it is the only part of a one-shot run that imports the
runtime (pydantic, extensions, providers): a run handed to a host never loads this module.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TextIO

from roder_core.runtime.bootstrap import settings_from_args
from roder_core.server.client import LocalAppClient
from roder_core.server.fanout import NotificationQueue
from roder_tui.ask_turn import ASK_QUEUE_SIZE, Wire, drive


class LocalSession:
    """The in-process app server, answering in wire form (what a host would send)."""

    shared = False

    def __init__(self, client: LocalAppClient) -> None:
        self.client = client
        self._queue: NotificationQueue | None = None
        self._wanted: Callable[[str], bool] = lambda _method: False

    async def request(self, method: str, params: Wire | None = None) -> Any:
        return (await self.client.request(method, params)).wire()

    def subscribe(self, wanted: Callable[[str], bool]) -> None:
        self._wanted = wanted
        self._queue = self.client.subscribe(maxsize=ASK_QUEUE_SIZE)

    async def events(self) -> AsyncIterator[tuple[str, Wire]]:
        assert self._queue is not None, "subscribe first"
        async for event in self._queue:
            if self._wanted(event.method):  # the others are never serialized
                yield event.method, event.params()

    @contextlib.contextmanager
    def interrupting(self, thread_id: str) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        interrupt = {"threadId": thread_id}
        loop.add_signal_handler(signal.SIGINT, lambda: asyncio.ensure_future(self.request("turn/interrupt", interrupt)))
        try:
            yield
        finally:
            loop.remove_signal_handler(signal.SIGINT)


async def ask_locally(args: argparse.Namespace, prompt: str, attachments: list[Wire], out: TextIO, err: TextIO) -> int:
    """``roder_tui.ask_turn.drive`` on a runtime for this command line, built headless (nobody can
    approve a call)."""
    client = LocalAppClient.start(settings_from_args(args, interactive=False), persist_config=False)
    async with client:
        return await drive(LocalSession(client), args, prompt, attachments, out, err)
