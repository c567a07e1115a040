"""Server-sent events framing (the WHATWG ``text/event-stream`` rules), fed bytes incrementally.

Every wire dialect streams SSE, so the framing lives here once. The decoder accepts any chunking
of the byte stream (a network read may end mid-line, mid-UTF-8 character or between ``\\r`` and
``\\n``) and yields the same events; tests check that property with random chunkings.
"""

from __future__ import annotations

from dataclasses import dataclass

_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event. ``event`` is ``"message"`` when the stream sent no ``event:`` line."""

    event: str
    data: str
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Turns chunks of bytes into complete ``SSEEvent`` values.

    Lines end with ``\\n``, ``\\r\\n`` or a lone ``\\r``; ``:`` lines are comments (keep-alives);
    an event is dispatched at a blank line; a stream that ends mid-event drops that event (the
    spec's rule), which ``pending`` reports so callers can tell a truncated stream.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._started = False
        self._skip_lf = False
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None
        self._retry: int | None = None
        self._has_fields = False

    @property
    def pending(self) -> bool:
        """True when bytes or fields of an undispatched event are waiting."""
        return bool(self._buffer) or self._has_fields

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        buffer = self._buffer
        if self._skip_lf and chunk[:1] == b"\n":
            chunk = chunk[1:]
        self._skip_lf = False
        buffer += chunk
        if not self._started:
            if len(buffer) < len(_BOM) and _BOM.startswith(bytes(buffer)):
                return []
            if buffer.startswith(_BOM):
                del buffer[: len(_BOM)]
            self._started = True
        events: list[SSEEvent] = []
        start = 0
        length = len(buffer)
        while start < length:
            cr = buffer.find(b"\r", start)
            lf = buffer.find(b"\n", start)
            if cr == -1 and lf == -1:
                break
            if cr == -1 or (lf != -1 and lf < cr):
                end, next_start = lf, lf + 1
            elif cr + 1 < length:
                end, next_start = cr, cr + 2 if buffer[cr + 1] == 0x0A else cr + 1
            else:  # a trailing "\r": the "\n" of "\r\n" may come in the next chunk
                end, next_start = cr, cr + 1
                self._skip_lf = True
            event = self._line(bytes(buffer[start:end]).decode("utf-8", errors="replace"))
            if event is not None:
                events.append(event)
            start = next_start
        del buffer[:start]
        return events

    def _line(self, line: str) -> SSEEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id":
            if "\0" not in value:
                self._id = value
        elif field == "retry":
            if value.isdigit():
                self._retry = int(value)
        else:
            return None  # unknown fields (and lines without a colon) are ignored by the spec
        self._has_fields = True
        return None

    def _dispatch(self) -> SSEEvent | None:
        if not self._has_fields:
            return None
        lines, event = self._data, self._event or "message"
        self._event, self._data, self._has_fields = "", [], False
        if not lines:
            return None  # an event without any data line is not dispatched
        return SSEEvent(event=event, data="\n".join(lines), id=self._id, retry=self._retry)
