"""Helpers for control-plane tests: a trusted workspace with test tools, a mock script, servers.

The tools live in a project extension (``.roder/extensions/testtools.py``), loaded by a real
``roder`` subprocess started with ``--trust``; they reach the machine only through brokers.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

TOOLS_EXTENSION = """
from roder_core import (EXTENSION_API_VERSION, CapabilityRequest, ExtensionManifest, ProvidedService,
                        RoderExtension, Tool, ToolResult)
from roder_core.ir import FileChange, FileChangeItem


class WriteNote(Tool):
    name = "write_note"
    description = "Write text to a file in the workspace."
    parameters = {"type": "object", "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
                  "required": ["path", "text"]}
    kind = "edit"

    def mutated_paths(self, arguments, workspace):
        return [arguments["path"]]

    async def preview(self, ctx, call):
        return {"diff": "--- /dev/null\\n+++ " + call.arguments["path"] + "\\n@@\\n+" + call.arguments["text"]}

    async def execute(self, ctx, call):
        path = ctx.brokers.fs.write_bytes(call.arguments["path"], call.arguments["text"].encode())
        view = FileChangeItem(call_id=call.id, changes=[FileChange(path=str(path), kind="add",
                              diff="+" + call.arguments["text"])])
        return ToolResult(id=call.id, name=call.name, text=f"wrote {path}", views=[view])


class Shell(Tool):
    name = "shell"
    description = "Run a shell command."
    parameters = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
    kind = "execute"

    async def execute(self, ctx, call):
        result = await ctx.brokers.process.run(call.arguments["command"], timeout=30, on_output=ctx.emit_output)
        return ToolResult(id=call.id, name=call.name, text=f"exit {result.exit_code}\\n{result.output}")


class Peek(Tool):
    name = "peek"
    description = "A read-only tool."
    parameters = {"type": "object", "properties": {"x": {"type": "string"}}}
    kind = "read"
    read_only = True

    async def execute(self, ctx, call):
        return ToolResult(id=call.id, name=call.name, text="peeked " + str(call.arguments.get("x", "")))


class Ask(Tool):
    name = "ask"
    description = "Ask the user a question."
    parameters = {"type": "object", "properties": {"question": {"type": "string"}}}
    kind = "think"
    read_only = True

    async def execute(self, ctx, call):
        question = {"id": "choice", "question": call.arguments.get("question", "?")}
        answers = await ctx.host.request_user_input([question])
        return ToolResult(id=call.id, name=call.name, text="answers: " + repr(answers))


class Tools:
    def id(self):
        return "test-tools"

    def contribute(self, registry):
        for tool in (WriteNote(), Shell(), Peek(), Ask()):
            registry.register(tool)


class EchoExecutor:
    def id(self):
        return "echo"

    async def run(self, params, ctx):
        import asyncio
        await asyncio.sleep(float(params.get("sleep", 0)))
        if params.get("fail"):
            raise ValueError("asked to fail")
        return {"echo": params}


class TestTools(RoderExtension):
    def manifest(self):
        return ExtensionManifest(
            id="test-tools", name="Test tools", version="0.1.0", api_version=EXTENSION_API_VERSION,
            description="tools for control-plane tests",
            provides=[ProvidedService.ToolProvider("test-tools"), ProvidedService.TaskExecutor("echo")],
            required_capabilities=[CapabilityRequest("fs.write.workspace"),
                                   CapabilityRequest("process.spawn.shell")],
        )

    def install(self, registry):
        registry.tool_contributor(Tools())
        registry.task_executor(EchoExecutor())


def create(host):
    return TestTools()
