"""HTTP for one provider: a lazily built ``httpx.AsyncClient``, streaming POSTs, JSON GETs.

httpx is imported on first use (without its CLI, see ``brokers.httpx_loader``), so ``roder -p``
with the mock model never pays for it; a plain ``http://`` endpoint gets no TLS set-up. The API
key lives in a ``Secret`` that never shows its value in a repr, a log line or a traceback; it is
turned into a header only when a request is built.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from roder_core import bounded_json
from roder_core.brokers.httpx_loader import load_httpx
from roder_core.errors import InferenceError
from roder_core.providers import kept_clients
from roder_core.providers.catalog import ProviderSpec
from roder_core.providers.failures import ErrorFactory, error_detail
from roder_core.providers.paced_reads import paced_transport
from roder_core.providers.retry import parse_retry_after
from roder_core.providers.sse import SSEDecoder, SSEEvent

if TYPE_CHECKING:
    import httpx

MAX_ERROR_BODY = 64 * 1024
CONNECT_TIMEOUT = 10.0
#: How long, and for how many events, ``finish`` reads past an answer's end for its body's end.
#: The turn waits for it, so it is short: a body's end follows its last event at once (the same
#: write, or the next packet); a proxy that holds the body open costs a new connection, not a second.
FINISH_SECONDS = 0.25
FINISH_EVENTS = 16


class Secret:
    """A credential that refuses to print itself."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __repr__(self) -> str:
        return "Secret('********')" if self._value else "Secret('')"

    __str__ = __repr__


def user_agent() -> str:
    from roder_core import __version__

    return f"roder/{__version__}"


def needs_tls(base_url: str, trust_env: bool) -> bool:
    """Whether a client for ``base_url`` must carry a verifying TLS context.

    httpx builds its SSL context when the client is created, loading the whole CA bundle (about
    0.1 s here) even for a plain ``http://`` loopback server that will never speak TLS. Redirects
    are never followed, so an ``http://`` endpoint stays plain unless an environment proxy could
    tunnel it; only then is certificate verification kept. ``verify=False`` gives httpx a bare
    context without loading certificates, which no request of this client ever uses.
    """
    if not base_url.lower().startswith("http://"):
        return True
    from urllib.request import getproxies  # httpx imports it too; loaded only with httpx

    return trust_env and bool(getproxies())


def response_limit(what: str, setting: str) -> InferenceError:
    """The error of a model response cut off at a ceiling of ``[limits]`` (never retried: the
    same request would stream the same way)."""
    return InferenceError(
        f"the model's response {what} and was cut off (raise [limits] {setting} in config.toml to allow more)",
        "response_limit",
    )


