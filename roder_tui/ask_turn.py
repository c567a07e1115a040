"""One one-shot turn, driven and printed in the protocol's wire form (method names, camelCase
dicts): ``drive`` over a ``Session``, which is the in-process app server (``roder_tui.ask_local``)
or a running host (``roder_tui.ask_host``), and ``Printer`` for the output formats. One driver and
one printer for both, so a hosted run's output, exit codes and errors are an in-process run's.

Imports nothing but the standard library and Roder's error types: a hosted run loads no more.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Protocol, TextIO

from roder_core.errors import RoderError, retry_notice
from roder_core.server.errors import INVALID_PARAMS, RUNTIME_ERROR, RpcError
from roder_tui.docs_links import docs_page
from roder_tui.startup import end_startup

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
MOCK_HINT = (
    "roder: no provider configured, using the offline mock model. Store a key with "
    "`roder providers login PROVIDER` (e.g. anthropic, openai), set OPENAI_API_KEY or "
    f"ANTHROPIC_API_KEY, or add a [providers.NAME] table to config.toml (see `roder providers --help`, "
    f"or {docs_page('providers.md')})."
)
#: Notifications one-shot mode may fall behind by before the stream is cut (it prints inline).
ASK_QUEUE_SIZE = 100_000
#: ``Usage().wire()``: the usage of a run that failed before its turn began.
ZERO_USAGE: dict[str, Any] = {
    "inputTokens": 0,
    "outputTokens": 0,
    "cachedInputTokens": 0,
    "cacheWriteTokens": 0,
    "reasoningTokens": 0,
    "costUsd": 0.0,
    "estimated": False,
}

#: Notification methods the text and json formats act on (stream-json prints every one).
DELTA, ITEM_COMPLETED, RETRYING = "item/agentMessage/delta", "item/completed", "turn/retrying"
#: A runtime error outside the turn's own result (``kind`` "persistence": the thread was not saved).
ERROR = "error"
TURN_COMPLETED, THREAD_STARTED = "turn/completed", "thread/started"

Wire = dict[str, Any]


class Session(Protocol):
    """One run's connection to a runtime, in the protocol's wire form."""

    #: True for a host other clients share (its other threads' notifications are filtered out).
    shared: bool

    async def request(self, method: str, params: Wire | None = None) -> Any:
        """The method's wire result, or ``RpcError`` with the server's code and message."""

    def subscribe(self, wanted: Callable[[str], bool]) -> None:
        """Keep, from now on, the notifications whose method ``wanted`` accepts."""

    def events(self) -> AsyncIterator[tuple[str, Wire]]:
        """The kept notifications in order, as (method, params)."""

    def interrupting(self, thread_id: str) -> contextlib.AbstractContextManager[None]:
        """While open, Ctrl+C interrupts the thread's running turn (and does not end the run)."""


