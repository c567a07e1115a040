"""Where Roder's outbound connections are checked: the public internet unless a host is named.

Every request Roder makes on a model's or a project's behalf (``web_fetch``, http hooks, MCP
servers over HTTP, plugin archive downloads) connects through a transport built here. Its
network backend resolves the host itself, checks every address the name resolves to, and then
connects to the checked address, never to the name again: a DNS answer that changes between the
check and the connection (rebinding) cannot move it. Redirects open new connections, so every
hop is checked the same way; nothing else (proxies from the environment, unix sockets) is used.

The rule: an address that is not on the public internet (loopback, private, link-local,
carrier-grade NAT, multicast, unspecified, reserved, the cloud metadata services, and the same
behind an IPv4-mapped, 6to4, Teredo or NAT64 IPv6 address) is refused, whatever the URL spelled
(``2130706433``, ``0x7f.1``, ``[::ffff:127.0.0.1]``: they are only seen once resolved; an IP
address and ``localhost`` (``localhost.``, ``x.localhost``) are known without asking DNS). It is
allowed only for a host a rule names exactly (``named``): ``[network] allow = ["localhost"]``
lets ``http://localhost:8080`` through, ``"*"`` never does.
``tests/security/test_attack_ssrf.py`` fails when one of those callers connects another way.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from roder_core.brokers import BrokerDenied

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Cloud metadata services (AWS, GCP, Azure, Oracle, Alibaba; AWS's IPv6 one).
METADATA = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254", "192.0.0.192")
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class OutboundRefused(BrokerDenied):
    """A connection the outbound rule refused (raised from inside the HTTP client)."""


def normal_host(host: str) -> str:
    """A host as rules compare it: lower case, without brackets or one trailing dot."""
    return host.strip().strip("[]").lower().removesuffix(".")


def _embedded(ip: Address) -> list[Address]:
    """The IPv4 addresses an IPv6 one carries (mapped, 6to4, Teredo, NAT64, compatible)."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return []
    found: list[Address] = []
    if ip.ipv4_mapped is not None:
        found.append(ip.ipv4_mapped)
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found += list(ip.teredo)
    if ip in _NAT64:
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    if int(ip) >> 32 == 0 and int(ip) > 1:
        found.append(ipaddress.IPv4Address(int(ip)))  # ::a.b.c.d (IPv4-compatible)
    return found


def address_refusal(ip: Address) -> str | None:
    """Why ``ip`` is not a public internet address, or None when it is."""
    for candidate in (*_embedded(ip), ip):
        if candidate in METADATA:
            return "a cloud metadata address"
        if candidate.is_loopback:
            return "a loopback address"
        if candidate.is_unspecified:
            return "the unspecified address (this machine)"
        if candidate.is_link_local:
            return "a link-local address"
        if candidate.is_multicast:
            return "a multicast address"
        if candidate.is_private:
            return "a private network address"
        if not candidate.is_global:
            return "not a public internet address"
    return None


