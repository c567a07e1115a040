"""One event loop per worker thread, kept from one rollout to the next.

A worker used to run each rollout in ``asyncio.run``: a new event loop, a new default executor
(its threads started again) and, since a connection belongs to its loop, a new HTTP client and
connection to the model server per rollout. Here the loop stays; what a rollout leaves on it
does not:

- each rollout runs in a fresh copy of the worker's own context (``contextvars``), so a context
  variable one rollout sets is unset in the next;
- when a rollout ends, every task still on the loop is cancelled and awaited, as ``asyncio.run``
  does at its end, so no background work of one rollout runs during the next;
- if a rollout is interrupted (the worker's SIGTERM, Ctrl-C of ``roder exec``), the loop is
  closed at once the way ``asyncio.run`` closes its own (remaining tasks cancelled, so the
  commands they started are killed) and the next rollout gets a new one.

The model clients kept with the loop (``providers.kept_clients``) carry no state of
their own between rollouts: no cookies, and the credentials are set per request.
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class _ThreadLoop(threading.local):
    runner: asyncio.Runner | None = None


_loops = _ThreadLoop()


def run_on_worker_loop(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run ``main()`` to completion on this thread's kept event loop, isolated as above."""
    from roder_core.providers.kept_clients import shared_clients

    runner = _loops.runner
    if runner is None:
        runner = _loops.runner = asyncio.Runner()
        if threading.current_thread() is threading.main_thread():
            atexit.register(close_worker_loop)  # its clients closed before the interpreter goes
    try:
        with shared_clients(runner.get_loop()):
            return runner.run(_alone(main), context=contextvars.copy_context())
    except BaseException:
        close_worker_loop()
        raise


async def _alone(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    try:
        return await main()
    finally:
        await _cancel_the_rest()


async def _cancel_the_rest() -> None:
    """Cancel and await every other task on the loop (what the rollout started and left)."""
    current = asyncio.current_task()
    left = [task for task in asyncio.all_tasks() if task is not current and not task.done()]
    for task in left:
        task.cancel()
    if left:
        await asyncio.gather(*left, return_exceptions=True)


def close_worker_loop() -> None:
    """Close this thread's loop (its clients first) as ``asyncio.run`` would; the next rollout
    starts a new one."""
    from roder_core.providers.kept_clients import close_shared_clients

    runner, _loops.runner = _loops.runner, None
    if runner is None:
        return
    try:
        loop = runner.get_loop()
        if not loop.is_closed() and not loop.is_running():
            loop.run_until_complete(close_shared_clients(loop))
    except RuntimeError:  # the runner never started a loop
        pass
    runner.close()
