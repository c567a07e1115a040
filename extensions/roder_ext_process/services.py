"""Registry services backed by a process extension: each one forwards its protocol's calls.

Inside the host these are ordinary services (a ``Tool``, a ``Hook``, an ``InferenceEngine``...),
so policy, approvals, audit, redaction and the event stream treat them exactly like Python
ones: the runtime decides when they run, the process only answers. Everything the process
sends back is checked against the same models a Python service's values are.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from roder_core.ir import AgentInferenceRequest, InferenceErrorEvent, InferenceEvent, ModelProfile
from roder_core.kernel.extension import ProcessState
from roder_core.kernel.services import (
    ContextBlock,
    ContextQuery,
    HookOutcome,
    HookPoint,
    InferenceProviderMetadata,
    InferenceTurnContext,
    PaletteCommand,
    PolicyDecision,
    PolicyVerdict,
    StatusView,
)
from roder_core.kernel.tools import (
    PolicySubject,
    Tool,
    ToolCall,
    ToolExecutionContext,
    ToolRegistry,
    ToolResult,
    bounded_result_text,
)
from roder_ext_process.connection import ExtensionCallError
from roder_ext_process.supervisor import Supervisor

#: A status segment's render is on the screen's path: it may not hold the app up longer.
STATUS_TIMEOUT = 0.25
_events: TypeAdapter[Any] = TypeAdapter(InferenceEvent)
_streams = itertools.count(1)


class _Backed:
    """What every process-backed service shares: its supervisor and its state."""

    def __init__(self, supervisor: Supervisor, service_id: str) -> None:
        self.supervisor = supervisor
        self._id = service_id

    def id(self) -> str:
        return self._id

    def process_state(self) -> ProcessState:
        return self.supervisor.state()

    async def aclose(self) -> None:
        """The runtime is closing: stop the process (every service of it may ask; once is enough)."""
        self.supervisor.close()


class ProcessTool(Tool):
    """One tool the process declared; output it streams shows on the tool card as it comes."""

    def __init__(self, supervisor: Supervisor, row: dict[str, Any]) -> None:
        self.supervisor = supervisor
        self.name = str(row["name"])
        self.description = str(row.get("description") or "")
        self.parameters = row.get("inputSchema") or {"type": "object", "properties": {}}
        self.read_only = bool(row.get("readOnly", False))
        self.kind = "read" if self.read_only else "other"
        self._listening: dict[str, ToolExecutionContext] = {}
        supervisor.listen(self._on_notification)

    def policy_subjects(self, arguments: dict[str, Any], workspace: Path) -> list[PolicySubject]:
        return [PolicySubject(tool=self.name, writes=not self.read_only)]

    def _on_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "tool/output":
            ctx = self._listening.get(str(params.get("callId")))
            if ctx is not None and isinstance(params.get("text"), str):
                ctx.emit_output(params["text"])

    async def execute(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        self._listening[call.id] = ctx
        params = {
            "tool": self.name,
            "callId": call.id,
            "arguments": call.arguments,
            "threadId": ctx.thread_id,
            "workspace": str(ctx.workspace),
        }
        try:
            result = await self.supervisor.call("tool/execute", params)
        except ExtensionCallError as exc:
            return ToolResult.error(call, f"{self.name} failed: {exc}")
        finally:
            self._listening.pop(call.id, None)
        if not isinstance(result, dict) or not isinstance(result.get("text"), str):
            return ToolResult.error(call, f"{self.name}: the extension answered without a text result")
        return ToolResult(
            id=call.id,
            name=call.name,
            text=bounded_result_text(result["text"]),
            data=result.get("data"),
            is_error=bool(result.get("isError")),
        )


class ProcessToolSet(_Backed):
    def __init__(self, supervisor: Supervisor, service_id: str, tools: list[ProcessTool]) -> None:
        super().__init__(supervisor, service_id)
        self.tools = tools

    def contribute(self, registry: ToolRegistry) -> None:
        for tool in self.tools:
            registry.register(tool)


class ProcessHook(_Backed):
    def __init__(self, supervisor: Supervisor, row: dict[str, Any]) -> None:
        super().__init__(supervisor, str(row["id"]))
        self._points = frozenset(HookPoint(p) for p in row.get("points", []) if p in HookPoint._value2member_map_)

    def points(self) -> frozenset[HookPoint]:
        return self._points

    async def run(self, point: HookPoint, payload: dict[str, Any]) -> HookOutcome | None:
        """A hook that fails says so by blocking, with the reason (never silently allowing)."""
        try:
            answer = await self.supervisor.call("hook/run", {"hook": self._id, "point": point.value, "payload": payload})
        except ExtensionCallError as exc:
            return HookOutcome(block=True, reason=f"hook {self._id} failed: {exc}")
        if not isinstance(answer, dict):
            return None
        replace = answer.get("replace")
        return HookOutcome(
            block=bool(answer.get("block")),
            reason=str(answer.get("reason") or ""),
            replace=replace if isinstance(replace, dict) else {},
        )


class ProcessContextProvider(_Backed):
    async def load_context(self, query: ContextQuery) -> list[ContextBlock]:
        query_json = {
            "prompt": self.supervisor.redact(query.prompt),
            "cwd": str(query.cwd),
            "threadId": query.thread_id,
            "turnStart": query.turn_start,
        }
        params = {"provider": self._id, "query": query_json}
        try:
            answer = await self.supervisor.call("context/load", params)
        except ExtensionCallError:
            return []  # context is a help, never a gate: the turn goes on without it
        blocks = answer.get("blocks", []) if isinstance(answer, dict) else []
        return [
            ContextBlock(
                source=f"{self._id}:{b.get('source') or 'context'}",
                kind=str(b.get("kind") or "extension"),
                text=b["text"],
                priority=int(b.get("priority", 50)),
                droppable=bool(b.get("droppable", True)),
                placement="turn" if b.get("placement") == "turn" else "system",
            )
            for b in blocks
            if isinstance(b, dict) and isinstance(b.get("text"), str)
        ]


class ProcessPolicyContributor(_Backed):
    async def review(self, ctx: ToolExecutionContext, call: ToolCall) -> PolicyDecision | None:
        params = {"contributor": self._id, "tool": call.name, "arguments": call.arguments, "mode": ctx.mode}
        try:
            answer = await self.supervisor.call("policy/review", params)
        except ExtensionCallError as exc:
            return PolicyDecision(PolicyVerdict.ASK, f"policy {self._id} could not decide: {exc}", self._id)
        if not isinstance(answer, dict) or answer.get("verdict") in (None, ""):
            return None
        try:
            verdict = PolicyVerdict(str(answer["verdict"]))
        except ValueError:
            return PolicyDecision(
                PolicyVerdict.ASK, f"policy {self._id} answered an unknown verdict {answer['verdict']!r}", self._id
            )
        return PolicyDecision(verdict, str(answer.get("reason") or f"policy {self._id}"), self._id)


class ProcessStatusSegment(_Backed):
    def render(self, state: dict[str, Any]) -> StatusView | None:
        try:
            answer = self.supervisor.call_sync("status/render", {"segment": self._id, "state": _plain(state)}, STATUS_TIMEOUT)
        except ExtensionCallError:
            return None
        if not isinstance(answer, dict) or not isinstance(answer.get("text"), str) or not answer["text"]:
            return None
        return StatusView(text=answer["text"], priority=int(answer.get("priority", 50)), style=str(answer.get("style") or ""))


class ProcessPaletteSource(_Backed):
    async def commands(self, state: dict[str, Any]) -> list[PaletteCommand]:
        try:
            answer = await self.supervisor.call("palette/commands", {"source": self._id, "state": _plain(state)})
        except ExtensionCallError:
            return []
        rows = answer.get("commands", []) if isinstance(answer, dict) else []
        return [
            PaletteCommand(str(r["title"]), str(r.get("help") or ""), str(r["method"]), dict(r.get("params") or {}))
            for r in rows
            if isinstance(r, dict) and isinstance(r.get("title"), str) and isinstance(r.get("method"), str)
        ]


class ProcessEngine(_Backed):
    """An inference engine outside Python: canonical request in, canonical events out."""

    def __init__(self, supervisor: Supervisor, row: dict[str, Any]) -> None:
        super().__init__(supervisor, str(row["id"]))
        self.name = str(row.get("name") or self._id)
        self.models = [
            ModelProfile.model_validate({"provider": self._id, **m}) for m in row.get("models", []) if isinstance(m, dict)
        ]
        self._default = str(row.get("defaultModel") or (self.models[0].id if self.models else ""))
        self._wakers: dict[str, Any] = {}
        supervisor.listen(self._on_notification)

    def metadata(self) -> InferenceProviderMetadata:
        return InferenceProviderMetadata(
            name=self.name, auth_type="none", description=f"process extension {self.supervisor.name}"
        )

    def model_profile(self, model: str) -> ModelProfile:
        return next((m for m in self.models if m.id == model), ModelProfile(id=model, provider=self._id))

    def default_model(self) -> str:
        return self._default

    async def list_models(self) -> list[ModelProfile]:
        return list(self.models)

    def _on_notification(self, method: str, params: dict[str, Any]) -> None:
        if method != "engine/event":
            return
        stream = str(params.get("streamId"))
        waker = self._wakers.get(stream)
        if waker is None or not isinstance(params.get("event"), dict):
            return
        loop, queue = waker
        loop.call_soon_threadsafe(queue.put_nowait, params["event"])

    async def stream_turn(self, ctx: InferenceTurnContext, request: AgentInferenceRequest) -> AsyncIterator[InferenceEvent]:
        import asyncio

        stream = f"s{next(_streams)}"
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        self._wakers[stream] = (loop, queue)
        params = {"engine": self._id, "streamId": stream, "request": request.wire()}
        call = asyncio.ensure_future(self.supervisor.call("engine/stream", params))
        call.add_done_callback(lambda _f: queue.put_nowait(None))
        try:
            while True:
                raw = await queue.get()
                if raw is None:
                    break
                try:
                    yield _events.validate_python(raw)
                except ValidationError as exc:
                    yield InferenceErrorEvent(
                        message=f"engine {self._id} sent an event that is not canonical: {exc.errors()[0]['msg']}"
                    )
                    return
            try:
                call.result()
            except ExtensionCallError as exc:
                yield InferenceErrorEvent(message=f"engine {self._id} failed: {exc}", kind="provider", retryable=False)
        finally:
            self._wakers.pop(stream, None)
            if not call.done():
                call.cancel()


def _plain(value: Any) -> Any:
    """State as JSON-ready data (what a process can receive)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)
