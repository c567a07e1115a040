"""Secrets split across chunks: the stream redactor on its own (any chunking gives the whole-text
redaction, nothing is held without a reason) and through a real Runtime (model deltas,
checkpoints and tool output never show a secret, not even half of one; item events are snapshots
of the moment they were emitted)."""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from roder_ext_mock import MockEngine

import roder_core.turn.runner as turn_module
from roder_core import Tool, ToolResult
from roder_core.brokers.redaction import FORMAT_MARKER, MAX_FORMAT_HOLD, PEM_BEGIN, TOKEN_STARTS
from roder_core.brokers.secrets import SecretRedactor
from roder_core.ir import AgentMessageItem, ReasoningItem
from roder_core.threads.events import AgentMessageDelta, ItemCompleted, ItemStarted, ItemUpdated, ToolOutputDelta
from tests.builders import EVENT_TIMEOUT
from tests.core.harness import call, make_runtime

KEY = "Zq9xTt4Lm2Pp8Rr1Vv6Nn3"  # no token format: only knowing the value can catch it
STORED = "sk-or-v1-" + "k7" * 20
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIabc\ndef\n-----END RSA PRIVATE KEY-----"
TOKENS = [
    "ghp_" + "A" * 36,
    "AKIA" + "B" * 16,
    "sk-ant-" + "c" * 25,
    "xoxb-1234567890ab",
    "AIza" + "d" * 35,
    "github_pat_" + "E" * 40,
    PEM,
]
#: What must never be shown: the values, and the secret part of every token (after its start).
NEVER = [KEY, STORED, "A" * 36, "B" * 16, "c" * 25, "1234567890ab", "d" * 35, "E" * 40, "MIIabc"]
#: A token split inside its start ("s" | "k-ant-...") shows the start's first characters before
#: the marker: they name the format, not the secret.
STARTS = sorted({s[:k] for s in (*TOKEN_STARTS, PEM_BEGIN) for k in range(1, len(s))}, key=len, reverse=True)
NOISE = ["hello", " ", "\n", "-", "s", "sk", "gh", "A", "task-", "Zq9x", "k7", "---", "foo_bar", "."]


def redactor() -> SecretRedactor:
    found = SecretRedactor({"MY_SERVICE_API_KEY": KEY})
    found.add("openrouter key", STORED)
    return found


def random_text(rng: random.Random) -> str:
    parts: list[str] = []
    for _ in range(rng.randint(1, 30)):
        roll = rng.random()
        if roll < 0.1:
            parts.append(rng.choice([KEY, STORED]))
        elif roll < 0.17:
            parts.append(f" {rng.choice(TOKENS)} ")
        else:
            parts.append(rng.choice(NOISE))
    return "".join(parts)


def same_but_starts(shown: str, whole: str) -> bool:
    """``whole`` is ``shown`` with, before some markers, the beginning of a token start left out."""
    pieces = shown.split(FORMAT_MARKER)
    pattern = ""
    for piece in pieces[:-1]:
        options = [re.escape(piece)] + [re.escape(piece[: -len(p)]) for p in STARTS if piece.endswith(p)]
        pattern += "(?:" + "|".join(options) + ")" + re.escape(FORMAT_MARKER)
    return re.fullmatch(pattern + re.escape(pieces[-1]), whole) is not None


def chunked(data: Any, rng: random.Random) -> list[Any]:
    pieces, index = [], 0
    while index < len(data):
        size = rng.choice([1, 2, 3, 5, 8, 13, 40, 200])
        pieces.append(data[index : index + size])
        index += size
    return pieces


@pytest.mark.parametrize("binary", [False, True])
def test_any_chunking_gives_the_whole_text_redaction(binary: bool) -> None:
    rng = random.Random(4)
    secrets = redactor()
    for _ in range(1500):
        text = random_text(rng)
        stream = secrets.byte_stream() if binary else secrets.stream()
        data = text.encode() if binary else text
        shown = [stream.feed(piece) for piece in chunked(data, rng)] + [stream.flush()]
        joined = b"".join(shown).decode() if binary else "".join(shown)
        assert same_but_starts(joined, secrets.redact(text)), text
        assert not any(secret in joined for secret in NEVER)
    one_piece = secrets.stream()
    assert one_piece.feed(f"a {TOKENS[0]} b {KEY}") + one_piece.flush() == secrets.redact(f"a {TOKENS[0]} b {KEY}")


