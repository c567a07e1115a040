"""A model client's network reads, spaced so that a fast stream of small events is read a few
events at a time.

A model server writes each token as an event of its own, flushed at once. Read as they come,
100 events a second are 100 or more network reads a second, and each costs the HTTP stack far
more than the bytes it brings: httpcore's loop over h11, anyio's cancel scope around the read,
the socket's reading paused and resumed. That was about half of what a streamed answer cost the
runtime (bench/README.md, "Row 2, seventh round"). So a read that comes less than ``PACE``
seconds after the previous one first waits out the rest of ``PACE``, while more events gather in
the socket's buffer, and then takes them all in one read.

What this never does: hold the first read after a request was written (the answer's headers and
first token), hold a read after a pause in the stream (the model thinking, a tool call being
written: the pause already took longer than ``PACE``) or after a read that came back large (a
backlog), or cut and drop anything (the wait is between reads, never inside one; every byte
is read). An event waits at most ``PACE`` for the read that brings it, and an interrupt cancels
the wait at once, as it cancels a read.

The pacing sits in the network stream under httpcore's connection pool, so every read of a
model client goes through it whatever the dialect.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import ssl

    import httpcore
    import httpx


class ReadPacer:
    """When a stream's next read may start: at once, or after the rest of ``PACE``."""

    #: At most one read per this many seconds while a stream's bytes come faster. A repaint of
    #: the app is at least 33 ms apart (30 a second), so streamed text is never late by a frame.
    PACE = 0.025
    #: A read this large means bytes are waiting in the socket: read on at once.
    BACKLOG = 16 * 1024

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        #: When the last small read came back; None before the first read of a response.
        self._last: float | None = None

    def written(self) -> None:
        """A request went out: its answer's first read is never held."""
        self._last = None

    def wait(self) -> float:
        """Seconds to wait before the next read."""
        if self._last is None:
            return 0.0
        return max(self.PACE - (self._clock() - self._last), 0.0)

    def read_done(self, size: int) -> None:
        """A read brought ``size`` bytes (0: the peer closed)."""
        self._last = self._clock() if 0 < size < self.BACKLOG else None


def paced_transport(*, verify: ssl.SSLContext | bool, trust_env: bool) -> httpx.AsyncHTTPTransport:
    """httpx's transport for a model client, its connections' reads paced (``ReadPacer``).

    httpx builds its connection pool itself and takes no network backend, so the pool's own
    backend is wrapped in place; ``tests/providers/test_paced_reads.py`` fails if an upgrade of
    httpx or httpcore moves it. Such an upgrade costs the pacing, never the model call: a
    transport whose pool or backend is not where it was reads unpaced."""
    import httpcore

    from roder_core.brokers.httpx_loader import load_httpx

    transport: httpx.AsyncHTTPTransport = load_httpx().AsyncHTTPTransport(verify=verify, trust_env=trust_env)
    pool = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if isinstance(backend, httpcore.AsyncNetworkBackend):
        pool._network_backend = _paced_backend(backend)  # type: ignore[union-attr]
    return transport


def _paced_backend(inner: httpcore.AsyncNetworkBackend) -> httpcore.AsyncNetworkBackend:
    import asyncio

    import httpcore

    class PacedStream(httpcore.AsyncNetworkStream):
        def __init__(self, stream: httpcore.AsyncNetworkStream) -> None:
            self._stream = stream
            self._pacer = ReadPacer()

        async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            wait = self._pacer.wait()
            if wait > 0:
                await asyncio.sleep(wait)
            data = await self._stream.read(max_bytes, timeout)
            self._pacer.read_done(len(data))
            return data

        async def write(self, buffer: bytes, timeout: float | None = None) -> None:
            self._pacer.written()
            await self._stream.write(buffer, timeout)

        async def aclose(self) -> None:
            await self._stream.aclose()

        async def start_tls(
            self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
        ) -> httpcore.AsyncNetworkStream:
            return PacedStream(await self._stream.start_tls(ssl_context, server_hostname, timeout))

        def get_extra_info(self, info: str) -> Any:
            return self._stream.get_extra_info(info)

    class PacedBackend(httpcore.AsyncNetworkBackend):
        async def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Iterable[Any] | None = None,
        ) -> httpcore.AsyncNetworkStream:
            return PacedStream(await inner.connect_tcp(host, port, timeout, local_address, socket_options))

        async def connect_unix_socket(
            self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
        ) -> httpcore.AsyncNetworkStream:
            return PacedStream(await inner.connect_unix_socket(path, timeout, socket_options))

        async def sleep(self, seconds: float) -> None:
            await inner.sleep(seconds)

    return PacedBackend()