class HttpTransport:
    """Sends one provider's requests; raises classified ``InferenceError`` values."""

    def __init__(
        self,
        spec: ProviderSpec,
        auth_headers: Callable[[], Mapping[str, str]],
        errors: ErrorFactory,
    ) -> None:
        self.spec = spec
        self._auth_headers = auth_headers
        self.errors = errors
        self._client: httpx.AsyncClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        #: The client is one ``kept_clients`` keeps on its loop: not this transport's to close.
        self._kept = False

    def _headers(self, accept: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return {
            "content-type": "application/json",
            "accept": accept,
            "user-agent": user_agent(),
            **self.spec.headers,
            **(extra or {}),
            **self._auth_headers(),
        }

    def client(self) -> httpx.AsyncClient:
        """The client for the running event loop (a client cannot outlive or change its loop)."""
        httpx = load_httpx()

        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop or self._client.is_closed:
            trust_env = not self.spec.is_loopback
            verify = needs_tls(self.spec.base_url, trust_env)

            build = functools.partial(
                httpx.AsyncClient,
                transport=paced_transport(verify=verify, trust_env=trust_env),
                timeout=httpx.Timeout(self.spec.timeout, connect=CONNECT_TIMEOUT),
                # Loopback model servers are never reached through a proxy from the environment.
                trust_env=trust_env,
                follow_redirects=False,
                verify=verify,
            )

            self._kept = kept_clients.sharing()
            key = (self.spec.timeout, trust_env, verify)
            self._client = kept_clients.kept_client(loop, key, build) if self._kept else build()
            self._loop = loop
        return self._client

    def url(self, path: str) -> str:
        return self.spec.base_url + path

    @asynccontextmanager
    async def stream(self, path: str, payload: bytes, headers: Mapping[str, str] | None = None) -> AsyncIterator[httpx.Response]:
        """POST ``payload`` (with this request's own ``headers``) and yield the open streaming
        response; closed on exit, always."""
        httpx = load_httpx()

        client = self.client()
        request = client.build_request(
            "POST", self.url(path), content=payload, headers=self._headers("text/event-stream", headers)
        )
        try:
            response = await client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise self.errors.from_transport(exc, streaming=False, base_url=self.spec.base_url) from None
        try:
            if response.status_code >= 400:
                raise self.errors.from_status(
                    response.status_code,
                    await self._error_body(response),
                    parse_retry_after(response.headers),
                    base_url=self.spec.base_url,
                )
            content_type = response.headers.get("content-type", "")
            if "html" in content_type:
                # A web page (a login wall, a proxy, a base_url without /v1): never the raw HTML.
                raise self.errors.make(
                    "bad_request",
                    f"expected an event stream, got {content_type.split(';')[0].strip()}",
                    "the server answered with a web page, not the API; check base_url (OpenAI-compatible APIs "
                    "usually end in /v1)",
                    status=response.status_code,
                )
            if "json" in content_type:
                message, _ = error_detail(await self._error_body(response))
                raise self.errors.make(
                    "bad_request",
                    f"expected an event stream, got {content_type.split(';')[0].strip()}",
                    message,
                    status=response.status_code,
                )
            yield response
        finally:
            await response.aclose()

    async def _error_body(self, response: httpx.Response) -> str:
        httpx = load_httpx()

        data = bytearray()
        try:
            async for chunk in response.aiter_bytes():
                data += chunk
                if len(data) >= MAX_ERROR_BODY:
                    break
        except httpx.HTTPError:
            pass  # the status alone still says what happened
        return bytes(data[:MAX_ERROR_BODY]).decode("utf-8", errors="replace")

    async def event_batches(
        self, response: httpx.Response, max_bytes: int = 0, max_seconds: float = 0.0
    ) -> AsyncIterator[list[SSEEvent]]:
        """The response body as SSE events, a list for each network read (never empty); a broken
        connection becomes ``stream_dropped``.

        The one place a model server's bytes arrive: a body past ``max_bytes`` or still coming
        after ``max_seconds`` (0: no ceiling) is cut off with a ``response_limit`` error. Reads
        are paced (``ReadPacer``), so a fast stream of small events arrives a few events a read.
        """
        httpx = load_httpx()

        decoder = SSEDecoder()
        started, received = time.monotonic(), 0
        try:
            async for chunk in response.aiter_bytes():
                received += len(chunk)
                if max_bytes and received > max_bytes:
                    raise response_limit(f"exceeded {max_bytes / (1024 * 1024):.4g} MB", "response_mb")
                if max_seconds and time.monotonic() - started > max_seconds:
                    raise response_limit(f"was still streaming after {max_seconds:g} s", "response_seconds")
                batch = decoder.feed(chunk)
                if batch:
                    yield batch
        except httpx.HTTPError as exc:
            raise self.errors.from_transport(exc, streaming=True, base_url=self.spec.base_url) from None

    async def finish(self, batches: AsyncIterator[list[SSEEvent]]) -> None:
        """Read what follows an answer's last event (normally just the end of the chunked body),
        so the connection goes back to the pool for the next call instead of being closed and
        opened again. A server that goes on sending is cut off as before (the connection closes)."""
        extra = 0
        try:
            async with asyncio.timeout(FINISH_SECONDS):
                async for batch in batches:
                    extra += len(batch)
                    if extra > FINISH_EVENTS:
                        return
        except (TimeoutError, InferenceError):
            pass

    async def get_json(self, path: str, timeout: float = 15.0) -> Any:
        """GET a JSON document (model listings)."""
        httpx = load_httpx()

        client = self.client()
        try:
            response = await client.get(self.url(path), headers=self._headers("application/json"), timeout=timeout)
        except httpx.HTTPError as exc:
            raise self.errors.from_transport(exc, streaming=False, base_url=self.spec.base_url) from None
        if response.status_code >= 400:
            raise self.errors.from_status(response.status_code, response.text[:MAX_ERROR_BODY], base_url=self.spec.base_url)
        try:
            return bounded_json.loads(response.text)
        except json.JSONDecodeError as exc:
            raise self.errors.make("bad_request", f"GET {path} did not return JSON", str(exc)) from None

    async def aclose(self) -> None:
        """Close the client, unless it is kept on its loop for the next runtime (``kept_clients``)."""
        if self._client is not None and not self._client.is_closed and not self._kept:
            try:
                await self._client.aclose()
            except RuntimeError:
                pass  # its event loop is already gone; the sockets went with it
        self._client = None
