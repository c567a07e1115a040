"""Server-side request forgery: ``*`` in ``[network] allow`` means the public internet.

A loopback-only server on the host holds a secret. The model (the loopback model server
speaking the Chat Completions wire format, driving the default distribution) asks ``web_fetch``
for it in every textual form of "this machine" with ``allow = ["*"]``: all are refused after
resolution, on every redirect, and the connection is pinned to the address that was checked.
Naming the exact host in ``allow`` is the one way through (how tests reach loopback servers).
The same rule covers http hooks (``post_json``), MCP over HTTP and plugin downloads; the last
test fails when Roder opens an HTTP client that does not connect through ``brokers.outbound``.
"""

from __future__ import annotations

import ast
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from roder_core.brokers import BrokerDenied
from roder_core.brokers.network import AllowlistNetworkBroker
from roder_core.brokers.outbound import OutboundRefused, OutboundRule, address_refusal
from roder_core.ir import ToolResultItem
from roder_core.plugins.fetch import FetchError, FetchSettings, download
from roder_core.runtime.bootstrap import StartSettings, start_runtime
from roder_core.testing.fake_server import FakeModelServer
from tests.brokers.helpers import serve

ROOT = Path(__file__).resolve().parents[2]
SECRET = "internal-admin-secret-7f3a"
#: Requests the loopback server answered (paths), to prove a refusal never connected.
HITS: list[str] = []


