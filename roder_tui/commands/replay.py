"""``roder replay ID --provider P --model M``: re-run a thread's user turns against another model.

The prompts of the original turns (with their attachments) are sent, in order, into a new thread
in the original workspace (``thread/start``, ``turn/start`` through an in-process client, waiting
for each ``turn/completed``); tools run as in any headless run (``--mode`` decides what may change;
nothing is ever approved by a person). For each turn the final answers and the sequence of tool
calls are compared and the differences printed. The new thread records what it replays (custom
state ``roder.replay``) and can be inspected with ``roder sessions show``.
Exit codes: 0 every turn replayed, 1 a replayed turn failed, 2 usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roder_core.errors import RoderError
from roder_core.ir import AgentMessageItem, Thread, ToolCallItem, Turn, UserMessageItem
from roder_core.runtime.bootstrap import settings_from_args
from roder_core.server.app_client import AppClient
from roder_core.server.errors import RpcError
from roder_core.server.fanout import NotificationQueue
from roder_core.server.protocol import (
    INITIALIZE,
    THREAD_READ,
    THREAD_START,
    TURN_START,
    ClientInfo,
    InitializeParams,
    InputItem,
    ThreadReadParams,
    ThreadStartParams,
    TurnStartParams,
)
from roder_core.server.protocol_media import MEDIA_READ, MediaReadParams
from roder_core.server.protocol_sessions import THREAD_CUSTOM_SET, THREAD_FIND, ThreadCustomSetParams, ThreadFindParams
from roder_core.threads.events import TurnCompleted
from roder_tui.cli import add_runtime_flags
from roder_tui.commands.control import local_client

#: Lines of an answer diff printed per turn.
DIFF_LINES = 40


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", help="thread to replay (id or unambiguous prefix)")
    parser.add_argument("--json", action="store_true", help="print the comparison as one JSON object")
    add_runtime_flags(parser)


def final_answer(turn: Turn) -> str:
    return next((i.text for i in reversed(turn.items) if isinstance(i, AgentMessageItem) and i.text), "")


def tool_sequence(turn: Turn) -> list[str]:
    return [i.name for i in turn.items if isinstance(i, ToolCallItem)]


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


@dataclass
class TurnComparison:
    index: int
    prompt: str
    original: Turn
    replay: Turn
    diff: list[str] = field(default_factory=list)

    @property
    def same_answer(self) -> bool:
        return _same(final_answer(self.original), final_answer(self.replay))

    @property
    def same_tools(self) -> bool:
        return tool_sequence(self.original) == tool_sequence(self.replay)

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "prompt": self.prompt,
            "status": self.replay.status,
            "sameAnswer": self.same_answer,
            "sameTools": self.same_tools,
            "original": {
                "answer": final_answer(self.original),
                "tools": tool_sequence(self.original),
                "status": self.original.status,
            },
            "replay": {
                "answer": final_answer(self.replay),
                "tools": tool_sequence(self.replay),
                "status": self.replay.status,
                "turnId": self.replay.id,
            },
        }

    def lines(self) -> list[str]:
        head = " ".join(self.prompt.split())[:60]
        verdict = "same answer" if self.same_answer else "answer differs"
        if self.replay.status != "completed":
            verdict += f" (replay {self.replay.status})"
        tools = ", ".join(tool_sequence(self.replay)) or "none"
        if self.same_tools:
            out = [f"turn {self.index} ({head}): {verdict}; tools: {tools}"]
        else:
            before = ", ".join(tool_sequence(self.original)) or "none"
            out = [f"turn {self.index} ({head}): {verdict}; tools differ: {before} -> {tools}"]
        if not self.same_answer:
            diff = list(
                difflib.unified_diff(
                    final_answer(self.original).splitlines(),
                    final_answer(self.replay).splitlines(),
                    "original",
                    "replay",
                    lineterm="",
                )
            )
            out.extend("  " + line for line in diff[:DIFF_LINES])
            if len(diff) > DIFF_LINES:
                out.append(f"  ... {len(diff) - DIFF_LINES} more diff lines")
        return out


async def _input_items(client: AppClient, source: Thread, message: UserMessageItem) -> list[InputItem]:
    """The message's attachments as turn input: stored images are read back (media/read),
    text is sent as it was."""
    items = []
    for attachment in message.attachments:
        data = attachment.data_base64
        if data is None and attachment.media_id is not None:
            read = MediaReadParams(thread_id=source.id, media_id=attachment.media_id)
            data = (await client.call(MEDIA_READ, read)).data_base64
        if data is not None:
            items.append(InputItem(type="image", name=attachment.name, mime_type=attachment.mime_type, data_base64=data))
        else:
            items.append(
                InputItem(
                    type="file", name=attachment.name, mime_type=attachment.mime_type, text=attachment.text, path=attachment.path
                )
            )
    return items


async def _run_turn(client: AppClient, events: NotificationQueue, thread_id: str, message: TurnStartParams) -> Turn:
    """Start a turn, wait for its turn/completed, and read it back with its items."""
    started = (await client.call(TURN_START, message)).turn
    async for event in events:
        if isinstance(event, TurnCompleted) and event.turn.id == started.id:
            thread = (await client.call(THREAD_READ, ThreadReadParams(thread_id=thread_id, include_turns=True))).thread
            return next(turn for turn in thread.turns if turn.id == started.id)
    raise RoderError(f"the connection closed before turn {started.id} of {thread_id} completed")


async def replay(client: AppClient, wanted: str, provider: str, model: str) -> tuple[str, str, list[TurnComparison]]:
    """Replay the stored thread ``wanted`` on ``provider``/``model`` through the control plane;
    returns (source id, new thread id, one comparison per replayed turn)."""
    source_id = (await client.call(THREAD_FIND, ThreadFindParams(query=wanted))).thread_id
    source = (await client.call(THREAD_READ, ThreadReadParams(thread_id=source_id, include_turns=True))).thread
    prompts = [(n, t) for n, t in enumerate(source.turns, start=1) if t.items and isinstance(t.items[0], UserMessageItem)]
    if not prompts:
        raise RoderError(f"thread {source.id} has no user turns to replay")
    if not Path(source.cwd).is_dir():
        raise RoderError(f"the thread's folder {source.cwd} no longer exists; nothing can be replayed there")
    start = ThreadStartParams(
        cwd=source.cwd, model_provider=provider, model=model, title=f"Replay of {source.title or source.id}"
    )
    target = (await client.call(THREAD_START, start)).thread
    state = {"source": source.id, "provider": provider, "model": model}
    await client.call(THREAD_CUSTOM_SET, ThreadCustomSetParams(thread_id=target.id, namespace="roder.replay", data=state))
    events = client.subscribe(target.id)
    results = []
    try:
        for index, turn in prompts:
            first = turn.items[0]
            assert isinstance(first, UserMessageItem)
            message = TurnStartParams(thread_id=target.id, prompt=first.text, input=await _input_items(client, source, first))
            replayed = await _run_turn(client, events, target.id, message)
            results.append(TurnComparison(index, first.text, turn, replayed))
    finally:
        events.close()
    return source.id, target.id, results


async def _run(args: argparse.Namespace) -> int:
    async with local_client(settings_from_args(args, interactive=False)) as client:
        info = await client.call(INITIALIZE, InitializeParams(client_info=ClientInfo(name="roder-replay")))
        provider, model = info.provider, info.model
        try:
            source_id, target_id, results = await replay(client, args.id, provider, model)
        except RpcError as exc:
            raise RoderError(exc.message) from None
    failed = any(r.replay.status != "completed" for r in results)
    differ = sum(1 for r in results if not (r.same_answer and r.same_tools))
    if args.json:
        print(
            json.dumps(
                {
                    "source": source_id,
                    "replay": target_id,
                    "provider": provider,
                    "model": model,
                    "differ": differ,
                    "turns": [r.to_json() for r in results],
                },
                indent=2,
                ensure_ascii=False,
            )
        )
    else:
        print(f"replayed {len(results)} turn(s) of {source_id} with {provider}/{model} into {target_id}")
        for result in results:
            print("\n".join(result.lines()))
        print(f"{differ} of {len(results)} turn(s) differ")
    return 1 if failed else 0


def run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_run(args))
    except RoderError as exc:  # a configuration error rises to the CLI's one handler
        print(f"roder: {exc}", file=sys.stderr)
        return 2
