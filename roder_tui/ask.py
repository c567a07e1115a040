"""One-shot ask mode: ``roder -p "question"``, optionally with piped stdin attached.

Never imports Textual. Headless runs never ask anyone: calls that would need approval are denied
with a message saying how to allow them, and the folder is not trusted unless ``--trust``.
Exit codes: 0 success, 1 the turn failed or was interrupted, 2 usage error.

When this user's background host (``roder serve``) runs for this folder with the same settings,
the turn is handed to it over its unix socket and the answer streams back: no runtime to build,
no extensions to load. The output and exit codes are the same; the thread runs headless there
too. A host started elsewhere, with other flags, an older config file or other provider keys in
the environment is not used (``roder_tui.host.incompatibility``); ``RODER_NO_HOST=1`` skips it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from roder_core.errors import RoderError
from roder_core.ir import AgentMessageItem, Mode, ToolResultItem, Turn, Usage
from roder_core.server.errors import INVALID_PARAMS, RUNTIME_ERROR, RpcError
from roder_core.server.fanout import Notification, NotificationQueue
from roder_core.server.protocol import (
    INITIALIZE,
    PROVIDERS_SELECT,
    SESSION_GET,
    THREAD_CLOSE,
    THREAD_LIST,
    THREAD_RESUME,
    THREAD_START,
    TURN_INTERRUPT,
    TURN_START,
    ClientInfo,
    InitializeParams,
    InputItem,
    ProvidersSelectParams,
    SessionGetParams,
    ThreadCloseParams,
    ThreadListParams,
    ThreadResumeParams,
    ThreadStartParams,
    TurnInterruptParams,
    TurnStartParams,
)
from roder_core.threads.events import AgentMessageDelta, ItemCompleted, ModelRetrying, ThreadStarted, TurnCompleted
from roder_tui.startup import end_startup
from roder_tui.terminal_text import json_line

if TYPE_CHECKING:
    from roder_core.server.app_client import AppClient

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
MOCK_HINT = (
    "roder: no provider configured, using the offline mock model. Store a key with "
    "`roder providers login PROVIDER` (e.g. anthropic, openai), set OPENAI_API_KEY or "
    "ANTHROPIC_API_KEY, or add a [providers.NAME] table to config.toml (see docs/providers.md)."
)
#: Notifications one-shot mode may fall behind by before the stream is cut (it prints inline).
ASK_QUEUE_SIZE = 100_000


def _read_stdin(stream: TextIO) -> str | None:
    if stream is None or stream.isatty():
        return None
    data = stream.read()
    return data if data.strip() else None


def _prompt_of(args: argparse.Namespace) -> str:
    parts = [args.print_prompt or "", *args.prompt]
    return " ".join(p for p in parts if p).strip()


class Printer:
    """Writes events in the chosen output format as they happen.

    Text format streams the answer to a terminal as it arrives. When stdout is a pipe it prints
    each answer once complete instead, so a provider stream that broke and was retried with a
    different answer never leaves a discarded fragment in a script's input; on a terminal the
    restart is said on screen.
    """

    def __init__(self, fmt: str, out: TextIO, err: TextIO) -> None:
        self.fmt, self.out, self.err = fmt, out, err
        self.final_texts: list[str] = []
        self._stream_live = fmt == "text" and out.isatty()
        self._printed: dict[str, int] = {}
        self._ends_with_newline = True

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
        if text:
            self._ends_with_newline = text.endswith("\n")

    def on_event(self, event: Notification) -> None:
        if self.fmt == "stream-json":
            self._line({"type": event.method, **event.params()})
        if isinstance(event, AgentMessageDelta) and event.kind == "text" and self._stream_live:
            self._write(event.delta)
            self._printed[event.item_id] = self._printed.get(event.item_id, 0) + len(event.delta)
        elif isinstance(event, ItemCompleted):
            item = event.item
            if isinstance(item, AgentMessageItem):
                self._answer(item)
            elif isinstance(item, ToolResultItem) and isinstance(item.data, dict) and item.data.get("policy_denied"):
                self.err.write(f"roder: {item.text}\n")
        elif isinstance(event, ModelRetrying) and self.fmt == "text":
            self.err.write(f"roder: {event.notice()}\n")
            self.err.flush()

    def _answer(self, item: AgentMessageItem) -> None:
        if not item.text:
            if self._printed.pop(item.id, 0):  # a retried stream voided what was shown
                self._write("\n[the provider's stream broke; the answer restarts]\n")
            return
        self.final_texts.append(item.text)
        if self.fmt != "text":
            return
        shown = self._printed.pop(item.id, 0)
        self._write(item.text[shown:] if self._stream_live else item.text)
        if not self._ends_with_newline:
            self._write("\n")

    def _line(self, data: dict[str, Any]) -> None:
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
                    "usage": Usage().wire(),
                    "duration_ms": int((time.monotonic() - started) * 1000),
                    "stop_reason": None,
                    "error": reason,
                }
            )

    def result(self, turn: Turn, thread_id: str, model_calls: int, started: float) -> None:
        record = {
            "type": "result",
            "status": turn.status,
            "is_error": turn.status != "completed",
            "text": self.final_texts[-1] if self.final_texts else "",
            "thread_id": thread_id,
            "turn_id": turn.id,
            "turns": model_calls,
            "usage": turn.usage.wire(),
            # What the prompt cache saved, and what the turn cost with it (see docs/providers.md).
            "cache_read_tokens": turn.usage.cached_input_tokens,
            "cache_write_tokens": turn.usage.cache_write_tokens,
            "cost_usd": round(turn.usage.cost_usd, 6),
            "duration_ms": int((time.monotonic() - started) * 1000),
            "stop_reason": turn.stop_reason,
        }
        if turn.error is not None:
            record["error"] = turn.error.message
        if self.fmt in ("json", "stream-json"):
            self._line(record)


async def _open_thread(client: AppClient, args: argparse.Namespace, cwd: str) -> str | None:
    """The thread this run talks to: resumed (-r ID; a unique prefix is enough), the latest of
    this workspace (-c) or a new one. A resumed thread keeps its model unless --provider or
    --model say otherwise (the switch is recorded in the thread)."""
    if args.resume is not None:
        if not args.resume.strip():
            raise RoderError("-r needs a thread id with -p (`roder sessions list` shows them; the app opens a picker)")
        thread = (await client.call(THREAD_RESUME, ThreadResumeParams(thread_id=args.resume, include_turns=False))).thread
    elif args.continue_last:
        rows = (await client.call(THREAD_LIST, ThreadListParams(cwd=cwd, limit=1))).threads
        if not rows:
            return None
        thread = (await client.call(THREAD_RESUME, ThreadResumeParams(thread_id=rows[0].id, include_turns=False))).thread
    else:
        return (await client.call(THREAD_START, ThreadStartParams(model_provider=args.provider, model=args.model))).thread.id
    provider = args.provider or thread.provider
    if provider != thread.provider or (args.model and args.model != thread.model):
        await client.call(PROVIDERS_SELECT, ProvidersSelectParams(provider=provider, model=args.model, thread_id=thread.id))
    return thread.id


async def _ask(args: argparse.Namespace, prompt: str, attachments: list[InputItem], out: TextIO, err: TextIO) -> int:
    """Drive one turn through the control plane (the in-process app-server client)."""
    started_at = time.monotonic()
    from roder_tui.host import oneshot_host

    client: AppClient
    hosted = await oneshot_host(args)
    if hosted is not None:
        client, host_mode = hosted
    else:  # the runtime is imported only here: a host's client never loads it
        from roder_core.runtime.bootstrap import settings_from_args
        from roder_core.server.client import LocalAppClient

        client, host_mode = LocalAppClient.start(settings_from_args(args, interactive=False), persist_config=False), None
    async with client:
        info = await client.call(
            INITIALIZE, InitializeParams(client_info=ClientInfo(name="roder-ask"), include_method_groups=False)
        )
        end_startup()
        if info.fell_back_to_mock:
            err.write(MOCK_HINT + "\n")
        for warning in info.warnings:
            err.write(f"roder: {warning}\n")
        # One-shot mode drives one thread (and its subagents), so in process every notification
        # belongs to it; on a shared host, other clients' threads are filtered out.
        events = client.subscribe(maxsize=ASK_QUEUE_SIZE)
        printer = Printer(args.output_format, out, err)
        thread_id: str | None = None
        already_open: set[str] = set()
        try:
            if client.shared:
                already_open = set((await client.call(SESSION_GET, SessionGetParams())).open_threads)
            thread_id = await _open_thread(client, args, info.cwd)
            if thread_id is None:
                err.write("roder: no earlier thread in this folder to continue\n")
                return EXIT_USAGE
            if host_mode is not None:  # as headless as in process, in the mode it would have had
                from roder_core.server.protocol_attach import THREAD_HEADLESS, ThreadHeadlessParams

                await client.call(THREAD_HEADLESS, ThreadHeadlessParams(thread_id=thread_id, mode=Mode(host_mode)))
            prompt = await _expand_command(client, prompt)
            turn_id = (
                await client.call(TURN_START, TurnStartParams(thread_id=thread_id, prompt=prompt, input=attachments))
            ).turn.id
        except RpcError as exc:
            if exc.code != RUNTIME_ERROR:
                raise  # a wrong flag or an unknown thread id: a usage error
            # The run was right but could not start (another process holds the thread, say).
            printer.failure(exc.message, thread_id, started_at)
            err.write(f"roder: {exc.message}\n")
            return EXIT_FAILED
        loop = asyncio.get_running_loop()
        interrupt = TurnInterruptParams(thread_id=thread_id)
        loop.add_signal_handler(signal.SIGINT, lambda: asyncio.ensure_future(client.call(TURN_INTERRUPT, interrupt)))
        try:
            turn = await _follow(events, printer, turn_id, thread_id if client.shared else None)
        finally:
            loop.remove_signal_handler(signal.SIGINT)
            if client.shared and thread_id not in already_open:  # let `roder -c` anywhere take it on
                with contextlib.suppress(RpcError, RoderError):
                    await client.call(THREAD_CLOSE, ThreadCloseParams(thread_id=thread_id))
        printer.result(turn, thread_id, turn.model_calls, started_at)
        if turn.status != "completed":
            reason = turn.error.message if turn.error else turn.status
            err.write(f"roder: turn {turn.status}: {reason}\n")
            return EXIT_FAILED
        return EXIT_OK


async def _expand_command(client: AppClient, prompt: str) -> str:
    """A prompt that starts with a custom command, a skill or an MCP prompt (``/review x``,
    ``/mcp__github__pr 12``) becomes its expansion; app commands (``/new``) make no sense in a
    one-shot run and are refused; any other text (``/etc/hosts: what is this?``) is sent as is."""
    if not prompt.startswith("/"):
        return prompt
    from roder_core.customization.slash_commands import parse_invocation
    from roder_core.server.protocol_features import COMMANDS_EXPAND, CommandsExpandParams  # only for "/..." prompts

    name, arguments = parse_invocation(prompt)
    try:
        expansion = await client.call(COMMANDS_EXPAND, CommandsExpandParams(name=name, arguments=arguments))
    except RpcError as exc:
        if exc.code == INVALID_PARAMS and exc.message.startswith("unknown command"):
            return prompt
        raise
    if expansion.kind == "builtin":
        raise RoderError(f"/{name} is an app command; -p runs prompts, custom commands, skills and MCP prompts")
    return expansion.text


async def _follow(events: NotificationQueue, printer: Printer, turn_id: str, thread_id: str | None = None) -> Turn:
    """Print notifications until the turn completes; returns the completed turn. With
    ``thread_id`` (a shared host), only that thread's and its subagents' notifications."""
    family = {thread_id}
    async for event in events:
        if thread_id is not None:
            if isinstance(event, ThreadStarted) and event.thread.parent is not None and event.thread.parent.thread_id in family:
                family.add(event.thread.id)
            if getattr(event, "thread_id", thread_id) not in family:
                continue
        printer.on_event(event)
        if isinstance(event, TurnCompleted) and event.turn.id == turn_id:
            return event.turn
    raise RoderError("the runtime stopped before the turn completed")


def run_ask(args: argparse.Namespace, stdin: TextIO | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    stdin = sys.stdin if stdin is None else stdin
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    prompt = _prompt_of(args)
    piped = _read_stdin(stdin)
    if not prompt and piped is None:
        err.write("roder: -p needs a prompt (as an argument or on stdin)\n")
        return EXIT_USAGE
    attachments = [InputItem(type="file", name="stdin", text=piped)] if piped is not None and prompt else []
    if prompt:  # `roder -p "what is in @shot.png?"`: the picture goes with the prompt
        from roder_tui.media_input import image_inputs

        attachments += image_inputs(prompt, Path.cwd())
    if not prompt:
        prompt = piped or ""
    try:
        return asyncio.run(_ask(args, prompt, attachments, out, err))
    except Exception as exc:
        if not isinstance(exc, (RoderError, RpcError, *_startup_errors())):
            raise
        err.write(f"roder: {exc}\n")
        return EXIT_USAGE


def _startup_errors() -> tuple[type[Exception], ...]:
    """Errors of building a runtime (imported when one was raised, not on every start)."""
    from roder_core.kernel.registry import RegistryError
    from roder_core.settings.config import ConfigError

    return RegistryError, ConfigError
