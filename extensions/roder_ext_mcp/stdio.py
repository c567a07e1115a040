"""MCP over a server process's stdin/stdout, owned here rather than by the SDK's ``stdio_client``.

Two behaviours the SDK's transport does not give: shutdown never waits on a server that has not
finished its handshake (a server stuck in ``initialize`` is terminated at once, so no exit waits
on it), and a line on stdout that is not JSON-RPC is reported once, as one line naming the server,
instead of a logged traceback per line. Shutdown otherwise follows the MCP lifecycle: close stdin,
give the server ``EXIT_GRACE`` seconds, then SIGTERM and finally SIGKILL to its process group.
The graces are short and bounded (a server that exits on the end of its stdin does so in
milliseconds), so a server that ignores both its stdin and SIGTERM holds up Roder's exit by at
most ``EXIT_GRACE + TERM_GRACE``; every server is stopped at the same time (``McpManager.aclose``).
The server's stderr is a pipe Roder reads into its log, redacted (``server_log.ServerLog``); once
the server is stopped its last lines are read for at most ``TERM_GRACE`` more (a process it left
behind may hold the pipe open).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import AsyncIterator, Callable
from typing import Any

from roder_core import bounded_json
from roder_ext_mcp.config import ServerConfig
from roder_ext_mcp.server_log import ServerLog

#: Seconds a connected server gets to exit on its own once its stdin is closed.
EXIT_GRACE = 0.3
#: Seconds between SIGTERM and SIGKILL.
TERM_GRACE = 0.2


@contextlib.asynccontextmanager
async def stdio_streams(
    config: ServerConfig,
    log: ServerLog,
    *,
    handshake_done: Callable[[], bool],
    on_noise: Callable[[str], None],
    on_spawn: Callable[[int], None] = lambda _pid: None,
) -> AsyncIterator[tuple[Any, Any]]:
    """(read stream, write stream) of ``SessionMessage`` for the ``mcp`` client session."""
    import anyio
    import mcp_types
    from anyio.streams.text import TextReceiveStream
    from mcp.client.stdio import get_default_environment
    from mcp.shared.message import SessionMessage

    process = await anyio.open_process(
        [config.command, *config.args],
        env=get_default_environment() | dict(config.env),
        stderr=subprocess.PIPE,
        cwd=config.cwd,
        start_new_session=True,
    )
    on_spawn(process.pid)
    to_session, from_server = anyio.create_memory_object_stream[Any](0)
    to_server, from_session = anyio.create_memory_object_stream[Any](0)
    closed = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, ConnectionError, OSError)

    async def read_stdout() -> None:
        assert process.stdout is not None
        with contextlib.suppress(*closed):
            async with to_session:
                pending: list[str] = []  # the line being received, in pieces (joined once, at its end)
                size = 0  # of ``pending``; past MAX_LINE only its head is kept, to name the request
                async for chunk in TextReceiveStream(process.stdout, errors="replace"):
                    *ends, rest = chunk.split("\n")
                    if not ends:
                        size += len(rest)
                        pending = [*pending, rest] if size <= MAX_LINE else ["".join(pending)[:_HEAD]]
                        continue
                    oversized = size + len(ends[0]) > MAX_LINE
                    lines = ["".join([*pending, ends[0]]), *ends[1:]]
                    pending, size = [rest], len(rest)
                    for index, line in enumerate(lines):
                        if not line.strip():
                            continue
                        too_long = (oversized and index == 0) or len(line) > MAX_LINE
                        problem = _too_long(line) if too_long else bounded_json.depth_problem(line)
                        try:
                            if problem is not None:
                                message = _refusal(mcp_types, line[:_HEAD], problem)
                            else:
                                message = _message(mcp_types, line)
                        except ValueError:
                            on_noise(line[:_HEAD])
                            continue
                        await to_session.send(SessionMessage(message))

    async def write_stdin() -> None:
        assert process.stdin is not None
        try:
            async with from_session:
                async for item in from_session:
                    data = item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode("utf-8"))
        except closed:
            await to_session.aclose()  # the server stopped reading: let the session see the end

    stderr_done = anyio.Event()

    async def read_stderr() -> None:
        try:
            await log.pump(process.stderr)
        finally:
            stderr_done.set()

    async with anyio.create_task_group() as group:
        group.start_soon(read_stdout)
        group.start_soon(write_stdin)
        group.start_soon(read_stderr)
        try:
            yield from_server, to_server
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(process, EXIT_GRACE if handshake_done() else 0.0)
                from_server.close()
                to_server.close()
                with anyio.move_on_after(TERM_GRACE):
                    await stderr_done.wait()
                with contextlib.suppress(Exception), anyio.move_on_after(TERM_GRACE):
                    await process.aclose()
            group.cancel_scope.cancel()


#: The longest line read from a server's stdout (its tool results can carry images); a longer
#: one is refused as the answer to the request it names, without being held in memory.
MAX_LINE = 64 * 1024 * 1024
#: What is kept of a refused line: enough to read the id of the request it answers.
_HEAD = 1024

_ID = re.compile(r'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d+|"[^"\\]{0,200}")')


def _too_long(line: str) -> ValueError:
    return ValueError(f"a line of over {MAX_LINE // (1024 * 1024)} MiB (the limit)")


def _refusal(mcp_types: Any, line: str, problem: ValueError) -> Any:
    """A message too deep or too long to parse, as the error answer to the request it answers
    (its id read from its start), so the call fails at once with the reason instead of waiting
    for an answer that was dropped. ValueError (reported as noise) when no id can be read."""
    found = _ID.match(line)
    if found is None:
        raise problem
    reason = problem.msg if isinstance(problem, bounded_json.JSONTooDeep) else str(problem)
    error = {"code": -32600, "message": f"the MCP server's answer was refused: {reason}"}
    return mcp_types.jsonrpc_message_adapter.validate_python(
        {"jsonrpc": "2.0", "id": bounded_json.loads(found.group(1)), "error": error}, by_name=False
    )


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _message(mcp_types: Any, line: str) -> Any:
    """The JSON-RPC message on a line. A lone surrogate escaped in a string (``\\udce9``, which
    no UTF-8 text can hold) becomes U+FFFD, as undecodable bytes do; an answer that breaks the
    JSON-RPC envelope but names its request's id fails that request at once, saying why,
    instead of leaving it to wait for its timeout. ValueError (reported as noise) otherwise."""
    try:
        return mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as exc:
        try:
            data = _without_surrogates(bounded_json.loads(line))
        except ValueError:
            raise exc from None
    try:
        return mcp_types.jsonrpc_message_adapter.validate_python(data, by_name=False)
    except ValueError as invalid:
        answers = isinstance(data, dict) and "method" not in data and ("result" in data or "error" in data)
        if not answers or type(data.get("id")) not in (int, str):
            raise
        error = {"code": -32600, "message": f"the MCP server's answer is not valid JSON-RPC: {first_problem(invalid)}"}
        return mcp_types.jsonrpc_message_adapter.validate_python(
            {"jsonrpc": "2.0", "id": data["id"], "error": error}, by_name=False
        )


def _without_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_without_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    return value


def first_problem(exc: ValueError) -> str:
    """A validation error in one line: how many problems, and the first with where it is
    (pydantic lists one per member of a union, pages of them, for one wrong field)."""
    errors = getattr(exc, "errors", None)
    found = errors() if callable(errors) else []
    if not found:
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    first = found[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or "the message"
    more = f" ({len(found)} problems; the first)" if len(found) > 1 else ""
    return f"{where}: {first.get('msg', 'invalid')}{more}"


async def _stop(process: Any, grace: float) -> None:
    """Close stdin, wait ``grace`` seconds, then SIGTERM and SIGKILL the server's process group
    (its streams are closed by the caller, once the last of its stderr is read)."""
    import anyio

    with contextlib.suppress(Exception):
        await process.stdin.aclose()
    for sig, wait in ((None, grace), (signal.SIGTERM, TERM_GRACE), (signal.SIGKILL, TERM_GRACE)):
        if sig is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, sig)
        with anyio.move_on_after(wait):
            await process.wait()
            break