class Printer:
    """Writes notifications (wire form) in the chosen output format as they happen.

    Text format streams the answer to a terminal as it arrives. When stdout is a pipe it prints
    each answer once complete instead, so a provider stream that broke and was retried with a
    different answer never leaves a discarded fragment in a script's input; on a terminal the
    restart is said on screen.
    """

    def __init__(self, fmt: str, out: TextIO, err: TextIO, *, echo_errors: bool = True) -> None:
        self.fmt, self.out, self.err = fmt, out, err
        self.final_texts: list[str] = []
        #: Why the thread could not be saved, if it could not: the run then fails (exit 1).
        self.unsaved: str | None = None
        #: Whether ``error`` events are printed here: in process the runtime's log line already
        #: reached this stderr; a host's log does not.
        self._echo_errors = echo_errors
        self._stream_live = fmt == "text" and out.isatty()
        self._printed: dict[str, int] = {}
        self._ends_with_newline = True

    def wants(self, method: str) -> bool:
        """Whether ``on_event`` does anything with notifications of ``method``."""
        return self.fmt == "stream-json" or method in (DELTA, ITEM_COMPLETED, RETRYING, ERROR)

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
        if text:
            self._ends_with_newline = text.endswith("\n")

    def on_event(self, method: str, params: Mapping[str, Any]) -> None:
        if self.fmt == "stream-json":
            self._line({"type": method, **params})
        if method == DELTA and params.get("kind", "text") == "text" and self._stream_live:
            self._write(params["delta"])
            self._printed[params["itemId"]] = self._printed.get(params["itemId"], 0) + len(params["delta"])
        elif method == ITEM_COMPLETED:
            item = params["item"]
            data = item.get("data")
            if item.get("type") == "agentMessage":
                self._answer(item["id"], item.get("text", ""))
            elif item.get("type") == "toolResult" and isinstance(data, dict) and data.get("policy_denied"):
                self.err.write(f"roder: {item['text']}\n")
        elif method == ERROR and params.get("kind") == "persistence":
            self.unsaved = self.unsaved or str(params["message"])
            if self._echo_errors:
                self.err.write(f"roder: {params['message']}\n")
                self.err.flush()
        elif method == RETRYING and self.fmt == "text":
            notice = retry_notice(params["reason"], params["attempt"], params["maxAttempts"], params["wait"])
            self.err.write(f"roder: {notice}\n")
            self.err.flush()

    def _answer(self, item_id: str, text: str) -> None:
        if not text:
            if self._printed.pop(item_id, 0):  # a retried stream voided what was shown
                self._write("\n[the provider's stream broke; the answer restarts]\n")
            return
        self.final_texts.append(text)
        if self.fmt != "text":
            return
        shown = self._printed.pop(item_id, 0)
        self._write(text[shown:] if self._stream_live else text)
        if not self._ends_with_newline:
            self._write("\n")

    def _line(self, data: Mapping[str, Any]) -> None:
        from roder_tui.terminal_text import json_line  # the json formats only

        self.out.write(json_line(data) + "\n")
        self.out.flush()

    def failure(self, reason: str, thread_id: str | None, started: float) -> None:
        """The result of a run that failed before its turn began (json formats only)."""
        if self.fmt in ("json", "stream-json"):
            self._line(
                {
                    "type": "result",
                    "status": "failed",
                    "is_error": True,
                    "text": "",
                    "thread_id": thread_id,
                    "turn_id": None,
                    "turns": 0,
                    "usage": ZERO_USAGE,
                    "duration_ms": int((time.monotonic() - started) * 1000),
                    "stop_reason": None,
                    "error": reason,
                }
            )

    def result(self, turn: Mapping[str, Any], thread_id: str, started: float) -> None:
        """The result record of a completed turn (its wire form; json formats only)."""
        usage = turn.get("usage", ZERO_USAGE)
        record = {
            "type": "result",
            "status": turn["status"],
            "is_error": turn["status"] != "completed",
            "text": self.final_texts[-1] if self.final_texts else "",
            "thread_id": thread_id,
            "turn_id": turn["id"],
            "turns": turn.get("modelCalls", 0),
            "usage": usage,
            # What the prompt cache saved, and what the turn cost with it (see docs/providers.md).
            "cache_read_tokens": usage.get("cachedInputTokens", 0),
            "cache_write_tokens": usage.get("cacheWriteTokens", 0),
            "cost_usd": round(usage.get("costUsd", 0.0), 6),
            "duration_ms": int((time.monotonic() - started) * 1000),
            "stop_reason": turn.get("stopReason"),
        }
        if turn.get("error") is not None:
            record["error"] = turn["error"]["message"]
        elif self.unsaved is not None:
            record["is_error"], record["error"] = True, self.unsaved
        if self.fmt in ("json", "stream-json"):
            self._line(record)


async def _open_thread(session: Session, args: argparse.Namespace, cwd: str) -> str | None:
    """The thread this run talks to: resumed (-r ID; a unique prefix is enough), the latest of
    this workspace (-c) or a new one. A resumed thread keeps its model unless --provider or
    --model say otherwise (the switch is recorded in the thread)."""
    if args.resume is not None:
        if not args.resume.strip():
            raise RoderError("-r needs a thread id with -p (`roder sessions list` shows them; the app opens a picker)")
        thread = (await session.request("thread/resume", {"threadId": args.resume, "includeTurns": False}))["thread"]
    elif args.continue_last:
        rows = (await session.request("thread/list", {"cwd": cwd, "limit": 1}))["threads"]
        if not rows:
            return None
        thread = (await session.request("thread/resume", {"threadId": rows[0]["id"], "includeTurns": False}))["thread"]
    else:
        chosen = _present({"modelProvider": args.provider, "model": args.model})
        return str((await session.request("thread/start", chosen))["thread"]["id"])
    provider = args.provider or thread.get("provider", "")
    if provider != thread.get("provider", "") or (args.model and args.model != thread.get("model", "")):
        await session.request("providers/select", _present({"provider": provider, "model": args.model, "threadId": thread["id"]}))
    return str(thread["id"])


def _present(params: Wire) -> Wire:
    """Params without the unset ones (the server's defaults apply)."""
    return {name: value for name, value in params.items() if value is not None}


