"""What Roder answers when an MCP server asks the client: sampling, elicitation, roots, and what
it does with the server's log messages and progress.

A server's requests arrive on the connection, not on a tool call, but the spec lets a server
sample or elicit only while it serves a request; Roder answers them for the tool call of that
server that is running (the latest one, when several run at once). With no call running, or in a
headless run, sampling and elicitation are declined with a message saying why: nothing reaches
the user's model or the user without someone seeing it.

- Sampling runs through the user's own provider and model (a child thread without tools), after
  an approval that shows the whole request, unless the server's ``sampling`` policy is ``allow``
  (``deny`` refuses at once). A request for more than ``sampling_max_tokens`` is refused.
- Elicitation (form and URL modes) is a ``userInput/requested`` question set: the TUI's dialog,
  an app-server or ACP client's prompt.
- Roots are the workspace of every thread that called the server plus ``[mcp] roots``; a new one
  is announced with ``notifications/roots/list_changed``.
- Log messages go to the server's log file and onto the running tool call's output; progress
  goes onto the tool call's output.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from roder_core.errors import RoderError
from roder_core.ir import AgentMessageItem, ApprovalOption, ApprovalRequest
from roder_core.kernel.tools import ToolExecutionContext
from roder_ext_mcp.config import ServerConfig
from roder_ext_mcp.server_log import ServerLog

log = logging.getLogger(__name__)

#: JSON-RPC error code a client answers with when the user (or policy) refuses (spec: -1).
USER_REJECTED = -1
#: Questions per ``userInput/requested`` (the dialog's limit); longer forms are asked in parts.
QUESTIONS_PER_REQUEST = 4
_YES, _NO = "Yes", "No"
_OPEN, _DECLINE = "I opened it and finished there", "Decline"


class RootSet:
    """The roots every server of a runtime is offered: ``[mcp] roots`` and each workspace a
    thread called a server from. ``add`` tells the listeners when a new one joins."""

    def __init__(self, configured: Iterable[Path]) -> None:
        self._paths: list[Path] = [p.resolve() for p in configured]
        self._listeners: list[Callable[[], None]] = []

    def paths(self) -> list[Path]:
        return list(self._paths)

    def listen(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def add(self, path: Path) -> None:
        resolved = path.resolve()
        if resolved in self._paths:
            return
        self._paths.append(resolved)
        for listener in self._listeners:
            listener()


class CallRegistry:
    """The tool calls of one server that are running now, newest last."""

    def __init__(self) -> None:
        self._calls: list[ToolExecutionContext] = []

    def enter(self, ctx: ToolExecutionContext) -> None:
        self._calls.append(ctx)

    def leave(self, ctx: ToolExecutionContext) -> None:
        if ctx in self._calls:
            self._calls.remove(ctx)

    def current(self) -> ToolExecutionContext | None:
        return self._calls[-1] if self._calls else None

    def emit(self, text: str) -> None:
        """Onto the running call's output stream (its tool card), if one runs."""
        ctx = self.current()
        if ctx is not None:
            ctx.emit_output(text)


def _error(message: str) -> Any:
    from mcp_types import ErrorData

    return ErrorData(code=USER_REJECTED, message=message)


def _content_text(block: Any) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        return f"[{kind} {getattr(block, 'mime_type', '')} from the server; not passed to the model]"
    return f"[{kind} content]"


def render_sampling_request(params: Any) -> str:
    """The request as the user approves it and as the model reads it: nothing hidden."""
    lines = []
    if params.system_prompt:
        lines.append(f"System prompt: {params.system_prompt}")
    for message in params.messages:
        blocks = message.content if isinstance(message.content, list) else [message.content]
        lines.append(f"{message.role}: " + "\n".join(_content_text(b) for b in blocks))
    lines.append(f"(at most {params.max_tokens} tokens)")
    return "\n\n".join(lines)


def _question(name: str, spec: dict[str, Any], required: bool) -> dict[str, Any]:
    title = str(spec.get("title") or name)
    description = str(spec.get("description") or "")
    kind = spec.get("type")
    text = f"{title}: {description}" if description else title
    if "default" in spec:
        text += f" (default: {spec['default']})"
    if not required:
        text += " (optional)"
    options: list[dict[str, str]] = []
    choices = _choices(spec)
    if kind == "boolean":
        options = [{"label": _YES, "description": ""}, {"label": _NO, "description": ""}]
    elif choices and len(choices) <= 4:
        options = [{"label": label, "description": ""} for label, _value in choices]
    elif choices:
        text += " — one of: " + ", ".join(label for label, _value in choices)
    if kind in ("number", "integer"):
        text += f" ({kind})"
    multi = kind == "array"
    return {
        "id": name,
        "header": title[:20],
        "question": text,
        "options": options if len(options) >= 2 else [],
        "multiSelect": multi,
        "allowFreeText": kind != "boolean" and not (choices and len(choices) <= 4 and not multi),
    }