"""


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def trusted_workspace(root: Path, steps: list[dict[str, Any]] | None = None) -> tuple[Path, dict[str, str]]:
    """A workspace with the test tools and (optionally) a mock script; returns it and the env."""
    workspace = root / "ws"
    (workspace / ".roder" / "extensions").mkdir(parents=True, exist_ok=True)
    (workspace / ".roder" / "extensions" / "testtools.py").write_text(TOOLS_EXTENSION)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if steps is not None:
        script = root / "script.json"
        script.write_text(json.dumps({"steps": steps}))
        env["RODER_MOCK_SCRIPT"] = str(script)
    return workspace, env


def roder_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "roder_tui.cli", *args]


def start_app_server(workspace: Path, env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        roder_command("app-server", "--provider", "mock", "--trust", *args),
        cwd=workspace,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


class RpcPeer:
    """A JSON-RPC client over any line transport: matches responses, queues notifications."""

    def __init__(self) -> None:
        self.next_id = 1
        self.pending: dict[Any, Any] = {}
        self.notifications: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.seen: list[dict[str, Any]] = []
        self.unmatched: list[dict[str, Any]] = []
        #: Replies to JSON-RPC batches (arrays), in arrival order.
        self.batches: asyncio.Queue[list[dict[str, Any]]] = asyncio.Queue()

    def dispatch(self, message: Any) -> None:
        if isinstance(message, list):
            self.batches.put_nowait(message)
        elif "method" in message and "id" not in message:
            self.seen.append(message)
            self.notifications.put_nowait(message)
        elif message.get("id") in self.pending:
            self.pending.pop(message["id"]).set_result(message)
        else:
            self.unmatched.append(message)

    async def send_line(self, line: str | bytes) -> None:
        raise NotImplementedError

    async def request(self, method: str, params: Any = None, timeout: float = 30) -> dict[str, Any]:
        """The whole response object (``result`` or ``error``)."""
        request_id = self.next_id
        self.next_id += 1
        future = asyncio.get_running_loop().create_future()
        self.pending[request_id] = future
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send_line(json.dumps(message))
        async with asyncio.timeout(timeout):
            return await future

    async def call(self, method: str, params: Any = None, timeout: float = 30) -> Any:
        response = await self.request(method, params, timeout)
        assert "result" in response, response
        return response["result"]

    async def next_notification(self, method: str, timeout: float = 30, **match: Any) -> dict[str, Any]:
        """Params of the next notification with this method (and matching params)."""

        async def find() -> dict[str, Any]:
            while True:
                message = await self.notifications.get()
                params = message.get("params", {})
                if message["method"] == method and all(params.get(k) == v for k, v in match.items()):
                    return params

        async with asyncio.timeout(timeout):
            return await find()


class PipePeer(RpcPeer):
    """``roder app-server`` as a child process over real pipes."""

    def __init__(self, proc: Any) -> None:
        super().__init__()
        self.proc = proc
        self.reader = asyncio.ensure_future(self._read())

    @classmethod
    async def start(cls, workspace: Path, env: dict[str, str], *args: str) -> PipePeer:
        proc = await asyncio.create_subprocess_exec(
            *roder_command("app-server", "--provider", "mock", "--trust", *args),
            cwd=workspace,
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=64 * 1024 * 1024,
        )
        return cls(proc)

    async def _read(self) -> None:
        while line := await self.proc.stdout.readline():
            self.dispatch(json.loads(line))

    async def send_line(self, line: str | bytes) -> None:
        data = line if isinstance(line, bytes) else line.encode()
        self.proc.stdin.write(data + b"\n")
        await self.proc.stdin.drain()

    async def close(self) -> tuple[int, str]:
        if not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        try:
            async with asyncio.timeout(30):
                code = await self.proc.wait()
        except TimeoutError:
            self.proc.kill()
            code = await self.proc.wait()
        await self.reader
        stderr = (await self.proc.stderr.read()).decode(errors="replace")
        return code, stderr


class RemoteServer:
    """``roder app-server --remote`` as a child process; ``url`` once it listens."""

    def __init__(self, proc: Any, url: str, banner: str) -> None:
        self.proc, self.url, self.banner = proc, url, banner

    @classmethod
    async def start(cls, workspace: Path, env: dict[str, str], *args: str, listen: str = "ws://127.0.0.1:0") -> RemoteServer:
        proc = await asyncio.create_subprocess_exec(
            *roder_command("app-server", "--provider", "mock", "--trust", "--remote", "--listen", listen, *args),
            cwd=workspace,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        server = cls(proc, "", "")
        # The pairing link is the banner's last line that is always printed; the URL comes first.
        await server.read_banner_until(lambda banner: "  pair: " in banner)
        server.url = server.banner.split("listening on ", 1)[1].split("\n", 1)[0].strip()
        return server

    async def read_banner_until(self, done: Callable[[str], bool], timeout: float = 60) -> str:
        """Read the server's stderr line by line until ``done(banner)``: no fixed wait, however
        slowly the server writes (the QR code comes after a lazy import)."""
        while not done(self.banner):
            async with asyncio.timeout(timeout):
                line = (await self.proc.stderr.readline()).decode()
            if not line:
                raise AssertionError(f"server exited: {self.banner}")
            self.banner += line
        return self.banner

    async def stop(self) -> int:
        if self.proc.returncode is None:
            self.proc.terminate()
        async with asyncio.timeout(30):
            return await self.proc.wait()


class WsPeer(RpcPeer):
    """A WebSocket client of the remote app server."""

    def __init__(self, socket: Any) -> None:
        super().__init__()
        self.socket = socket
        self.closed: Any = None
        self.reader = asyncio.ensure_future(self._read())

    @classmethod
    async def connect(cls, url: str, token: str | None = None, *, header: bool = True, **kwargs: Any) -> WsPeer:
        from websockets.asyncio.client import connect

        subprotocols = ["roder.remote.v1"]
        headers = {}
        if token is not None and header:
            headers["Authorization"] = f"Bearer {token}"
        elif token is not None:
            subprotocols.append(f"bearer.{token}")
        socket = await connect(
            url,
            subprotocols=subprotocols,
            additional_headers=headers,  # type: ignore[arg-type]
            max_size=64 * 1024 * 1024,
            **kwargs,
        )
        return cls(socket)

    async def _read(self) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            async for message in self.socket:
                self.dispatch(json.loads(message))
        except ConnectionClosed as exc:
            self.closed = exc
        else:
            self.closed = self.socket.close_code

    async def send_line(self, line: str | bytes) -> None:
        await self.socket.send(line.decode() if isinstance(line, bytes) else line)

    async def close(self) -> None:
        await self.socket.close()
        await self.reader


class RawWsClient:
    """A WebSocket client whose socket is read only when the test asks (websockets' sans-I/O
    protocol over a plain socket). A client library reads ahead into its own memory; this one
    does not, so once it stops reading, the kernel's buffers are all that stands between the
    server and a client that fell behind, and the test can say how large they are."""

    def __init__(self, sock: socket.socket, protocol: Any) -> None:
        self.sock = sock
        self.protocol = protocol
        self._ids = itertools.count(1)

    @classmethod
    async def connect(cls, url: str, token: str, *, receive_buffer: int) -> RawWsClient:
        from websockets.client import ClientProtocol
        from websockets.http11 import Response
        from websockets.protocol import State
        from websockets.typing import Subprotocol
        from websockets.uri import parse_uri

        where = urlsplit(url)
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)  # before connecting: fixes the window
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        await loop.sock_connect(sock, (where.hostname, where.port))
        protocol = ClientProtocol(parse_uri(url), subprotocols=[Subprotocol("roder.remote.v1")], max_size=None)
        request = protocol.connect()
        request.headers["Authorization"] = f"Bearer {token}"
        protocol.send_request(request)
        client = cls(sock, protocol)
        await client._flush()
        while protocol.state is State.CONNECTING:
            data = await loop.sock_recv(sock, 65536)
            if not data:
                raise ConnectionError("the server closed the connection during the handshake")
            protocol.receive_data(data)
        response = protocol.events_received()[0]
        assert isinstance(response, Response) and response.status_code == 101, response
        return client

    @property
    def buffered_bytes(self) -> int:
        """What the kernel holds for this socket, at most: its receive buffer."""
        return self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)

    async def request(self, method: str, params: dict[str, Any] | None = None) -> int:
        """Send a request (its answer is read with ``read_to_end``); returns its id."""
        request_id = next(self._ids)
        self.protocol.send_text(
            json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}).encode()
        )
        await self._flush()
        return request_id

    async def readable(self) -> None:
        """Until the server's first bytes have arrived (nothing is read)."""
        loop = asyncio.get_running_loop()
        arrived: asyncio.Future[None] = loop.create_future()
        loop.add_reader(self.sock.fileno(), lambda: arrived.done() or arrived.set_result(None))
        try:
            async with asyncio.timeout(60):
                await arrived
        finally:
            loop.remove_reader(self.sock.fileno())

    async def read_to_end(self, timeout: float = 60) -> list[dict[str, Any]]:
        """Every message until the server ends the connection (a close frame, or an abort)."""
        loop = asyncio.get_running_loop()
        messages: list[dict[str, Any]] = []
        async with asyncio.timeout(timeout):
            while True:
                try:
                    data = await loop.sock_recv(self.sock, 1 << 20)
                except ConnectionResetError:
                    data = b""
                if data:
                    self.protocol.receive_data(data)
                else:
                    self.protocol.receive_eof()
                messages.extend(
                    json.loads(frame.data) for frame in self.protocol.events_received() if frame.opcode.name == "TEXT"
                )
                if not data or self.protocol.close_rcvd is not None:
                    return messages

    @property
    def close_code(self) -> int:
        """After ``read_to_end``: the code of the server's close frame, or 1006 (abnormal
        closure) when it ended the connection without one."""
        received = self.protocol.close_rcvd
        return 1006 if received is None else int(received.code)

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        for data in self.protocol.data_to_send():
            if data:
                await loop.sock_sendall(self.sock, data)

    def close(self) -> None:
        self.sock.close()


#: The bearer token of ``app_server_peer``'s WebSocket servers.
PEER_TOKEN = "peer-token-0123456789"


@contextlib.asynccontextmanager
async def app_server_peer(transport: str, workspace: Path, env: dict[str, str], *args: str) -> AsyncIterator[RpcPeer]:
    """A client of a real ``roder app-server`` for ``workspace``, over ``transport``: ``stdio``
    (its pipes), anything else a WebSocket (``--remote`` with a bearer token); the server ends
    with it."""
    if transport == "stdio":
        pipe = await PipePeer.start(workspace, env, *args)
        try:
            yield pipe
        finally:
            await pipe.close()
        return
    env = {**env, "RODER_PEER_TOKEN": PEER_TOKEN}
    server = await RemoteServer.start(workspace, env, "--auth-token", "env:RODER_PEER_TOKEN", "--print-qr=false", *args)
    socket = await WsPeer.connect(server.url, PEER_TOKEN)
    try:
        yield socket
    finally:
        await socket.close()
        await server.stop()
