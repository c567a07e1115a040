"""A developer on a phone over SSH: 40x20 and 60x24, keys only. What an answer holds is on
screen somewhere, whole or with a marker saying how to see the rest."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from textual.geometry import Region

from tests.tui.helpers import ask, make_app, ready

CELLS = [
    ["name", "description", "owner", "status", "notes"],
    *[[f"row{i}", f"a fairly long description of row {i}", f"someone{i}@example.org", "active", f"ENDCOL{i}"] for i in range(3)],
]
TABLE = "\n".join(
    ["| " + " | ".join(CELLS[0]) + " |", "|" + "---|" * len(CELLS[0])] + ["| " + " | ".join(row) + " |" for row in CELLS[1:]]
)


@pytest.mark.parametrize("size", [(40, 20), (60, 24)])
async def test_a_wide_table_is_folded_whole_into_a_narrow_transcript(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    """A table wider than the screen: every cell's every character is drawn (a word wider than
    its column folds onto the next row), none is cut with "…"."""
    from roder_tui.widgets.markdown_stream import ProseBlock

    app = make_app(workspace, [{"text": "The owners:\n\n" + TABLE + "\n\nTABLE-END"}], monkeypatch)
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        await ask(pilot, "who owns what")
        answer = app.transcript.last_answer()
        assert answer is not None
        [block] = [b for b in answer.widget.body.children if isinstance(b, ProseBlock) and "|" in b.source]  # type: ignore[attr-defined]
        rows = [strip.text for strip in block.render_lines(Region(0, 0, block.size.width, block.size.height))]
    drawn = "\n".join(rows)
    assert "…" not in drawn, drawn
    assert max(len(row.rstrip()) for row in rows) <= size[0]
    table = drawn[drawn.index("The owners:") + len("The owners:") : drawn.index("TABLE-END")]
    expected = Counter("".join("".join(row) for row in CELLS).replace(" ", ""))
    assert Counter(table.replace(" ", "").replace("\n", "").replace("─", "")) == expected, drawn
