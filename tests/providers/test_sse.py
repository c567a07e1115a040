"""SSE framing: every chunking of a stream yields the same events, in the decoder and through
the real engine over HTTP from the loopback model server."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from roder_core.ir import CompletedEvent
from roder_core.providers.sse import SSEDecoder, SSEEvent
from roder_core.testing.fake_server import FakeModelServer
from tests.providers.helpers import collect, make_engine, make_request, text_of

STREAM = (
    b"\xef\xbb\xbf: keep-alive comment\n"
    b'event: message_start\ndata: {"a": 1}\n\n'
    b"data: first line\r\ndata: second line \xc3\xa9\r\n\r\n"
    b"id: 7\revent: ping\rdata:no space\r\r"
    b"retry: 1500\ndata: [DONE]\n\n"
    b"event: lonely\n\n"
    b"data: truncated at the end"
)
EXPECTED = [
    SSEEvent("message_start", '{"a": 1}'),
    SSEEvent("message", "first line\nsecond line é"),
    SSEEvent("ping", "no space", id="7"),
    SSEEvent("message", "[DONE]", id="7", retry=1500),
]


def decode(chunks: list[bytes]) -> tuple[list[SSEEvent], bool]:
    decoder = SSEDecoder()
    events = [event for chunk in chunks for event in decoder.feed(chunk)]
    return events, decoder.pending


def test_whole_stream_gives_every_complete_event_and_reports_the_truncated_one() -> None:
    events, pending = decode([STREAM])
    assert events == EXPECTED
    assert pending  # "data: truncated at the end" never saw its blank line


def test_byte_by_byte_is_the_same() -> None:
    assert decode([STREAM[i : i + 1] for i in range(len(STREAM))]) == (EXPECTED, True)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=30))
def test_any_chunking_is_the_same(cuts: list[int]) -> None:
    points = sorted(set(cuts))
    chunks = [STREAM[a:b] for a, b in zip([0, *points], [*points, len(STREAM)], strict=True)]
    assert decode(chunks) == (EXPECTED, True)


def test_cr_lf_split_across_chunks_is_one_line_ending() -> None:
    events, _ = decode([b"data: x\r", b"\n\r", b"\ndata: y\n\n"])
    assert events == [SSEEvent("message", "x"), SSEEvent("message", "y")]


def test_unknown_fields_and_colonless_lines_are_ignored() -> None:
    events, pending = decode([b"garbage line\nfoo: bar\ndata: ok\n\n"])
    assert events == [SSEEvent("message", "ok")]
    assert not pending


def test_a_cut_at_every_byte_offset_is_the_same() -> None:
    """The stream read in two pieces, cut at each offset in turn: inside a field name, a value,
    a UTF-8 character, between the ``\\r`` and ``\\n`` of a line end and between two events."""
    for cut in range(len(STREAM) + 1):
        assert decode([STREAM[:cut], STREAM[cut:]]) == (EXPECTED, True), cut


#: One chat-completions answer as a model server sends it: a text delta with a two-byte
#: character, a finish event with usage, the end marker; CRLF line ends in the middle event.
ANSWER_STREAM = (
    'data: {"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":"Caf\u00e9 ok"}}]}\n\n'
    'data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],'
    '"usage":{"prompt_tokens":3,"completion_tokens":2}}\r\n\r\n'
    "data: [DONE]\n\n"
)


async def test_an_event_split_across_reads_at_every_byte_offset_through_the_loopback_server() -> None:
    """The real engine over HTTP, the body cut into two chunks at every byte offset (each cut a
    request of its own): the same text, the same finish, whatever the cut."""
    size = len(ANSWER_STREAM.encode())
    steps: list[dict[str, object]] = [{"raw": ANSWER_STREAM, "split_at": cut} for cut in range(1, size)]
    async with FakeModelServer(steps) as server:
        engine = make_engine("chat-completions", server.base_url)
        try:
            for cut in range(1, size):
                events = await collect(engine, make_request())
                assert text_of(events) == "Café ok", cut
                assert isinstance(events[-1], CompletedEvent), (cut, events[-1])
                assert events[-2].usage.output_tokens == 2, cut  # type: ignore[union-attr]
        finally:
            await engine.aclose()
    assert len(server.calls) == size - 1
