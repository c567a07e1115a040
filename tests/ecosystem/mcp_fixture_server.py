"""A real MCP server for the tests, written with the official ``mcp`` package.

``python mcp_fixture_server.py stdio`` speaks MCP on stdin/stdout (``noisy-stdio`` first prints a
banner line that is not JSON-RPC to stdout, as a misbehaving server does); before serving it
prints ``NAME=value`` to stderr for each variable named in $FIXTURE_STDERR_VARS (comma-separated)
and then one line of $FIXTURE_STDERR_FLOOD bytes;
``python mcp_fixture_server.py http`` serves streamable HTTP on 127.0.0.1:PORT/mcp, printing PORT
(chosen by the kernel) once the socket listens, and requires the ``X-Test-Token`` header to equal
$FIXTURE_TOKEN when that variable is set. ``http-oauth`` and ``sse-oauth`` serve streamable HTTP
(``/mcp``) or SSE (``/sse``) as an OAuth-protected resource of the authorization server at
$FIXTURE_ISSUER (tests/oauth_server.py): without a bearer token that server's introspection calls
active they answer 401 with ``WWW-Authenticate: Bearer resource_metadata=...``, and they publish
their RFC 9728 metadata at ``/.well-known/oauth-protected-resource/<mcp|sse>``; with
$FIXTURE_ERROR_DESCRIPTION set, the challenge says ``error="invalid_token"`` with that
``error_description`` (its UTF-8 bytes, as a hostile server would send them).
"""

from __future__ import annotations

import os
import socket
import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("fixture")


@server.tool(description="Echo the text back, prefixed with the server's FIXTURE_GREETING.")
def echo(text: str) -> str:
    return f"{os.environ.get('FIXTURE_GREETING', 'echo')}: {text}"


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Tell the server's name (declares itself read-only).", annotations=ToolAnnotations(read_only_hint=True))
def whoami() -> str:
    return "fixture"


@server.tool(description="Fail with a tool error.")
def broken() -> str:
    raise ValueError("this tool always fails")


@server.tool(description="Exit the server process at once (simulates a crash).")
def die() -> str:
    os._exit(3)


@server.prompt(description="Ask for a review of one file, with an optional focus.")
def review(path: str, focus: str = "correctness") -> str:
    return f"Please review {path}, focusing on {focus}."


@server.resource("fixture://notes/readme", name="readme", description="The fixture's notes.", mime_type="text/markdown")
def readme() -> str:
    return "# Fixture notes\nThe answer is 42."


def main() -> None:
    transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if transport in ("stdio", "noisy-stdio"):
        print("fixture server starting on stdio", file=sys.stderr, flush=True)
        if transport == "noisy-stdio":
            print("Fixture MCP server v1 ready!", flush=True)
        for name in filter(None, os.environ.get("FIXTURE_STDERR_VARS", "").split(",")):
            print(f"fixture server config: {name}={os.environ.get(name, '')}", file=sys.stderr, flush=True)
        flood = int(os.environ.get("FIXTURE_STDERR_FLOOD", "0"))
        if flood:  # one line of this many bytes, written before serving: blocks if nobody reads the pipe
            sys.stderr.buffer.write(b"x" * flood + b"\n")
            sys.stderr.flush()
        server.run("stdio")
        print("fixture server: stdin closed, exiting", file=sys.stderr, flush=True)
        return
    import anyio
    import uvicorn
    from starlette.middleware.base import BaseHTTPMiddleware
    from starlette.responses import JSONResponse, PlainTextResponse

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    port = listener.getsockname()[1]
    path = "/sse" if transport.startswith("sse") else "/mcp"
    app = server.sse_app() if transport.startswith("sse") else server.streamable_http_app()
    token = os.environ.get("FIXTURE_TOKEN")
    issuer = os.environ.get("FIXTURE_ISSUER", "")
    described = os.environ.get("FIXTURE_ERROR_DESCRIPTION", "").encode().decode("latin-1")
    base = f"http://127.0.0.1:{port}"
    metadata_path = "/.well-known/oauth-protected-resource" + path

    async def check_token(request, call_next):  # type: ignore[no-untyped-def]
        if token and request.headers.get("x-test-token") != token:
            return PlainTextResponse("bad token", status_code=401)
        if transport.endswith("-oauth"):
            if request.url.path == metadata_path:
                return JSONResponse({"resource": base + path, "authorization_servers": [issuer], "scopes_supported": ["tools"]})
            bearer = request.headers.get("authorization", "")
            if not bearer.startswith("Bearer ") or not await anyio.to_thread.run_sync(active, issuer, bearer[7:]):
                challenge = f'Bearer resource_metadata="{base}{metadata_path}", scope="tools"'
                if described:  # latin-1 text: a header carries bytes, which Roder reads as UTF-8 first
                    challenge += f', error="invalid_token", error_description="{described}"'
                return PlainTextResponse("unauthorized", status_code=401, headers={"www-authenticate": challenge})
        return await call_next(request)

    app.add_middleware(BaseHTTPMiddleware, dispatch=check_token)
    # Listen before announcing the port: a client that connects before uvicorn runs waits in the
    # backlog instead of being refused, so the caller needs no retry loop.
    print(port, flush=True)
    config = uvicorn.Config(app, log_level="warning")
    anyio.run(uvicorn.Server(config).serve, [listener])


def active(issuer: str, token: str) -> bool:
    """RFC 7662 introspection at the test authorization server."""
    import json
    import urllib.parse
    import urllib.request

    body = urllib.parse.urlencode({"token": token}).encode()
    with urllib.request.urlopen(urllib.request.Request(issuer + "/introspect", data=body), timeout=30) as answer:
        return bool(json.loads(answer.read()).get("active"))


if __name__ == "__main__":
    main()
