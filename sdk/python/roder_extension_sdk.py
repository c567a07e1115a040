"""Write a Roder extension that runs in its own process (docs/extension-protocol.md).

One file, standard library only, so an extension can vendor it. Declare services with the
decorators of an ``Extension`` and call ``run()``; the SDK speaks the protocol on stdin and
stdout, answers calls concurrently, stops a call when Roder cancels it, and keeps stdout for
protocol lines (print logs to stderr)::

    from roder_extension_sdk import Extension, ToolContext

    ext = Extension("acme-wordcount", "Word count", "0.1.0", capabilities=["fs.read.workspace"])

    @ext.tool("word_count", "Count the words of a file.", {"type": "object",
              "properties": {"path": {"type": "string"}}, "required": ["path"]}, read_only=True)
    async def word_count(arguments: dict, ctx: ToolContext) -> str:
        text = (ctx.workspace / arguments["path"]).read_text()
        return f"{len(text.split())} words"

    ext.run()
"""

from __future__ import annotations

import asyncio
import inspect
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

API_VERSION = "0.1.0"
JsonObject = dict[str, Any]
Handler = Callable[..., Any]


class ExtensionError(Exception):
    """Raise from a handler to answer the call with this message (code -32000)."""


@dataclass
class ToolContext:
    """What a tool call knows besides its arguments."""

    call_id: str
    thread_id: str
    workspace: Path
    _send: Callable[[JsonObject], None]

    def output(self, text: str) -> None:
        """Stream text to the call's tool card while it runs."""
        self._send({"jsonrpc": "2.0", "method": "tool/output", "params": {"callId": self.call_id, "text": text}})


@dataclass
class EngineStream:
    """Emit canonical events for one model call (``message_delta``, ``tool_call``, ``usage``...)."""

    stream_id: str
    _send: Callable[[JsonObject], None]

    def emit(self, event: JsonObject) -> None:
        self._send({"jsonrpc": "2.0", "method": "engine/event", "params": {"streamId": self.stream_id, "event": event}})

    def text(self, text: str) -> None:
        self.emit({"type": "message_delta", "text": text})

    def tool_call(self, call_id: str, name: str, arguments: JsonObject) -> None:
        self.emit({"type": "tool_call", "callId": call_id, "name": name, "arguments": arguments})

    def usage(self, input_tokens: int, output_tokens: int) -> None:
        self.emit({"type": "usage", "usage": {"inputTokens": input_tokens, "outputTokens": output_tokens}})

    def completed(self, stop_reason: str = "end_turn") -> None:
        self.emit({"type": "completed", "stopReason": stop_reason})


@dataclass
class _Services:
    tools: dict[str, tuple[JsonObject, Handler]] = field(default_factory=dict)
    hooks: dict[str, tuple[list[str], Handler]] = field(default_factory=dict)
    engines: dict[str, tuple[JsonObject, Handler]] = field(default_factory=dict)
    context: dict[str, Handler] = field(default_factory=dict)
    policy: dict[str, Handler] = field(default_factory=dict)
    status: dict[str, Handler] = field(default_factory=dict)
    palette: dict[str, Handler] = field(default_factory=dict)


async def _call(handler: Handler, *args: Any) -> Any:
    result = handler(*args)
    return await result if inspect.isawaitable(result) else result