async def drive(
    session: Session,
    args: argparse.Namespace,
    prompt: str,
    attachments: list[Wire],
    out: TextIO,
    err: TextIO,
    *,
    headless_mode: str | None = None,
) -> int:
    """Drive one turn through the control plane; ``headless_mode`` makes the thread headless in
    that policy mode (a host's thread: in process, the runtime is built headless)."""
    started_at = time.monotonic()
    info = await session.request("initialize", {"clientInfo": {"name": "roder-ask"}, "includeMethodGroups": False})
    end_startup()
    if info.get("fellBackToMock"):
        err.write(MOCK_HINT + "\n")
    for warning in info.get("warnings", []):
        err.write(f"roder: {warning}\n")
    printer = Printer(args.output_format, out, err, echo_errors=session.shared)
    # One-shot mode drives one thread (and its subagents), so in process every notification
    # belongs to it; on a shared host, other clients' threads are filtered out.
    session.subscribe(lambda method: printer.wants(method) or method in (TURN_COMPLETED, THREAD_STARTED))
    thread_id: str | None = None
    already_open: set[str] = set()
    try:
        if session.shared:
            already_open = set((await session.request("session/get", {}))["openThreads"])
        thread_id = await _open_thread(session, args, info["cwd"])
        if thread_id is None:
            err.write("roder: no earlier thread in this folder to continue\n")
            return EXIT_USAGE
        if headless_mode is not None:  # as headless as in process, in the mode it would have had
            await session.request("thread/headless", {"threadId": thread_id, "headless": True, "mode": headless_mode})
        prompt = await _expand_command(session, prompt)
        started = await session.request("turn/start", {"threadId": thread_id, "prompt": prompt, "input": attachments})
        turn_id = started["turn"]["id"]
    except RpcError as exc:
        if exc.code != RUNTIME_ERROR:
            raise  # a wrong flag or an unknown thread id: a usage error
        # The run was right but could not start (another process holds the thread, say).
        printer.failure(exc.message, thread_id, started_at)
        err.write(f"roder: {exc.message}\n")
        return EXIT_FAILED
    try:
        with session.interrupting(thread_id):
            turn = await _follow(session, printer, turn_id, thread_id if session.shared else None)
    finally:
        if session.shared and thread_id not in already_open:  # let `roder -c` anywhere take it on
            with contextlib.suppress(RpcError, RoderError):
                await session.request("thread/close", {"threadId": thread_id})
    printer.result(turn, thread_id, started_at)
    if turn["status"] != "completed":
        reason = turn["error"]["message"] if turn.get("error") else turn["status"]
        # ("turn interrupted", not "turn interrupted: interrupted")
        err.write(f"roder: turn {turn['status']}{'' if reason == turn['status'] else f': {reason}'}\n")
        return EXIT_FAILED
    return EXIT_FAILED if printer.unsaved is not None else EXIT_OK


async def _expand_command(session: Session, prompt: str) -> str:
    """A prompt that starts with a custom command, a skill or an MCP prompt (``/review x``,
    ``/mcp__github__pr 12``) becomes its expansion; app commands (``/new``) make no sense in a
    one-shot run and are refused; any other text (``/etc/hosts: what is this?``) is sent as is."""
    if not prompt.startswith("/"):
        return prompt
    from roder_core.customization.slash_commands import parse_invocation  # only for "/..." prompts

    name, arguments = parse_invocation(prompt)
    try:
        expansion = await session.request("commands/expand", {"name": name, "arguments": arguments})
    except RpcError as exc:
        if exc.code == INVALID_PARAMS and exc.message.startswith("unknown command"):
            return prompt
        raise
    if expansion["kind"] == "builtin":
        raise RoderError(f"/{name} is an app command; -p runs prompts, custom commands, skills and MCP prompts")
    return str(expansion["text"])


async def _follow(session: Session, printer: Printer, turn_id: str, thread_id: str | None = None) -> Wire:
    """Print notifications until the turn completes; returns the completed turn (wire form).
    With ``thread_id`` (a shared host), only that thread's and its subagents' notifications."""
    family = {thread_id}
    async for method, params in session.events():
        if thread_id is not None:
            if method == THREAD_STARTED and (params["thread"].get("parent") or {}).get("threadId") in family:
                family.add(params["thread"]["id"])
            if params.get("threadId", thread_id) not in family:
                continue
        printer.on_event(method, params)
        if method == TURN_COMPLETED and params["turn"]["id"] == turn_id:
            turn: Wire = params["turn"]
            return turn
    raise RoderError("the runtime stopped before the turn completed")
