"""HTTP clients kept on an event loop across runtimes (a batch worker's rollouts).

Every runtime builds its provider engines, and each engine's transport built its own
``httpx.AsyncClient``: for a batch worker that runs rollout after rollout, a client, a connection
pool and a new connection to the model server per rollout. Inside ``shared_clients()`` (what
``batch.worker_loop`` wraps each rollout in) a transport takes the client kept on its event loop
for the same settings instead, and leaves it open when its runtime closes; the loop's owner
closes them (``close_shared_clients``).

A kept client carries nothing of one rollout into the next: credentials and headers are set per
request by the transport, never on the client, and its cookie jar is emptied when each rollout
ends. What it keeps is the open connections.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx


class _Sharing(threading.local):
    depth: int = 0


_sharing = _Sharing()
#: The kept clients of each loop, by the settings they were built with.
_kept: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Hashable, httpx.AsyncClient]] = weakref.WeakKeyDictionary()
_kept_lock = threading.Lock()


@contextmanager
def shared_clients(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """Transports in this thread take the clients kept on ``loop`` while inside; on the way
    out those clients forget their cookies."""
    _sharing.depth += 1
    try:
        yield
    finally:
        _sharing.depth -= 1
        with _kept_lock:
            clients = list(_kept.get(loop, {}).values())
        for client in clients:
            client.cookies.clear()


def sharing() -> bool:
    return _sharing.depth > 0


def kept_client(loop: asyncio.AbstractEventLoop, key: Hashable, build: Callable[[], httpx.AsyncClient]) -> httpx.AsyncClient:
    """The client kept on ``loop`` for ``key`` (built by ``build`` when there is none open)."""
    with _kept_lock:
        table = _kept.setdefault(loop, {})
        client = table.get(key)
        if client is None or client.is_closed:
            client = table[key] = build()
        return client


async def close_shared_clients(loop: asyncio.AbstractEventLoop) -> None:
    """Close the clients kept on ``loop`` (run on that loop, before it closes)."""
    with _kept_lock:
        clients = list(_kept.pop(loop, {}).values())
    for client in clients:
        await client.aclose()