@pytest.mark.parametrize("binary", [False, True])
def test_an_encoded_secret_wrapped_into_lines_is_redacted_in_any_chunking(binary: bool) -> None:
    """``base64`` wraps at 76 columns and ``xxd -p`` at 60: a command's live output (a byte
    stream) hides the encoded value cut by those line breaks as the whole text does."""
    import base64
    import textwrap

    secret = "Zq7wXk2mPd9vLr4tNb8yHc3sFj6gQe1u"
    secrets = SecretRedactor({"MY_API_TOKEN": secret})
    data = f"# config header padding line........\nAPI_TOKEN={secret}\n".encode()
    texts = [base64.encodebytes(data).decode(), "\n".join(textwrap.wrap(data.hex(), 60)) + "\n"]
    rng = random.Random(7)
    for text in texts:
        assert "[redacted:MY_API_TOKEN]" in secrets.redact(text)
        for _ in range(50):
            stream = secrets.byte_stream() if binary else secrets.stream()
            pieces = chunked(text.encode() if binary else text, rng)
            shown = [stream.feed(piece) for piece in pieces] + [stream.flush()]
            joined = b"".join(shown).decode() if binary else "".join(shown)
            assert joined == secrets.redact(text), text


def test_nothing_is_held_without_a_possible_secret() -> None:
    stream = redactor().stream()
    words = ["The", "build", "passed", "on", "the", "second", "try;", "nothing", "else", "changed", "in", "the", "tree."]
    for word in words:
        assert stream.feed(word + " ") == word + " "  # no latency: every chunk shown at once
        assert not stream.held
    assert stream.feed("key Zq9xTt") == "key "  # the start of the key waits for the next chunk
    assert stream.held == len("Zq9xTt")
    assert stream.feed("4Lm2") == ""
    assert stream.feed("!!!") == "Zq9xTt4Lm2!!!"  # it was not the key after all: shown, in order
    assert stream.feed(KEY[:7]) == ""
    assert stream.feed(KEY[7:] + "!") == "[redacted:MY_SERVICE_API_KEY]!"
    formats_only = SecretRedactor().stream()  # no secret known: nothing waits but a token's start
    chunks = ["it's", " well-", "known ", "s", "k-", "xyz ", "A", "KI", "A", "B" * 16, " done"]
    shown = [formats_only.feed(chunk) for chunk in chunks] + [formats_only.flush()]
    # "s" and "AKI" are shown at once; "sk-" waits for its word to end (not a token: shown);
    # "AKIA" waits too, and its secret part never shows.
    assert shown == ["it's", " well-", "known ", "s", "", "k-xyz ", "A", "KI", "", "", "[redacted] done", ""]


def test_a_token_split_inside_its_start_still_hides_its_secret_part() -> None:
    stream = SecretRedactor().stream()
    shown = [stream.feed(chunk) for chunk in ("key: s", "k-ant-", "c" * 25, " end")] + [stream.flush()]
    assert shown == ["key: s", "", "", "[redacted] end", ""]


def test_a_value_learned_mid_stream_is_caught_from_the_next_chunk() -> None:
    secrets = SecretRedactor()
    stream = secrets.stream()
    assert stream.feed("before ") == "before "
    secrets.add("anthropic key", "late-key-1234567890")
    assert stream.feed("x late-key-12") == "x "
    assert stream.feed("34567890 y") + stream.flush() == "[redacted:anthropic key] y"


