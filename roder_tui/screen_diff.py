"""Write only what changed on the terminal: skip frame segments the screen already shows.

Textual repaints a widget's whole region when anything in it changes, and a scroll view that
follows streamed text repaints every visible row on most frames: each row goes out again, as a
cursor move and its styled text, even when it shows exactly what it showed a frame earlier. Over
SSH on a phone those bytes are the cost (about 570 bytes per streamed token in tmux before this).

``ScreenDiff`` sits in front of the driver's ``write``. A frame is a run of segments, each a
cursor move (``ESC[row;colH``) followed by the text Textual draws there. The filter remembers,
per row, which segment it last sent at which column and how many cells it covers; a segment
identical to the one already sent at the same place, with nothing written over those cells since,
is dropped. Every sent segment forgets the remembered segments it overlaps (widths as Rich
measures cells, which is how Textual lays the screen out). Anything that is not a frame
(entering or leaving the alternate screen after a suspend or an external editor, a clear, an
unknown sequence) and any change of the terminal's size forgets everything, so the next frame
is sent whole. Cursor moves with no text (where Textual leaves the cursor) are always sent.

What is sent is then spared repeated styles: Rich ends every styled run with a reset and starts
the next with its full style, even when the next run (often the next row of the same widget) has
the same style. ``merge_styles`` drops such reset-and-set pairs, which were about half the bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from rich.cells import cell_len

_SEGMENT = re.compile(r"\x1b\[(\d+);(\d+)H")
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
#: Writes that change no cell: synchronized output, cursor visibility and shape, bell, clipboard.
_HARMLESS = re.compile(r"(?:\x1b\[\?(?:2026|25)[hl]|\x1b\[\d? q|\x07|\x1b\]52;[^\x07]*\x07)*")
#: A style (SGR), a move or line break (they change no style), or anything else (drawn text and
#: other sequences, which must see the style in effect).
_TOKENS = re.compile(r"(\x1b\[[0-9;]*m)|(\x1b\[\d+;\d+H|\r|\n)|([^\x1b\r\n]+|\x1b)")
_RESET = "\x1b[0m"


class ScreenDiff:
    def __init__(self, write: Callable[[str], object], size: Callable[[], object]) -> None:
        self._write = write
        self._size = size
        self._last_size: object = None
        #: row -> {column: (text, end column)} of what the terminal shows there
        self._rows: dict[int, dict[int, tuple[str, int]]] = {}
        self.sent = 0
        self.skipped = 0

    def forget(self) -> None:
        self._rows.clear()

    def write(self, data: str) -> None:
        size = self._size()
        if size != self._last_size:
            self._last_size = size
            self.forget()
        if not data.startswith("\x1b[") or _SEGMENT.match(data) is None:
            if _HARMLESS.fullmatch(data) is None:
                self.forget()
            self._send(data)
            return
        self._send(merge_styles("".join(self._changed(data))))

    def _send(self, data: str) -> None:
        if data:
            self.sent += len(data)
            self._write(data)

    def _changed(self, frame: str) -> list[str]:
        out: list[str] = []
        moves = list(_SEGMENT.finditer(frame))
        for number, move in enumerate(moves):
            end = moves[number + 1].start() if number + 1 < len(moves) else len(frame)
            text = frame[move.end() : end]
            drawn = _ESCAPES.sub("", text).replace("\n", "")
            if not drawn:  # a bare cursor move (or only styles): always sent, remembers nothing
                out.append(frame[move.start() : end])
                continue
            row, column = int(move[1]), int(move[2])
            cells = self._rows.setdefault(row, {})
            width = cell_len(drawn)
            if cells.get(column) == (text, column + width):
                self.skipped += end - move.start()
                continue
            high = column + width
            for start in [start for start, (_, stop) in cells.items() if start < high and stop > column]:
                del cells[start]
            cells[column] = (text, column + width)
            out.append(frame[move.start() : end])
        return out


def merge_styles(data: str) -> str:
    """``data`` with each reset that is followed by the very style it reset dropped, together with
    that style; a reset followed by another style becomes one sequence. Draws the same cells."""
    out: list[str] = []
    current: str | None = ""  # the style in effect; None: unknown (a style stacked on another)
    pending_reset = False
    for style, move, other in _TOKENS.findall(data):
        if style:
            params = style[2:-1]
            if params in ("", "0"):
                pending_reset = True
            elif pending_reset:
                pending_reset = False
                if params != current or current is None:
                    out.append(f"\x1b[0;{params}m")
                    current = params
            else:
                out.append(style)
                current = params if current == "" else None
        elif move:
            out.append(move)
        else:
            if pending_reset:
                out.append(_RESET)
                pending_reset, current = False, ""
            out.append(other)
    if pending_reset or current != "":  # the next write starts from the default style
        out.append(_RESET)
    return "".join(out)
