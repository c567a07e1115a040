"""Requests that wait for a person's answer: one table for approvals and for questions.

An approval (``approval/requested`` -> ``session/resolve_approval``) and a question
(``userInput/requested`` -> ``session/resolve_user_input``) have the same life: the runtime opens
the request, announces it to every client, and waits, within a timeout, for the one answer a
client brings; an answer for a request nobody waits for any more is refused. This table holds
that life once, generic in what is asked and what is answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

RequestT = TypeVar("RequestT")
AnswerT = TypeVar("AnswerT")


@dataclass(frozen=True)
class _Pending(Generic[RequestT, AnswerT]):
    request: RequestT
    thread_id: str
    answer: asyncio.Future[AnswerT]


class PendingRequests(Generic[RequestT, AnswerT]):
    """Open requests by id, each with the future its asker awaits."""

    def __init__(self) -> None:
        self._open: dict[str, _Pending[RequestT, AnswerT]] = {}

    def open(self, request_id: str, thread_id: str, request: RequestT) -> asyncio.Future[AnswerT]:
        """Register a request; the returned future completes with the answer."""
        answer: asyncio.Future[AnswerT] = asyncio.get_running_loop().create_future()
        self._open[request_id] = _Pending(request, thread_id, answer)
        return answer

    def forget(self, request_id: str) -> None:
        self._open.pop(request_id, None)

    def pending(self, thread_id: str | None = None) -> list[RequestT]:
        """The requests still waiting (of one thread, or all), oldest first. One already
        answered is not waiting, even before its asker has woken up to take the answer: a
        second answer racing the first is refused like any late one, not half-accepted."""
        return [p.request for p in self._open.values() if not p.answer.done() and (thread_id is None or p.thread_id == thread_id)]

    def resolve(self, request_id: str, answer: AnswerT) -> bool:
        """Answer a request; False when it is unknown or already answered (the first answer wins)."""
        entry = self._open.get(request_id)
        if entry is None or entry.answer.done():
            return False
        entry.answer.set_result(answer)
        return True

    async def ask(
        self, request_id: str, thread_id: str, request: RequestT, announce: Callable[[], Awaitable[None]], timeout: float
    ) -> AnswerT:
        """Open the request, ``announce`` it to the clients, and wait for its answer.

        Raises ``TimeoutError`` when nobody answers within ``timeout`` seconds; the request is
        closed whatever happens (answered, timed out, or the waiting turn cancelled)."""
        answer = self.open(request_id, thread_id, request)
        try:
            await announce()
            async with asyncio.timeout(timeout):  # not wait_for: see turn/hooks.py
                return await answer
        finally:
            self.forget(request_id)
