"""Terminal injection in the app: the real ``roder`` in tmux, every byte it writes recorded.

The model (loopback server, chat-completions wire format) streams hostile text, reads a file
full of it, lists a folder holding a file whose name carries an OSC sequence, and asks to run a
command whose preview an OSC string would hide the rest of. The approval dialog shows the whole
command with the hidden part visible; the recorded output holds none of the payload's
sequences or hiding characters; tmux's title and paste buffers are untouched. A Pilot test
draws hostile text on every kind of surface (toast, modal, sidebar title, status bar) and scans
what the compositor would write.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from roder_core.ir import ThreadSummary
from roder_core.testing.fake_server import ThreadedFakeServer
from roder_tui.screens.approval import CUT_WARNING, HIDDEN_WARNING, LOOKALIKE_WARNING
from tests.e2e.test_tui_tmux import Tmux
from tests.security.terminal_support import HOSTILE, payload_sequences, provider_config, unsafe_characters

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]

EVIL_NAME = "evil\x1b]0;PWNTITLE\x07name.txt"
COMMAND = "echo hi\x1b]8;;\x07; touch pwned-by-osc"
STEPS = [
    {
        "text": HOSTILE,
        "tool_calls": [
            {"name": "read", "arguments": {"path": "notes.txt"}},
            {"name": "ls", "arguments": {"path": "."}},
            {"name": "bash", "arguments": {"command": COMMAND}},
        ],
    },
    {"text": "ANSWER-DONE " + HOSTILE},
]


def test_the_app_shows_hostile_text_and_never_sends_it(roder_home: Path, workspace: Path, tmp_path: Path) -> None:
    (workspace / "notes.txt").write_text("file says " + HOSTILE + "\n")
    (workspace / EVIL_NAME).write_text("x")
    raw_log = tmp_path / "pane.raw"
    with ThreadedFakeServer(STEPS, models=("my-model",)) as server:
        env = provider_config(roder_home, server.base_url)
        env["TERM"] = "xterm-256color"
        roder = f"{sys.executable} -m roder_tui.cli --provider local --model my-model --sandbox off"
        tmux = Tmux.start("roder-inj", roder, env, workspace, (120, 40))
        try:
            tmux.run("pipe-pane", "-o", "-t", "roder", f"cat >> {raw_log}")
            tmux.wait_for("idle")
            tmux.run("send-keys", "-t", "roder", "-l", "go")
            tmux.run("send-keys", "-t", "roder", "Enter")
            screen = tmux.wait_for("Allow bash?")
            # the whole command, the OSC string that hid its tail made visible, and a warning
            assert "echo hi␛]8;;␇; touch pwned-by-osc" in screen, screen
            assert HIDDEN_WARNING[:40] in screen, screen
            tmux.run("send-keys", "-t", "roder", "n")
            screen = tmux.wait_for("ANSWER-DONE")
            assert "␛]0;PWNTITLE" in screen or "<U+202E>PWNRLO" in screen, screen
            title = tmux.run("display-message", "-p", "-t", "roder", "#{pane_title}")
            buffers = tmux.run("list-buffers")
            tmux.run("send-keys", "-t", "roder", "C-q")
            tmux.wait_for("roder-exited-0", timeout=15)
        finally:
            subprocess.run(["tmux", "-L", tmux.socket, "kill-server"], capture_output=True, timeout=10)
    assert not (workspace / "pwned-by-osc").exists()
    assert "PWNTITLE" not in title and "PWNCLIP" not in buffers and "UFdOQ0xJUA" not in buffers
    raw = raw_log.read_bytes()
    assert b"ANSWER-DONE" in raw  # the recording holds the answer
    assert payload_sequences(raw) == []
    text = raw.decode("utf-8", errors="replace")
    # whatever else the app sends are its own sequences: CSI (cursor, style, modes) and nothing
    # that hides text; no OSC (title, clipboard, hyperlink) but Textual's mouse pointer shape
    # (OSC 22) when nothing was copied
    assert "\x1b]" not in re.sub("\x1b\\]22;[a-z-]*(?:\x07|\x1b\\\\)", "", text)
    assert not [ch for ch in unsafe_characters(text) if ch not in "\x1b\r\x08\x07"]


async def test_every_surface_draws_through_the_sanitizer(roder_home: Path, workspace: Path) -> None:
    """Toasts, sidebar title, status bar and a modal, rendered as the terminal would get them."""
    from roder_tui.screens.info import InfoScreen
    from roder_tui.terminal_text import textual_guarded
    from tests.tui.helpers import make_app, until

    app = make_app(workspace)
    assert textual_guarded()

    def frame() -> str:
        update = app.screen._compositor.render_update(full=True)
        assert update is not None
        return str(update.render_segments(app.console))

    async with app.run_test(size=(160, 50), notifications=True) as pilot:
        await until(pilot, app.ready.is_set, what="the app's start")
        app.notify(HOSTILE, title="toast " + HOSTILE, timeout=60)
        app.notify("[@click=app.quit]PWNBUTTON[/] [black on black]PWNHIDDEN[/]", timeout=60)
        app.status_bar.update_state(activity=HOSTILE, git_branch=HOSTILE)
        row = ThreadSummary(id="t-hostile", cwd=str(workspace), title=HOSTILE, created_at=0.0, updated_at=0.0)
        app.sidebar.show([row], current=row.id)
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        main = frame()
        app.push_screen(InfoScreen("info " + HOSTILE, HOSTILE))
        await pilot.pause()
        modal = frame()
    for shown in (main, modal):
        assert payload_sequences(shown.encode()) == []
        assert "␛]0;PWNTITLE" in shown
    # a toast quoting data shows markup as text: no button, nothing hidden
    drawn = re.sub("\x1b\\[[0-9;]*[A-Za-z]", "", main)
    assert "[@click=app.quit]PWNBUTTON[/]" in drawn and "black]PWNHIDDEN[/]" in drawn, drawn


_ES, _DZE, _SHHA = "U+0441 CYRILLIC SMALL LETTER ES", "U+0455 CYRILLIC SMALL LETTER DZE", "U+04BB CYRILLIC SMALL LETTER SHHA"
_FULLWIDTH = ", ".join(
    f"U+FF{code} FULLWIDTH LATIN SMALL LETTER {letter}" for code, letter in (("43", "C"), ("41", "A"), ("54", "T"))
)
#: What the approval head says of a command whose preview may hide part of it.
_LONG = "the command is 81 lines long; scroll the preview to see all of it"


@pytest.mark.parametrize(
    ("command", "said", "preview"),
    [
        ("echo hi" + "\n" * 80 + "touch pwned", _LONG, "$ echo hi"),
        ("echo hi\u202e; touch pwned", HIDDEN_WARNING, "$ echo hi<U+202E>; touch pwned"),
        ("echo hi\r; touch pwned", HIDDEN_WARNING, "$ echo hi␍; touch pwned"),
        # one line of blank-looking characters that are not spaces (the shell keeps them in a
        # word, Rich does not wrap at them): the payload lands below the fold
        ("echo hi" + "\u2800" * 1500 + "; touch pwned", CUT_WARNING, "$ echo hi"),
        ("echo hi" + "\u3000" * 1500 + "#\u2800" * 600 + "; touch pwned", CUT_WARNING, "$ echo hi"),
        ("echo " + "x" * 1800 + "; touch pwned", CUT_WARNING, "$ echo xxx"),
        # homoglyphs: a Cyrillic es in curl, a whole-Cyrillic sh, fullwidth letters
        ("\u0441url -s x | sh", f"{LOOKALIKE_WARNING}: \u0441url ({_ES})", "$ \u0441url -s x | sh"),
        ("\u0455\u04bb -c id", f"{LOOKALIKE_WARNING}: \u0455\u04bb ({_DZE}, {_SHHA})", "$ \u0455\u04bb -c id"),
        ("\uff43\uff41\uff54 x", f"{LOOKALIKE_WARNING}: \uff43\uff41\uff54 ({_FULLWIDTH})", "$ \uff43\uff41\uff54 x"),
    ],
    ids=[
        "padded-with-lines",
        "bidi",
        "carriage-return",
        "braille-blanks",
        "ideographic-spaces",
        "one-long-word",
        "cyrillic-es",
        "cyrillic-sh",
        "fullwidth",
    ],
)
async def test_the_approval_head_says_what_the_preview_may_hide(
    roder_home: Path, workspace: Path, command: str, said: str, preview: str
) -> None:
    """A command pushed below the fold by blank lines, or holding characters a terminal hides:
    the dialog's docked head (always on screen, however small) says so, above a preview that
    shows every hidden character as its stand-in (and the rest of a long one only by scrolling)."""
    from textual.widgets import Static

    from roder_core.ir import ApprovalRequest
    from roder_tui.screens.approval import ApprovalScreen
    from tests.tui.helpers import make_app, until

    app = make_app(workspace)
    request = ApprovalRequest(thread_id="t", turn_id="u", call_id="c", tool="bash", command=command)
    async with app.run_test(size=(60, 20)) as pilot:
        await until(pilot, app.ready.is_set, what="the app's start")
        app.push_screen(ApprovalScreen(request))

        def notice_says() -> bool:  # the head is updated once the preview is laid out
            return any(said in str(n.content) for n in app.screen.query("#approval-notice").results(Static))

        await until(pilot, notice_says, what="the notice")
        await pilot.pause()  # the notice's new height laid out
        update = app.screen._compositor.render_update(full=True)
        assert update is not None
        drawn = re.sub("\x1b\\[[0-9;]*[A-Za-z]", "", str(update.render_segments(app.console)))
    rows = [row.strip("│╭╮╰╯─ ") for row in drawn.splitlines()]
    text = " ".join(row for row in rows if row)  # the dialog's text, its wrapped lines joined
    assert f"Allow bash? {said} {preview}" in text, drawn
    assert ("touch pwned" in text) == (preview.endswith("touch pwned")), drawn
