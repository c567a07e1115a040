"""Emoji sequences are drawn as emoji; joiners and tags that could hide text are still shown.

A zero-width joiner between two pictographs makes one emoji (a family, a profession, a rainbow
flag), and tag characters between the black flag and the cancel tag spell a subdivision's flag
(England, Scotland, Wales: the ones emoji fonts draw; any other spelling draws as a bare black
flag with its tags unseen). The sanitizer lets exactly those through. A joiner anywhere else (between letters, at
either end, in a run, beside a bidi control) and a tag outside a flag are shown as ``<U+…>``.
Checked for the whole class in the sanitizer, and on what the app draws: the transcript, a tool
card, a sidebar title and the approval dialog.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from roder_core.brokers.terminal_text import EXTENDED_PICTOGRAPHIC, UNSAFE
from roder_core.ir import ThreadSummary
from roder_tui.screens.approval import HIDDEN_WARNING, ApprovalScreen
from roder_tui.terminal_text import has_unsafe, visible
from tests.security.terminal_support import unsafe_characters
from tests.tui.helpers import entries_of, make_app, ready, turn_done, until

ZWJ = "\u200d"
TAG_END = "\U000e007f"


def tags(text: str) -> str:
    return "".join(chr(0xE0000 + ord(ch)) for ch in text)


#: Sequences as a person types or a model writes them: each is one emoji on screen.
EMOJI = [
    "👨‍👩‍👧‍👦",  # family
    "👩🏽‍💻",  # technologist, skin tone
    "🧑🏻‍❤️‍💋‍🧑🏼",  # kiss, two skin tones, a heart with the emoji selector
    "🏳️‍🌈",  # rainbow flag
    "🏳️‍⚧️",  # transgender flag
    "❤️‍🔥",  # heart on fire
    "👁️‍🗨️",  # eye in speech bubble
    "🏃‍➡️",  # person running facing right
    "🐻‍❄️",  # polar bear
    "👩‍🦰",  # woman, red hair
    "🧑‍⚕️",  # health worker
    "🏴" + tags("gbeng") + TAG_END,  # England
    "🏴" + tags("gbsct") + TAG_END,  # Scotland
    "🏴" + tags("gbwls") + TAG_END,  # Wales
    "#️⃣",  # keycap
    "1️⃣",  # keycap
    "🇫🇷",  # regional indicators
    "👍🏿",  # skin tone
]
#: Joiners and tags that could hide or disguise text, and how each is shown.
ABUSE = {
    "r" + ZWJ + "m": "r<U+200D>m",  # between letters
    "rm" + ZWJ: "rm<U+200D>",  # at the end
    ZWJ + "rm": "<U+200D>rm",  # at the start
    ZWJ + "👨": "<U+200D>👨",  # at the start, before a pictograph
    "👨" + ZWJ: "👨<U+200D>",  # after a pictograph, at the end
    "👨" + ZWJ + ZWJ + "👩": "👨<U+200D><U+200D>👩",  # a run
    "👨" + ZWJ + "\u202e" + "👩": "👨<U+200D><U+202E>👩",  # beside a bidi override
    "👨" + "\u2066" + ZWJ + "👩": "👨<U+2066><U+200D>👩",  # beside a bidi isolate
    "a" + ZWJ + "👩": "a<U+200D>👩",  # a letter, then a pictograph
    "👨" + ZWJ + "a": "👨<U+200D>a",  # a pictograph, then a letter
    "👨" + "\u200b" + ZWJ + "👩": "👨<U+200B><U+200D>👩",  # a zero-width space before it
    "tag" + tags("ab") + TAG_END: "tag<U+E0061><U+E0062><U+E007F>",  # tags outside a flag
    "🏴" + tags("gb"): "🏴<U+E0067><U+E0062>",  # a flag's tags never ended
    "🏴" + tags("gb") + TAG_END: "🏴<U+E0067><U+E0062><U+E007F>",  # too short for a subdivision
    "🏴" + tags("gbengland") + TAG_END: "🏴" + "".join(f"<U+{0xE0000 + ord(c):04X}>" for c in "gbengland") + "<U+E007F>",
    "🏴" + tags("RM") + TAG_END: "🏴<U+E0052><U+E004D><U+E007F>",  # capitals: ASCII smuggled as tags
    "🏴" + TAG_END: "🏴<U+E007F>",
    # A spelling emoji fonts do not draw shows as a bare black flag: its tags are hidden text.
    "🏴" + tags("usca") + TAG_END: "🏴<U+E0075><U+E0073><U+E0063><U+E0061><U+E007F>",
    "🏴" + tags("rmrf") + TAG_END: "🏴<U+E0072><U+E006D><U+E0072><U+E0066><U+E007F>",
    "🏴" + tags("gbengx") + TAG_END: "🏴<U+E0067><U+E0062><U+E0065><U+E006E><U+E0067><U+E0078><U+E007F>",
}


def test_emoji_sequences_pass_and_every_other_joiner_or_tag_is_shown() -> None:
    for emoji in EMOJI:
        assert visible(emoji) == emoji and not has_unsafe(emoji), ascii(emoji)
        assert visible(f"say {emoji} and {emoji}{emoji}.") == f"say {emoji} and {emoji}{emoji}."
    for raw, shown in ABUSE.items():
        assert visible(raw) == shown, ascii(raw)
        assert visible(shown) == shown and has_unsafe(raw)
    # alone, a joiner and every tag character is shown (the test over all code points checks the rest)
    for code in [0x200D, 0xE0001, *range(0xE0020, 0xE0080)]:
        assert visible(chr(code)) == f"<U+{code:04X}>"


def test_the_pictographs_are_unicodes_extended_pictographic() -> None:
    """The table the joiner rule rests on is Unicode's (wcwidth ships emoji-data.txt's)."""
    from wcwidth.table_grapheme import EXTENDED_PICTOGRAPHIC as UNICODE

    ours = re.compile(f"[{EXTENDED_PICTOGRAPHIC}]")
    theirs = {code for start, end in UNICODE for code in range(start, end + 1)}
    assert {code for code in range(0x110000) if ours.fullmatch(chr(code))} == theirs


def test_a_joiner_after_a_joined_emoji_in_a_long_text_is_judged_alone() -> None:
    """One search over a long text finds the one joiner that hides something among many that
    join emoji, wherever it sits."""
    text = ("build ok 👨‍👩‍👧 " * 5000) + "r" + ZWJ + "m" + (" 🏳️‍🌈" * 5000)
    found = [match.start() for match in UNSAFE.finditer(text)]
    assert found == [text.index("r" + ZWJ) + 1]


SAMPLE = " ".join(EMOJI)
HIDDEN = " ".join(ABUSE)


def drawn(app: Any) -> str:
    """The current frame as the terminal gets it, styles removed."""
    update = app.screen._compositor.render_update(full=True)
    assert update is not None
    return re.sub("\x1b\\[[0-9;:?]*[A-Za-z]", "", str(update.render_segments(app.console)))


def assert_shown_as_meant(frame: str, what: str) -> None:
    """Every emoji of the sample intact, every abuse case as its stand-ins, and nothing else in
    the frame that a terminal hides."""
    for emoji in EMOJI:
        assert emoji in frame, f"{what}: {emoji!a} not drawn whole"
    for raw, shown in ABUSE.items():
        assert shown in frame, f"{what}: {raw!a} not shown as {shown}"
    rest = frame
    for emoji in sorted(EMOJI, key=len, reverse=True):
        rest = rest.replace(emoji, "")
    assert [f"U+{ord(ch):04X}" for ch in unsafe_characters(rest) if ch != "\x1b"] == [], what


@pytest.mark.parametrize(("command", "warned"), [(f"echo {SAMPLE}", False), (f"echo {HIDDEN}", True)], ids=["emoji", "hiding"])
async def test_the_approval_dialog_warns_of_hiding_joiners_only(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, command: str, warned: bool
) -> None:
    steps: list[dict[str, Any]] = [{"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}, {"text": "ok"}]
    app = make_app(workspace, steps, monkeypatch)
    async with app.run_test(size=(200, 50)) as pilot:
        await ready(pilot)
        await pilot.press(*"go", "enter")
        await until(pilot, lambda: isinstance(app.screen, ApprovalScreen) and app.screen.is_mounted, what="the approval")
        await pilot.pause()
        frame = drawn(app)
        assert (HIDDEN_WARNING[:40] in frame) == warned, frame
        if warned:
            for shown in ABUSE.values():
                assert shown in frame, shown
        else:
            for emoji in EMOJI:
                assert emoji in frame, ascii(emoji)
        await pilot.press("n")
        await turn_done(pilot)


async def test_transcript_tool_card_and_sidebar_draw_emoji_and_show_hiding_characters(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "emoji.txt").write_text(f"CARD {SAMPLE}\nCARD {HIDDEN}\n")
    steps: list[dict[str, Any]] = [
        {"text": f"ANSWER {SAMPLE}\n\nHIDING {HIDDEN}", "tool_calls": [{"name": "read", "arguments": {"path": "emoji.txt"}}]},
        {"text": "DONE"},
    ]
    app = make_app(workspace, steps, monkeypatch)
    async with app.run_test(size=(220, 60)) as pilot:
        await ready(pilot)
        await pilot.press(*"go", "enter")
        await turn_done(pilot)
        [card] = entries_of(app, "tool")
        [widget] = [w for w in app.transcript._entry_widgets() if w.entry is card]
        widget.action_toggle_entry()  # the card's whole lines (a collapsed card cuts each to a row)
        row = ThreadSummary(id="t-emoji", cwd=str(workspace), title=f"{EMOJI[0]} {HIDDEN}", created_at=0.0, updated_at=0.0)
        app.sidebar.show([row], current=row.id)
        await pilot.pause()
        frame = drawn(app)
    assert "ANSWER" in frame and "CARD" in frame, frame
    assert_shown_as_meant(frame, "the app")
    sidebar_rows = [line for line in frame.splitlines() if EMOJI[0] in line and "ANSWER" not in line and "CARD" not in line]
    assert sidebar_rows and "<U+200D>" in sidebar_rows[0], frame