class Secret(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        HITS.append(self.path)
        if self.path.startswith("/hop"):
            self.send_response(302)
            self.send_header("Location", self.path.split("to=", 1)[1])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = f"{SECRET} host={self.headers.get('Host')}".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.do_GET()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def port() -> Iterator[int]:
    HITS.clear()
    with serve(Secret) as number:
        yield number


def forms(port: int) -> list[str]:
    """ "This machine" as a URL can spell it."""
    return [
        f"http://127.0.0.1:{port}/",
        f"http://2130706433:{port}/",
        f"http://0x7f000001:{port}/",
        f"http://0177.0.0.1:{port}/",
        f"http://127.1:{port}/",
        f"http://0.0.0.0:{port}/",
        f"http://localhost:{port}/",
        f"http://LOCALHOST.:{port}/",
        f"http://[::1]:{port}/",
        f"http://[::ffff:127.0.0.1]:{port}/",
        f"http://[::ffff:7f00:1]:{port}/",
        f"http://127.0.0.1.:{port}/",
        f"http://app.localhost:{port}/",
    ]


def refusal(url: str) -> str:
    """The one refusal ``url`` gets, whatever this machine's resolver does: an address and a
    ``localhost`` name are known without DNS; a number spells an address (getaddrinfo reads it
    without a query); the octal dotted form is no URL at all."""
    if "0177.0.0.1" in url:
        return "InvalidURL: Invalid IPv4 address"
    why = "the unspecified address (this machine)" if "0.0.0.0" in url else "a loopback address"
    return f"{why}; only public internet addresses are reached unless [network] allow names the host exactly"


async def fetch_all(workspace: Path, roder_home: Path, allow: list[str], urls: list[str]) -> list[ToolResultItem]:
    steps: list[dict[str, Any]] = [{"tool_calls": [{"name": "web_fetch", "arguments": {"url": url}}]} for url in urls]
    steps.append({"text": "done"})
    async with FakeModelServer(steps) as server:
        (roder_home / "config.toml").write_text(
            '[providers.local]\ndialect = "chat-completions"\n'
            f'base_url = "{server.base_url}"\napi_key_env = "LOCAL_API_KEY"\nmodels = ["fake-model"]\n'
            f"[network]\nallow = {allow!r}\n".replace("'", '"')
        )
        started = start_runtime(
            StartSettings(
                cwd=workspace,
                provider="local",
                mode="auto-edit",
                interactive=False,
                env={"RODER_HOME": str(roder_home), "LOCAL_API_KEY": "sk-local-1", "PATH": "/usr/bin:/bin"},
            )
        )
        runtime = started.runtime
        try:
            thread = await runtime.start_thread()
            await runtime.run_turn(thread.id, "fetch")
            return [i for i in runtime.thread(thread.id).items() if isinstance(i, ToolResultItem)]
        finally:
            await runtime.close()


async def test_every_spelling_of_this_machine_is_refused_under_a_wildcard(workspace: Path, roder_home: Path, port: int) -> None:
    urls = forms(port)
    results = await fetch_all(workspace, roder_home, ["*"], urls)
    assert len(results) == len(urls)
    for url, result in zip(urls, results, strict=True):
        assert SECRET not in result.text, (url, result.text)
        assert result.is_error, (url, result.text)
        assert refusal(url) in result.text, (url, result.text)
    assert HITS == []  # not one of them reached the server
    for url, result in zip(urls, results, strict=True):
        print(url, "->", result.text[:160])


async def test_naming_the_exact_host_lets_it_through_and_a_redirect_elsewhere_is_refused(
    workspace: Path, roder_home: Path, port: int
) -> None:
    urls = [
        f"http://127.0.0.1:{port}/plain",
        f"http://127.0.0.1:{port}/hop?to=http://localhost:{port}/",
        f"http://127.0.0.1:{port}/hop?to=http://[::ffff:127.0.0.1]:{port}/",
        f"http://2130706433:{port}/",
    ]
    results = await fetch_all(workspace, roder_home, ["*", "127.0.0.1"], urls)
    assert SECRET in results[0].text, results[0].text
    for result in results[1:]:
        assert SECRET not in result.text, result.text
        assert result.is_error, result.text


async def test_the_connection_is_pinned_to_the_checked_address(monkeypatch: pytest.MonkeyPatch, port: int) -> None:
    """``rebind.test`` exists only in Roder's resolver: each lookup answers differently (the
    first one 127.0.0.1, named; later ones a public address). The fetch reaches the server, so
    it connected to the address that was checked and never resolved the name again."""
    import anyio

    answers = ["127.0.0.1", "93.184.216.34", "93.184.216.34"]
    calls: list[str] = []

    async def lookup(host: str, port: int, **_kw: Any) -> list[tuple[Any, ...]]:
        calls.append(host)
        address = answers[min(len(calls) - 1, len(answers) - 1)]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(anyio, "getaddrinfo", lookup)
    broker = AllowlistNetworkBroker(["rebind.test"])
    page = await broker.fetch(f"http://rebind.test:{port}/")
    assert SECRET in page.text and f"host=rebind.test:{port}" in page.text, page.text
    assert calls == ["rebind.test"]
    # unnamed, under "*": one private answer among public ones refuses the host
    answers[:] = ["93.184.216.34", "10.0.0.7"]
    calls.clear()

    async def mixed(host: str, port: int, **_kw: Any) -> list[tuple[Any, ...]]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in answers]

    monkeypatch.setattr(anyio, "getaddrinfo", mixed)
    with pytest.raises(OutboundRefused, match="private network"):
        await AllowlistNetworkBroker(["*"]).fetch(f"http://public.test:{port}/")


async def test_http_hooks_mcp_and_plugin_downloads_follow_the_same_rule(port: int, tmp_path: Path) -> None:
    with pytest.raises(BrokerDenied, match="loopback"):
        await AllowlistNetworkBroker(["*"]).post_json(f"http://localhost:{port}/hook", {"x": 1})
    answer = await AllowlistNetworkBroker(["localhost"]).post_json(f"http://localhost:{port}/hook", {"x": 1})
    assert SECRET in answer.text

    from roder_ext_mcp.manager import _mcp_http_client

    async with _mcp_http_client(f"http://127.0.0.1:{port}/mcp", None) as client:
        assert SECRET in (await client.get(f"http://127.0.0.1:{port}/mcp")).text  # the server named
        with pytest.raises(OutboundRefused, match="loopback"):
            await client.get(f"http://localhost:{port}/")  # anything else on this machine
        with pytest.raises(OutboundRefused, match="metadata"):
            await client.get("http://169.254.169.254/latest/meta-data/")

    with pytest.raises(FetchError, match="loopback"):
        download(f"http://localhost:{port}/p.tgz", tmp_path / "p.tgz", FetchSettings(allow_loopback_http=False))
    download(f"http://localhost:{port}/p.tgz", tmp_path / "p.tgz", FetchSettings(allow_loopback_http=True))
    assert SECRET in (tmp_path / "p.tgz").read_text()


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "255.255.255.255",
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "ff02::1",
        "::ffff:10.0.0.1",
        "64:ff9b::7f00:1",
        "2002:7f00:1::",
        "fd00:ec2::254",
    ],
)
def test_addresses_off_the_public_internet_are_named_as_such(address: str) -> None:
    import ipaddress

    assert address_refusal(ipaddress.ip_address(address)) is not None
    rule = OutboundRule.from_allow(["*", "*.corp.example"])
    with pytest.raises(OutboundRefused):
        rule.check("h.corp.example", [(0, 0, 0, "", (address, 80))])


