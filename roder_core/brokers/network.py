"""The network broker: outbound HTTP(S) for tools, limited to a domain allowlist.

The allowlist comes from ``[network] allow`` in config.toml. An empty list means no network.
Entries are exact host names (``docs.python.org``), ``*.python.org`` for any subdomain, or ``*``
for any host on the public internet. Every connection is made by ``outbound`` (the one place
Roder's outbound addresses are checked): loopback, private, link-local and metadata addresses are
refused after resolution unless an entry names that exact host, and the connection is pinned to
the checked address. Every redirect hop is checked against the list again, proxies and
``.netrc`` from the environment are ignored (they could add credentials), and bodies are
size-capped.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from fnmatch import fnmatchcase
from typing import Any
from urllib.parse import urljoin, urlsplit

from roder_core.brokers import BrokerDenied, FetchResult
from roder_core.brokers.httpx_loader import load_httpx
from roder_core.brokers.outbound import OutboundRefused, OutboundRule, async_transport

AuditFn = Callable[[str, dict[str, Any]], None]
MAX_REDIRECTS = 5
USER_AGENT = "roder/0.1 (web_fetch; +https://github.com/roder)"


def host_of(url: str) -> str:
    return (urlsplit(url).hostname or "").lower().rstrip(".")


def host_allowed(host: str, allow: Iterable[str]) -> bool:
    for pattern in allow:
        pattern = pattern.strip().lower()
        if not pattern:
            continue
        if pattern == "*" or pattern == host:
            return True
        if pattern.startswith("*.") and fnmatchcase(host, pattern):
            return True
    return False


class AllowlistNetworkBroker:
    """``NetworkBroker`` for one extension's grants and the configured allowlist."""

    def __init__(
        self,
        allow: Iterable[str],
        *,
        capabilities: frozenset[str] = frozenset({"network.web"}),
        audit: AuditFn | None = None,
        extension_id: str = "",
    ) -> None:
        self.allow = [a for a in allow if a.strip()]
        self.outbound = OutboundRule.from_allow(self.allow)
        self._granted = any(c == "network.web" or c.startswith("network.web.") for c in capabilities)
        self._audit = audit
        self._extension_id = extension_id

    def _record(self, kind: str, **fields: Any) -> None:
        if self._audit is not None:
            self._audit(kind, {"extension": self._extension_id, **fields})

    def refusal(self, url: str) -> str | None:
        """Why ``url`` may not be fetched, or None when it may."""
        if not self._granted:
            return "this extension was not granted the network.web capability"
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            return f"only http and https URLs can be fetched (got {parts.scheme or 'no scheme'!r})"
        host = host_of(url)
        if not host:
            return f"{url!r} has no host"
        if not self.allow:
            return (
                "network access is off: the [network] allow list in config.toml is empty "
                f'(add "{host}" to it, or "*" for any host)'
            )
        if not host_allowed(host, self.allow):
            return f'{host} is not in the [network] allow list of config.toml (add "{host}" to allow it)'
        return None

    def allowed(self, url: str) -> bool:
        return self.refusal(url) is None

    async def fetch(self, url: str, *, max_bytes: int = 5_000_000, timeout: float = 30.0) -> FetchResult:
        httpx = load_httpx()

        current = url
        async with httpx.AsyncClient(
            follow_redirects=False,
            timeout=timeout,
            trust_env=False,
            headers={"User-Agent": USER_AGENT},
            transport=async_transport(self.outbound),
        ) as client:
            for _hop in range(MAX_REDIRECTS + 1):
                reason = self.refusal(current)
                if reason is not None:
                    self._record("network.denied", url=current, reason=reason)
                    raise BrokerDenied(f"{current}: {reason}")
                async with self._refusals(current), client.stream("GET", current) as response:
                    if response.is_redirect and "location" in response.headers:
                        current = urljoin(current, response.headers["location"])
                        continue
                    body = bytearray()
                    truncated = False
                    async for chunk in response.aiter_bytes():
                        body += chunk
                        if len(body) > max_bytes:
                            del body[max_bytes:]
                            truncated = True
                            break
                    self._record("network.fetch", url=current, status=response.status_code, bytes=len(body))
                    content_type = response.headers.get("content-type", "")
                    return FetchResult(
                        url=current,
                        status=response.status_code,
                        content_type=content_type,
                        text=_decode(bytes(body), response.charset_encoding),
                        truncated=truncated,
                    )
        raise BrokerDenied(f"{url}: more than {MAX_REDIRECTS} redirects")

    @contextlib.asynccontextmanager
    async def _refusals(self, url: str) -> AsyncIterator[None]:
        """An address the outbound rule refused: audited, and named with the URL."""
        try:
            yield
        except OutboundRefused as exc:
            self._record("network.denied", url=url, reason=str(exc))
            raise OutboundRefused(f"{url}: {exc}") from None

    async def post_json(
        self, url: str, body: Any, *, headers: dict[str, str] | None = None, max_bytes: int = 1_000_000, timeout: float = 30.0
    ) -> FetchResult:
        """POST ``body`` as JSON to an allowed ``url`` (an http hook). Redirects are not
        followed: the answer must come from the host the allow list let through."""
        import json

        httpx = load_httpx()
        reason = self.refusal(url)
        if reason is not None:
            self._record("network.denied", url=url, reason=reason)
            raise BrokerDenied(f"{url}: {reason}")
        sent = {"User-Agent": USER_AGENT, "Content-Type": "application/json", **(headers or {})}
        data = json.dumps(body, ensure_ascii=False, default=str).encode()
        async with (
            self._refusals(url),
            httpx.AsyncClient(
                follow_redirects=False, timeout=timeout, trust_env=False, transport=async_transport(self.outbound)
            ) as client,
            client.stream("POST", url, content=data, headers=sent) as response,
        ):
            received = bytearray()
            truncated = False
            async for chunk in response.aiter_bytes():
                received += chunk
                if len(received) > max_bytes:
                    del received[max_bytes:]
                    truncated = True
                    break
            self._record("network.post", url=url, status=response.status_code, bytes=len(received))
            return FetchResult(
                url=url,
                status=response.status_code,
                content_type=response.headers.get("content-type", ""),
                text=_decode(bytes(received), response.charset_encoding),
                truncated=truncated,
            )


def _decode(body: bytes, charset: str | None) -> str:
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except LookupError:
        return body.decode("utf-8", errors="replace")