@dataclass(frozen=True)
class OutboundRule:
    """Which hosts may resolve to non-public addresses: those named exactly, nothing else."""

    named: frozenset[str] = frozenset()
    #: Where the hosts were named, for the refusal message (``[network] allow``).
    setting: str = "[network] allow"

    @classmethod
    def from_allow(cls, allow: Iterable[str], setting: str = "[network] allow") -> OutboundRule:
        """Exact host entries of an allow list name hosts; ``*`` and ``*.domain`` name none."""
        return cls(frozenset(normal_host(a) for a in allow if a.strip() and "*" not in a), setting)

    def check(self, host: str, infos: list[tuple[Any, ...]]) -> str:
        """The address to connect to for ``host`` given its resolved ``infos`` (getaddrinfo
        rows): refused when any of them is not public, unless ``host`` is named."""
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
        if not addresses:
            raise OutboundRefused(f"{host} did not resolve to any address")
        if normal_host(host) not in self.named:
            for ip in addresses:
                why = address_refusal(ip)
                if why is not None:
                    shown = host if normal_host(host) == str(ip) else f"{host} resolves to {ip}, which"
                    raise OutboundRefused(
                        f"{shown} is {why}; only public internet addresses are reached unless "
                        f'{self.setting} names the host exactly (add "{normal_host(host)}")'
                    )
        return str(addresses[0])

    def without_dns(self, host: str, port: int) -> list[tuple[Any, ...]] | None:
        """The address ``host`` stands for whatever a resolver says (a getaddrinfo row), for a
        host no rule names: an IP address, also spelled with a trailing dot (which resolvers
        disagree on), or this machine for ``localhost`` and its subdomains (RFC 6761). So
        refusing them never depends on DNS. None: the resolver is asked."""
        name = normal_host(host)
        if name in self.named:
            return None
        try:
            ip: Address = ipaddress.ip_address(name.split("%", 1)[0])
        except ValueError:
            if name != "localhost" and not name.endswith(".localhost"):
                return None
            ip = ipaddress.IPv4Address("127.0.0.1")
        family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
        return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (str(ip), port))]

    def resolve(self, host: str, port: int) -> list[tuple[Any, ...]]:
        """The getaddrinfo rows of ``host`` (``without_dns`` first), for ``check``."""
        fixed = self.without_dns(host, port)
        if fixed is not None:
            return fixed
        try:
            return list(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except (OSError, UnicodeError) as exc:
            raise _unresolved(host, exc) from exc


def _unresolved(host: str, exc: BaseException) -> OutboundRefused:
    return OutboundRefused(f"{host} could not be resolved ({exc})")


class _AsyncBackend:
    """An httpcore network backend that connects only to addresses the rule checked."""

    def __init__(self, rule: OutboundRule, inner: Any) -> None:
        self._rule = rule
        self._inner = inner

    async def connect_tcp(
        self, host: str, port: int, timeout: float | None = None, local_address: str | None = None, socket_options: Any = None
    ) -> Any:
        import anyio

        infos = self._rule.without_dns(host, port)
        if infos is None:
            try:
                infos = list(await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM))
            except (OSError, UnicodeError) as exc:
                raise _unresolved(host, exc) from exc
        address = self._rule.check(host, infos)
        return await self._inner.connect_tcp(
            address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )

    async def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
        raise OutboundRefused("unix sockets are not reached by outbound requests")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _SyncBackend:
    """``_AsyncBackend`` for blocking clients (plugin downloads run in a worker thread)."""

    def __init__(self, rule: OutboundRule, inner: Any) -> None:
        self._rule = rule
        self._inner = inner

    def connect_tcp(
        self, host: str, port: int, timeout: float | None = None, local_address: str | None = None, socket_options: Any = None
    ) -> Any:
        address = self._rule.check(host, self._rule.resolve(host, port))
        return self._inner.connect_tcp(address, port, timeout=timeout, local_address=local_address, socket_options=socket_options)

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
        raise OutboundRefused("unix sockets are not reached by outbound requests")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _modules(flavor: str) -> tuple[Any, Any]:
    if flavor == "httpx2":  # the MCP client library's HTTP stack
        import httpcore2
        import httpx2

        return httpx2, httpcore2
    from roder_core.brokers.httpx_loader import load_httpx

    httpx = load_httpx()
    import httpcore

    return httpx, httpcore


def async_transport(rule: OutboundRule, *, flavor: str = "httpx") -> Any:
    """An ``AsyncHTTPTransport`` (of httpx, or of ``httpx2`` for the MCP client) whose every
    connection goes through the rule. Proxies and unix sockets from the environment are off."""
    httpx, httpcore = _modules(flavor)
    transport = httpx.AsyncHTTPTransport(trust_env=False)
    # the pool httpx built, rebuilt with the checking backend (httpx has no public switch for it)
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=httpx.create_ssl_context(),
        max_connections=100,
        max_keepalive_connections=20,
        keepalive_expiry=5.0,
        network_backend=_AsyncBackend(rule, httpcore.AnyIOBackend()),
    )
    return transport


def sync_transport(rule: OutboundRule) -> Any:
    """``async_transport`` for httpx's blocking client."""
    httpx, httpcore = _modules("httpx")
    transport = httpx.HTTPTransport(trust_env=False)
    transport._pool = httpcore.ConnectionPool(
        ssl_context=httpx.create_ssl_context(),
        max_connections=100,
        max_keepalive_connections=20,
        keepalive_expiry=5.0,
        network_backend=_SyncBackend(rule, httpcore.SyncBackend()),
    )
    return transport