def _choices(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """An enum's (label, value) pairs in any of the spec's spellings (enum, oneOf/anyOf const)."""
    items = spec.get("items")
    source: dict[str, Any] = items if spec.get("type") == "array" and isinstance(items, dict) else spec
    if "enum" in source:
        names = source.get("enumNames") or source["enum"]
        return [(str(n), str(v)) for n, v in zip(names, source["enum"], strict=False)]
    options = source.get("oneOf") or source.get("anyOf") or []
    return [(str(o.get("title") or o["const"]), str(o["const"])) for o in options if isinstance(o, dict) and "const" in o]


def _convert(name: str, spec: dict[str, Any], answer: Any) -> Any:
    """One answer in the type the schema asks for; raises ValueError saying what is wrong."""
    kind = spec.get("type")
    choices = dict(_choices(spec))
    values = answer if isinstance(answer, list) else [answer]
    values = [choices.get(str(v), str(v)) for v in values]
    if kind == "array":
        return values
    value = values[0]
    if kind == "boolean":
        if value.lower() in (_YES.lower(), "true"):
            return True
        if value.lower() in (_NO.lower(), "false"):
            return False
        raise ValueError(f"{name!r} must be yes or no")
    if kind == "integer":
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"{name!r} must be a whole number, not {value!r}") from None
    if kind == "number":
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"{name!r} must be a number, not {value!r}") from None
    if choices and value not in choices.values():
        raise ValueError(f"{name!r} must be one of {', '.join(choices.values())}")
    return value


