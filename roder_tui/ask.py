"""One-shot ask mode: ``roder -p "question"``, optionally with piped stdin attached.

Never imports Textual. Headless runs never ask anyone: calls that would need approval are denied
with a message saying how to allow them, and the folder is not trusted unless ``--trust``.
Exit codes: 0 success, 1 the turn failed or was interrupted, 2 usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from typing import Any, TextIO

from roder_core.bootstrap import settings_from_args, start_runtime
from roder_core.config import ConfigError
from roder_core.errors import RoderError
from roder_core.events import AgentMessageDelta, ItemCompleted, RuntimeEvent
from roder_core.ir import AgentMessageItem, Attachment, ToolResultItem, Turn
from roder_core.registry import RegistryError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
MOCK_HINT = (
    "roder: no provider configured, using the offline mock model. Set OPENAI_API_KEY or "
    "ANTHROPIC_API_KEY, or add a [providers.NAME] table to config.toml (see README)."
)


def _read_stdin(stream: TextIO) -> str | None:
    if stream is None or stream.isatty():
        return None
    data = stream.read()
    return data if data.strip() else None


def _prompt_of(args: argparse.Namespace) -> str:
    parts = [args.print_prompt or "", *args.prompt]
    return " ".join(p for p in parts if p).strip()


class Printer:
    """Writes events in the chosen output format as they happen."""

    def __init__(self, fmt: str, out: TextIO, err: TextIO) -> None:
        self.fmt, self.out, self.err = fmt, out, err
        self.final_texts: list[str] = []
        self._streamed_any = False
        self._ends_with_newline = True

    def on_event(self, event: RuntimeEvent) -> None:
        if self.fmt == "stream-json":
            self._line({"type": event.method, **event.params()})
        if isinstance(event, AgentMessageDelta) and event.kind == "text" and self.fmt == "text":
            self.out.write(event.delta)
            self.out.flush()
            self._streamed_any = True
            self._ends_with_newline = event.delta.endswith("\n")
        elif isinstance(event, ItemCompleted):
            item = event.item
            if isinstance(item, AgentMessageItem) and item.text:
                self.final_texts.append(item.text)
                if self.fmt == "text" and not self._ends_with_newline:
                    self.out.write("\n")
                    self._ends_with_newline = True
            elif isinstance(item, ToolResultItem) and isinstance(item.data, dict) and item.data.get("policy_denied"):
                self.err.write(f"roder: {item.text}\n")

    def _line(self, data: dict[str, Any]) -> None:
        self.out.write(json.dumps(data, ensure_ascii=False) + "\n")
        self.out.flush()

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
            "duration_ms": int((time.monotonic() - started) * 1000),
            "stop_reason": turn.stop_reason,
        }
        if turn.error is not None:
            record["error"] = turn.error.message
        if self.fmt in ("json", "stream-json"):
            self._line(record)


async def _ask(args: argparse.Namespace, prompt: str, attachments: list[Attachment], out: TextIO, err: TextIO) -> int:
    started_at = time.monotonic()
    started = start_runtime(settings_from_args(args, interactive=False))
    runtime = started.runtime
    if started.fell_back_to_mock:
        err.write(MOCK_HINT + "\n")
    for skipped in started.distribution.skipped:
        err.write(f"roder: extension {skipped.source} not loaded: {skipped.reason}\n")
    # One-shot mode drives exactly one thread, so every event belongs to it.
    printer = Printer(args.output_format, out, err)
    remove = runtime.bus.add_listener(printer.on_event)
    try:
        if args.resume:
            thread = await runtime.resume_thread(args.resume)
        elif args.continue_last:
            rows = await runtime.list_threads(cwd=str(runtime.options.cwd), limit=1)
            if not rows:
                err.write("roder: no earlier thread in this folder to continue\n")
                return EXIT_USAGE
            thread = await runtime.resume_thread(rows[0].id)
        else:
            thread = await runtime.start_thread()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, lambda: asyncio.ensure_future(runtime.interrupt(thread.id)))
        turn = await runtime.run_turn(thread.id, prompt, attachments)
        loop.remove_signal_handler(signal.SIGINT)
        printer.result(turn, thread.id, turn.model_calls, started_at)
        if turn.status != "completed":
            reason = turn.error.message if turn.error else turn.status
            err.write(f"roder: turn {turn.status}: {reason}\n")
            return EXIT_FAILED
        return EXIT_OK
    finally:
        remove()
        await runtime.close()


def run_ask(args: argparse.Namespace, stdin: TextIO | None = None, out: TextIO | None = None,
            err: TextIO | None = None) -> int:
    stdin = sys.stdin if stdin is None else stdin
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    prompt = _prompt_of(args)
    piped = _read_stdin(stdin)
    if not prompt and piped is None:
        err.write("roder: -p needs a prompt (as an argument or on stdin)\n")
        return EXIT_USAGE
    attachments = [Attachment(name="stdin", text=piped)] if piped is not None and prompt else []
    if not prompt:
        prompt = piped or ""
    try:
        return asyncio.run(_ask(args, prompt, attachments, out, err))
    except (RoderError, RegistryError, ConfigError) as exc:
        err.write(f"roder: {exc}\n")
        return EXIT_USAGE