class Extension:
    """An extension's manifest and services; ``run()`` serves them until stdin closes."""

    def __init__(self, id: str, name: str, version: str, *, description: str = "", capabilities: list[str] | None = None) -> None:
        self.id, self.name, self.version, self.description = id, name, version, description
        self.capabilities = list(capabilities or [])
        self.services = _Services()
        self.workspace = Path.cwd()
        self._tasks: dict[Any, asyncio.Task[None]] = {}
        self._out = sys.stdout.buffer

    # ------------------------------------------------------------------ declaring services

    def tool(
        self, name: str, description: str, input_schema: JsonObject | None = None, *, read_only: bool = False
    ) -> Callable[[Handler], Handler]:
        """``async def handler(arguments, ctx: ToolContext) -> str | {"text", "isError"?, "data"?}``"""

        def register(handler: Handler) -> Handler:
            spec = {
                "name": name,
                "description": description,
                "inputSchema": input_schema or {"type": "object", "properties": {}},
                "readOnly": read_only,
            }
            self.services.tools[name] = (spec, handler)
            return handler

        return register

    def hook(self, hook_id: str, points: list[str]) -> Callable[[Handler], Handler]:
        """``def handler(point, payload) -> {"block", "reason", "replace"} | None``"""

        def register(handler: Handler) -> Handler:
            self.services.hooks[hook_id] = (points, handler)
            return handler

        return register

    def engine(
        self, engine_id: str, models: list[JsonObject], *, name: str = "", default_model: str = ""
    ) -> Callable[[Handler], Handler]:
        """``async def handler(request, stream: EngineStream) -> None`` for one model call."""

        def register(handler: Handler) -> Handler:
            row = {"id": engine_id, "name": name or engine_id, "models": models, "defaultModel": default_model or models[0]["id"]}
            self.services.engines[engine_id] = (row, handler)
            return handler

        return register

    def context_provider(self, provider_id: str) -> Callable[[Handler], Handler]:
        """``def handler(query) -> [{"text", ...}]``"""
        return self._simple(self.services.context, provider_id)

    def policy(self, contributor_id: str) -> Callable[[Handler], Handler]:
        """``def handler(tool, arguments, mode) -> {"verdict", "reason"} | None``"""
        return self._simple(self.services.policy, contributor_id)

    def status_segment(self, segment_id: str) -> Callable[[Handler], Handler]:
        """``def handler(state) -> {"text", "priority"?} | None`` (answer fast: it is on the screen's path)"""
        return self._simple(self.services.status, segment_id)

    def palette_source(self, source_id: str) -> Callable[[Handler], Handler]:
        """``def handler(state) -> [{"title", "help", "method", "params"}]``"""
        return self._simple(self.services.palette, source_id)

    @staticmethod
    def _simple(table: dict[str, Handler], key: str) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            table[key] = handler
            return handler

        return register

    # ------------------------------------------------------------------ the manifest

    def manifest(self) -> JsonObject:
        s = self.services
        provides: list[JsonObject] = [{"ToolProvider": self.id}] if s.tools else []
        provides += [{"Hook": h} for h in s.hooks]
        provides += [{"InferenceEngine": e} for e in s.engines]
        provides += [{"ContextProvider": c} for c in s.context]
        provides += [{"PolicyContributor": p} for p in s.policy]
        provides += [{"StatusSegment": x} for x in s.status]
        provides += [{"PaletteSource": x} for x in s.palette]
        return {
            "id": self.id,
            "name": self.name,
            "version": self.version,
            "api_version": API_VERSION,
            "description": self.description or None,
            "provides": provides,
            "required_capabilities": [{"id": c} for c in self.capabilities],
        }

    def _initialize(self, params: JsonObject) -> JsonObject:
        self.workspace = Path(params.get("workspace") or Path.cwd())
        s = self.services
        return {
            "manifest": self.manifest(),
            "services": {
                "tools": [spec for spec, _ in s.tools.values()],
                "hooks": [{"id": h, "points": points} for h, (points, _) in s.hooks.items()],
                "inferenceEngines": [row for row, _ in s.engines.values()],
                "contextProviders": [{"id": c} for c in s.context],
                "policyContributors": [{"id": p} for p in s.policy],
                "statusSegments": [{"id": x} for x in s.status],
                "paletteSources": [{"id": x} for x in s.palette],
            },
        }

    # ------------------------------------------------------------------ serving

    def _send(self, message: JsonObject) -> None:
        self._out.write(json.dumps(message, separators=(",", ":")).encode("utf-8") + b"\n")
        self._out.flush()

    def _error(self, request_id: Any, code: int, message: str) -> None:
        self._send({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})

    async def _route(self, method: str, params: JsonObject) -> Any:
        s = self.services
        if method == "initialize":
            return self._initialize(params)
        if method == "tool/execute":
            _spec, handler = s.tools[params["tool"]]
            ctx = ToolContext(str(params["callId"]), str(params.get("threadId", "")), Path(params["workspace"]), self._send)
            result = await _call(handler, params.get("arguments", {}), ctx)
            return {"text": result} if isinstance(result, str) else result
        if method == "hook/run":
            return await _call(s.hooks[params["hook"]][1], params["point"], params.get("payload", {}))
        if method == "engine/stream":
            await _call(s.engines[params["engine"]][1], params["request"], EngineStream(str(params["streamId"]), self._send))
            return {}
        if method == "context/load":
            return {"blocks": await _call(s.context[params["provider"]], params.get("query", {})) or []}
        if method == "policy/review":
            return await _call(s.policy[params["contributor"]], params["tool"], params.get("arguments", {}), params.get("mode"))
        if method == "status/render":
            return await _call(s.status[params["segment"]], params.get("state", {}))
        if method == "palette/commands":
            return {"commands": await _call(s.palette[params["source"]], params.get("state", {})) or []}
        raise LookupError(method)

    async def _answer(self, request_id: Any, method: str, params: JsonObject) -> None:
        try:
            result = await self._route(method, params)
        except asyncio.CancelledError:
            return  # Roder cancelled it: it ignores any answer now
        except LookupError:
            self._send(
                {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"unknown method or service {method}"}}
            )
        except ExtensionError as exc:
            self._error(request_id, -32000, str(exc))
        except Exception as exc:  # a bug in the handler fails its call, never the process
            self._error(request_id, -32000, f"{type(exc).__name__}: {exc}")
        else:
            self._send({"jsonrpc": "2.0", "id": request_id, "result": result})
        finally:
            self._tasks.pop(request_id, None)

    async def serve(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while line := await reader.readline():
            message = json.loads(line)
            method, params = message.get("method"), message.get("params") or {}
            if method == "$/cancelRequest":
                task = self._tasks.pop(params.get("id"), None)
                if task is not None:
                    task.cancel()
            elif "id" in message and isinstance(method, str):
                self._tasks[message["id"]] = asyncio.ensure_future(self._answer(message["id"], method, params))
        for task in list(self._tasks.values()):
            task.cancel()

    def run(self) -> None:
        """Serve until Roder closes stdin."""
        asyncio.run(self.serve())