class ClientFeatures:
    """One server's client side: the callbacks given to the MCP ``Client``."""

    def __init__(self, config: ServerConfig, roots: RootSet, log: ServerLog) -> None:
        self.config = config
        self.calls = CallRegistry()
        self._roots = roots
        self._log = log
        #: How many requests were declined, and the last reason (shown by ``mcp/list``).
        self.declined = 0
        self.last_declined = ""

    def _decline(self, reason: str) -> str:
        self.declined += 1
        self.last_declined = reason
        self.calls.emit(f"[{self.config.name}] {reason}\n")
        log.info("MCP server %r: %s", self.config.name, reason)
        return reason

    # ------------------------------------------------------------------ sampling

    async def sampling(self, context: Any, params: Any) -> Any:
        from mcp_types import CreateMessageResult, TextContent

        name = self.config.name
        policy = self.config.sampling
        if policy == "deny":
            return _error(self._decline(f'sampling declined: [mcp.servers.{name}] sampling = "deny"'))
        ctx = self.calls.current()
        host = ctx.host if ctx is not None else None
        if ctx is None or host is None:
            return _error(self._decline("sampling declined: Roder samples only while one of this server's tools runs"))
        limit = self.config.sampling_max_tokens
        if params.max_tokens > limit:
            return _error(
                self._decline(
                    f"sampling declined: the server asked for {params.max_tokens} tokens, more than this server's "
                    f"limit of {limit} (sampling_max_tokens)"
                )
            )
        if params.tools:
            return _error(self._decline("sampling declined: Roder does not offer tools to a server's sampling request"))
        request = host.redact(render_sampling_request(params))
        if policy != "allow":
            if not host.interactive:
                return _error(
                    self._decline(
                        "sampling declined: it needs the user's approval and nobody can approve in this headless run "
                        f'(allow it with [mcp.servers.{name}] sampling = "allow")'
                    )
                )
            decision = await host.request_approval(
                ApprovalRequest(
                    thread_id=ctx.thread_id,
                    turn_id=ctx.turn_id,
                    call_id=ctx.call_id,
                    tool=f"mcp sampling ({name})",
                    reason=(
                        f"MCP server {name!r} asks to use your model ({host.provider} {host.model}) for this request:"
                        f"\n\n{request}"
                    ),
                    command=f"{name}: sampling/createMessage",
                    options=[
                        ApprovalOption(id="allow_once", label="Run it on my model"),
                        ApprovalOption(id="deny", label="Decline"),
                    ],
                )
            )
            if not decision.allowed:
                return _error(self._decline("sampling declined by the user"))
        self.calls.emit(f"[{name}] sampling with {host.provider} {host.model}\n")
        prompt = (
            f"An MCP server ({name}) asks for a completion. Answer the conversation below as the assistant, "
            f"in at most about {params.max_tokens} tokens, with the answer only.\n\n{request}"
        )
        child = await host.start_child_thread(
            title=f"MCP sampling for {name}", provider=host.provider, model=host.model, tools=frozenset(), mode="plan"
        )
        run = await host.run_child_thread(child, prompt, lambda _event: None)
        answer = "".join(item.text for item in run.items if isinstance(item, AgentMessageItem))
        if run.turn.status != "completed" or not answer:
            return _error(self._decline(f"sampling failed: the model gave no answer ({run.turn.status})"))
        return CreateMessageResult(
            role="assistant",
            content=TextContent(type="text", text=answer),
            model=host.model,
            stop_reason="endTurn",
        )

    # ------------------------------------------------------------------ elicitation

    async def elicitation(self, context: Any, params: Any) -> Any:
        from mcp_types import ElicitResult

        ctx = self.calls.current()
        host = ctx.host if ctx is not None else None
        if ctx is None or host is None or not host.interactive:
            why = "nobody can answer in this headless run" if ctx is not None else "no tool of this server is running"
            self._decline(f"elicitation declined: {why} ({params.message})")
            return ElicitResult(action="decline")
        header = self.config.name[:20]
        try:
            if getattr(params, "mode", "form") == "url":
                return await self._elicit_url(host, header, params)
            return await self._elicit_form(host, header, params)
        except TimeoutError:
            self._decline("elicitation cancelled: the user did not answer in time")
            return ElicitResult(action="cancel")
        except RoderError as exc:
            self._decline(f"elicitation declined: {exc}")
            return ElicitResult(action="decline")

    async def url_elicitations(self, data: Any) -> bool:
        """The addresses of a "URL elicitation required" error (-32042), each shown as a URL
        elicitation; True when the user went to every one (the call is then made again)."""
        from mcp_types import ElicitRequestURLParams

        raw = data.get("elicitations") if isinstance(data, dict) else None
        if not isinstance(raw, list) or not raw:
            return False
        for entry in raw:
            try:
                params = ElicitRequestURLParams.model_validate(entry)
            except ValueError:
                self._decline("elicitation declined: the server's URL elicitation is malformed")
                return False
            if (await self.elicitation(None, params)).action != "accept":
                return False
        return True

    async def _elicit_url(self, host: Any, header: str, params: Any) -> Any:
        from mcp_types import ElicitResult

        question = {
            "id": "url",
            "header": header,
            "question": (f"MCP server {self.config.name!r}: {params.message}\n\nOpen this address in your browser: {params.url}"),
            "options": [{"label": _OPEN, "description": ""}, {"label": _DECLINE, "description": ""}],
            "multiSelect": False,
            "allowFreeText": False,
        }
        answers = await host.request_user_input([question])
        if answers.get("url") == _OPEN:
            return ElicitResult(action="accept")
        self._decline("elicitation (URL) declined by the user")
        return ElicitResult(action="decline")

    async def _elicit_form(self, host: Any, header: str, params: Any) -> Any:
        from mcp_types import ElicitResult

        schema = params.requested_schema or {}
        properties: dict[str, dict[str, Any]] = dict(schema.get("properties") or {})
        required = set(schema.get("required") or [])
        questions = [_question(n, s, n in required) for n, s in properties.items()]
        if questions:
            questions[0]["question"] = f"MCP server {self.config.name!r}: {params.message}\n\n{questions[0]['question']}"
        answers: dict[str, Any] = {}
        for start in range(0, len(questions), QUESTIONS_PER_REQUEST):
            asked = questions[start : start + QUESTIONS_PER_REQUEST]
            part = await host.request_user_input(asked)
            # No answer at all is the user declining, except on a later page whose fields all
            # may stay empty (optional, or with a default the server gets).
            blank = not any(v not in (None, "", []) for v in part.values())
            must = any(q["id"] in required and "default" not in properties[q["id"]] for q in asked)
            if blank and (start == 0 or must):
                self._decline("elicitation declined by the user")
                return ElicitResult(action="decline")
            answers.update(part)
        content: dict[str, Any] = {}
        for name, spec in properties.items():
            answer = answers.get(name)
            if answer in (None, "", []):
                if "default" in spec:
                    content[name] = spec["default"]
                elif name in required:
                    self._decline(f"elicitation declined: {name!r} is required and was not answered")
                    return ElicitResult(action="decline")
                continue
            try:
                content[name] = _convert(name, spec, answer)
            except ValueError as exc:
                self._decline(f"elicitation declined: {exc}")
                return ElicitResult(action="decline")
        return ElicitResult(action="accept", content=content)

    # ------------------------------------------------------------------ roots, logging, progress

    async def list_roots(self, context: Any) -> Any:
        from mcp_types import ListRootsResult, Root

        roots = [Root(uri=path.as_uri(), name=path.name or str(path)) for path in self._roots.paths()]  # type: ignore[arg-type]
        return ListRootsResult(roots=roots)

    async def logging(self, params: Any) -> None:
        data = params.data if isinstance(params.data, str) else json.dumps(params.data, ensure_ascii=False)
        source = f" {params.logger}" if params.logger else ""
        line = self._log.redactor(f"[{params.level}]{source} {data}")  # for the log file, Roder's log and the call
        try:
            self._log.write(f"notifications/message {line}\n")
        except OSError as exc:
            log.debug("MCP server %r log: %s", self.config.name, exc)
        log.info("MCP server %r: %s", self.config.name, line)
        self.calls.emit(f"[{self.config.name}] {line}\n")

    def progress_for(self, ctx: ToolExecutionContext) -> Any:
        """A ``progress_callback`` for one tool call: each update onto that call's output."""

        async def progress(value: float, total: float | None, message: str | None) -> None:
            amount = f"{value:g}/{total:g}" if total else f"{value:g}"
            ctx.emit_output(f"progress {amount}{': ' + message if message else ''}\n")

        return progress