def test_an_unterminated_key_block_is_held_only_up_to_the_limit() -> None:
    stream = SecretRedactor().stream()
    assert stream.feed("see -----BEGIN OPENSSH PRIVATE KEY-----\n") == "see "
    body = "A" * 70 + "\n"
    shown = "".join(stream.feed(body) for _ in range(MAX_FORMAT_HOLD // len(body) + 2))
    assert shown.startswith("-----BEGIN OPENSSH PRIVATE KEY-----")  # not worth stalling forever


def test_releasable_leaves_out_an_end_that_may_begin_a_secret() -> None:
    secrets = redactor()
    assert secrets.releasable(f"one {KEY} two {KEY[:9]}") == "one [redacted:MY_SERVICE_API_KEY] two "
    assert secrets.releasable("plain text") == "plain text"


# ---------------------------------------------------------------------------- through a Runtime


class HalvesTool(Tool):
    """Prints the key in two writes, like a command whose output arrives in two chunks."""

    name = "halves"
    description = "Print a value in two pieces."
    parameters = {"type": "object", "properties": {}}
    read_only = True
    kind = "read"

    async def execute(self, ctx: Any, call: Any) -> ToolResult:
        ctx.emit_output(f"value: {KEY[:10]}")
        ctx.emit_output(f"{KEY[10:]} ok\nnext: {KEY[:5]}")  # the second one ends mid-key
        return ToolResult(id=call.id, name=call.name, text="printed")


async def test_runtime_deltas_checkpoints_and_tool_output_never_show_a_secret(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(turn_module, "CHECKPOINT_MIN_SECONDS", 0.0)  # a snapshot at every delta
    monkeypatch.setattr(turn_module, "CHECKPOINT_MAX_SECONDS", 0.0)
    text = f"Your key is {KEY} and the stored one is {STORED}; both again: {KEY}{STORED}. Bye."
    runtime = make_runtime(
        workspace,
        [
            {"reasoning": f"think {KEY} over", "text": text, "chunk_size": 4, "tool_calls": [call("halves")]},
            {"text": f"ends with half a key {KEY[:8]}", "chunk_size": 3},
        ],
        tools=[HalvesTool()],
        redactor=redactor(),
    )
    thread = await runtime.start_thread()
    queue = runtime.bus.subscribe()  # not read until the turn is over: transports lag like this
    turn = await runtime.run_turn(thread.id, "go")
    assert turn.status == "completed"
    events = []
    while not queue.queue.empty():
        events.append(queue.queue.get_nowait())
    wire = "\n".join(e.model_dump_json() for e in events if e is not None)
    for secret in (KEY, STORED):
        half = len(secret) // 2
        assert secret[:half] not in wire
        assert secret[half:] not in wire  # not even half of one
    completed = {e.item.id: e.item for e in events if isinstance(e, ItemCompleted)}
    streams: dict[tuple[str, str], str] = {}
    for event in events:
        if isinstance(event, AgentMessageDelta):
            streams[(event.item_id, event.kind)] = streams.get((event.item_id, event.kind), "") + event.delta
    texts = [item.text for item in completed.values() if isinstance(item, AgentMessageItem)]
    assert texts == [
        "Your key is [redacted:MY_SERVICE_API_KEY] and the stored one is [redacted:openrouter key]; both again: "
        "[redacted:MY_SERVICE_API_KEY][redacted:openrouter key]. Bye.",
        f"ends with half a key {KEY[:8]}",  # a whole text that holds no secret is shown as it is
    ]
    for (item_id, kind), streamed in streams.items():  # deltas add up to the final text, in order
        item = completed[item_id]
        assert streamed == (item.text if kind == "text" else item.text + item.summary)
    assert any(isinstance(i, ReasoningItem) and "[redacted:MY_SERVICE_API_KEY]" in i.text for i in completed.values())
    output = "".join(e.delta for e in events if isinstance(e, ToolOutputDelta))
    assert output == f"value: [redacted:MY_SERVICE_API_KEY] ok\nnext: {KEY[:5]}"
    last_output = max(i for i, e in enumerate(events) if isinstance(e, ToolOutputDelta))
    first_result = min(i for i, e in enumerate(events) if isinstance(e, ItemStarted) and e.item.type == "toolResult")
    assert last_output < first_result  # the held end of the output comes before the result
    updates = [e.item for e in events if isinstance(e, ItemUpdated) and isinstance(e.item, AgentMessageItem)]
    assert updates
    assert all(completed[u.id].text.startswith(u.text) for u in updates)
    started = [e.item for e in events if isinstance(e, ItemStarted) and isinstance(e.item, AgentMessageItem | ReasoningItem)]
    assert started
    assert all(item.text == "" for item in started)  # as emitted, not as grown later


async def test_an_interrupted_stream_still_shows_its_held_end_redacted(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    handled = asyncio.Event()
    stream_turn = MockEngine.stream_turn

    async def counted(engine: MockEngine, ctx: Any, request: Any) -> AsyncIterator[Any]:
        """The mock's stream, telling the test once the runner has handled the key's first two
        chunks (a generator resumes only when its consumer asks for the next event), then going
        quiet mid-key, as a stalled model would, until the interrupt ends the turn."""
        count = 0
        async for event in stream_turn(engine, ctx, request):
            yield event
            count += 1
            if count == 4:  # "part", "ial ", then two of the key's chunks
                handled.set()
                await asyncio.Event().wait()

    monkeypatch.setattr(MockEngine, "stream_turn", counted)
    runtime = make_runtime(workspace, [{"text": f"partial {KEY[:12]}", "chunk_size": 4}], redactor=redactor())
    thread = await runtime.start_thread()
    shown: list[str] = []
    runtime.bus.add_listener(lambda e: shown.append(e.delta) if isinstance(e, AgentMessageDelta) else None)
    await runtime.start_turn(thread.id, "go")
    async with asyncio.timeout(EVENT_TIMEOUT):
        await handled.wait()
    assert "".join(shown) == "partial "  # the key's chunks arrived and are held
    live = [i.text for i in runtime.thread(thread.id).items() if isinstance(i, AgentMessageItem)]
    assert live
    assert all(KEY[:4] not in text for text in live)  # thread/read mid-stream: nothing raw
    await runtime.interrupt(thread.id)
    turn = await runtime.wait_turn(thread.id)
    assert turn.status == "interrupted"
    final = [i.text for i in runtime.thread(thread.id).items() if isinstance(i, AgentMessageItem)]
    assert "".join(shown) == final[0]
    assert final[0].startswith("partial ")
    assert len(final[0]) > len("partial ")