def test_public_addresses_pass() -> None:
    import ipaddress

    for address in ("93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946", "1.1.1.1"):
        assert address_refusal(ipaddress.ip_address(address)) is None


#: HTTP clients Roder opens for itself, not on a model's or a project's behalf: the provider
#: the user configured (its base URL is the user's own, often a local model server) and the
#: user's own sign-in. Every other client must connect through ``brokers.outbound``.
OWN_TRAFFIC = {"roder_core/providers/transport.py", "roder_core/auth/oauth.py"}
HTTP_MODULES = {"httpx", "httpx2", "requests", "urllib3", "aiohttp"}
HTTP_CALLS = {"AsyncClient", "Client", "stream", "get", "post", "put", "request", "ClientSession", "PoolManager"}


def _opens_a_connection(node: ast.Call) -> str | None:
    """What an HTTP client or raw connection this call opens, or None."""
    func = node.func
    keywords = {k.arg for k in node.keywords}
    if isinstance(func, ast.Name):
        name = func.id
        if name in ("urlopen", "create_connection", "create_mcp_http_client"):
            return name
        if name == "sse_client" and "httpx_client_factory" not in keywords:
            return name
        if name == "streamable_http_client" and "http_client" not in keywords:
            return name
        return None
    if not isinstance(func, ast.Attribute):
        return None
    owner = func.value
    from_http = (isinstance(owner, ast.Name) and owner.id in HTTP_MODULES) or (
        isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "load_httpx"
    )
    if from_http and func.attr in HTTP_CALLS and "transport" not in keywords:
        return f"{ast.unparse(owner)}.{func.attr}"
    if func.attr in ("urlopen", "create_connection") and isinstance(owner, ast.Name) and owner.id in ("request", "socket"):
        return f"{owner.id}.{func.attr}"
    return None


def test_every_outbound_client_connects_through_the_outbound_rule() -> None:
    offenders = []
    for source in [*ROOT.joinpath("roder_core").rglob("*.py"), *ROOT.joinpath("extensions").rglob("*.py")]:
        relative = source.relative_to(ROOT).as_posix()
        if relative in OWN_TRAFFIC or relative == "roder_core/brokers/outbound.py" or "/testing/" in relative:
            continue
        for node in ast.walk(ast.parse(source.read_text())):
            found = _opens_a_connection(node) if isinstance(node, ast.Call) else None
            if found is not None:
                offenders.append(f"{relative}:{node.lineno} {found}")
    assert offenders == [], offenders


def test_a_plugin_catalog_cannot_send_git_to_this_machine(tmp_path: Path) -> None:
    """git does its own networking: its host is checked before it runs, and it follows no
    redirect (checked, not pinned; the security docs say so)."""
    from roder_core.plugins.fetch import clone

    for url in ("http://127.0.0.1:9/repo.git", "https://2130706433/repo.git", "git@localhost:repo.git", "ssh://[::1]/r.git"):
        with pytest.raises(FetchError, match=r"is a loopback address; only public internet addresses are reached"):
            clone(url, tmp_path / "clone")
    assert not (tmp_path / "clone").exists()
