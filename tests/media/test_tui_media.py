"""Images in the TUI, driven with Textual's Pilot through the real runtime and in-process client:
``@shot.png``, a pasted path, the clipboard (a real clipboard tool on PATH), the transcript's
card, and the inline preview where the terminal draws images."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from roder_core.ir import UserMessageItem
from roder_tui import graphics
from roder_tui.clipboard_image import ClipboardError, clipboard_tool, read_clipboard_image
from roder_tui.graphics import image_protocol
from roder_tui.media_input import image_inputs, prompt_images
from roder_tui.widgets.messages import UserMessageMediaView, UserMessageView
from roder_tui.widgets.transcript import PREVIEWS
from tests.media.images import png_bytes
from tests.tui.helpers import entries_of, make_app, ready, turn_done, until

ANSWER = [{"text": "A red rectangle."}]


def user_item(app) -> UserMessageItem:  # type: ignore[no-untyped-def]
    item = entries_of(app, "user")[-1].items[0]
    assert isinstance(item, UserMessageItem)
    return item


def rendered(widget) -> str:  # type: ignore[no-untyped-def]
    return str(widget.render())


async def test_at_mention_attaches_the_image_and_the_transcript_shows_its_card(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = png_bytes(64, 48)
    (workspace / "shot.png").write_bytes(image)
    (workspace / "notes.txt").write_text("plain notes")
    app = make_app(workspace, ANSWER, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press(*"describe @shot.png and @notes.txt now", "enter")
        await turn_done(pilot)
        item = user_item(app)
        [picture, notes] = item.attachments
        assert (picture.name, picture.mime_type, picture.width, picture.height, picture.size) == (
            "shot.png",
            "image/png",
            64,
            48,
            len(image),
        )
        assert picture.media_id == hashlib.sha256(image).hexdigest() and picture.data_base64 is None
        assert notes.name == "notes.txt" and notes.text == "plain notes"  # a text file stays text
        view = entries_of(app, "user")[-1].widget
        assert isinstance(view, UserMessageView)  # headless: no graphics protocol, a text card
        shown = rendered(view)
        assert f"▣ shot.png  PNG · 64x48 · {len(image)} B" in shown and "+ notes.txt" in shown


async def test_a_pasted_path_outside_the_workspace_is_attached(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    desktop = workspace.parent / "Desktop"
    desktop.mkdir()
    image = png_bytes(30, 20, color=(0, 255, 0))
    (desktop / "Screen Shot 1.png").write_bytes(image)
    app = make_app(workspace, ANSWER, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        app.prompt_bar.input.insert(f"what is in '{desktop / 'Screen Shot 1.png'}'?")  # as a terminal pastes a dropped file
        await pilot.press("enter")
        await turn_done(pilot)
        [picture] = user_item(app).attachments
        assert (picture.name, picture.width, picture.height) == ("Screen Shot 1.png", 30, 20)
        listed = app._client().runtime.media.list_media(app.thread_id)
        assert [(m.name, m.source) for m in listed] == [("Screen Shot 1.png", "user")]


def fake_wl_paste(bin_dir: Path, image: bytes, types: str = "image/png\ntext/plain") -> None:
    """A real ``wl-paste`` executable on PATH, answering like wl-clipboard does."""
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "clip.png").write_bytes(image)
    script = bin_dir / "wl-paste"
    script.write_text(
        f'#!/bin/sh\nif [ "$1" = "--list-types" ]; then printf "{types}\\n"; exit 0; fi\ncat "{bin_dir / "clip.png"}"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


async def test_alt_v_attaches_the_clipboard_image_to_the_next_prompt(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = png_bytes(12, 8, color=(0, 0, 255))
    fake_wl_paste(tmp_path / "bin", image)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("WAYLAND_DISPLAY", "wayland-test")
    app = make_app(workspace, ANSWER, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("alt+v")
        await until(pilot, lambda: bool(app.pending_media.items), what="the pasted image under the prompt")
        assert "clipboard-1.png" in rendered(app.pending_media) and "attached to your next prompt" in rendered(app.pending_media)
        await pilot.press(*"what is this?", "enter")
        await turn_done(pilot)
        [picture] = user_item(app).attachments
        assert picture.media_id == hashlib.sha256(image).hexdigest() and (picture.width, picture.height) == (12, 8)
        assert app.pending_media.items == [] and not app.pending_media.has_class("-shown")


async def test_without_a_clipboard_tool_the_user_is_told_why(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    for name in ("WAYLAND_DISPLAY", "DISPLAY", "SSH_CONNECTION", "SSH_TTY"):
        monkeypatch.delenv(name, raising=False)
    app = make_app(workspace, ANSWER, monkeypatch)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await ready(pilot)
        await pilot.press("alt+v")
        await until(pilot, lambda: any("no clipboard" in n.message for n in app._notifications), what="the notice")
        [notice] = [n.message for n in app._notifications if "no clipboard" in n.message]
        assert notice == (
            "no clipboard to read an image from: there is no graphical session here; "
            "attach a file with @path or paste its path instead"
        )
        assert app.pending_media.items == []


async def test_terminals_that_draw_images_get_an_inline_preview(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from textual_image.widget import TGPImage

    image = png_bytes(400, 200)
    (workspace / "wide.png").write_bytes(image)
    monkeypatch.setitem(graphics._WIDGETS, "kitty", TGPImage)
    monkeypatch.setattr(PREVIEWS, "protocol", "kitty")
    app = make_app(workspace, ANSWER, monkeypatch)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press(*"look @wide.png now", "enter")
        await turn_done(pilot)
        view = entries_of(app, "user")[-1].widget
        assert isinstance(view, UserMessageMediaView)
        await until(pilot, lambda: bool(view.query(TGPImage)), what="the preview widget")
        preview = view.query_one(TGPImage)
        assert preview.image.size == (256, 128)  # the server's thumbnail, not the full picture
        assert "▣ wide.png  PNG · 400x200" in rendered(view.text)


# --------------------------------------------------------------------------- the parts


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"TERM": "xterm-kitty"}, "kitty"),
        ({"TERM_PROGRAM": "ghostty"}, "kitty"),
        ({"TERM_PROGRAM": "iTerm.app"}, "sixel"),
        ({"LC_TERMINAL": "iTerm2"}, "sixel"),
        ({"TERM": "foot"}, "sixel"),
        ({"WT_SESSION": "x"}, "sixel"),
        ({"TERM": "xterm-kitty", "TMUX": "/tmp/tmux"}, None),
        ({"TERM": "xterm-256color"}, None),
        ({"TERM": "xterm-256color", "RODER_IMAGE_PREVIEW": "sixel"}, "sixel"),
        ({"TERM": "xterm-kitty", "RODER_IMAGE_PREVIEW": "off"}, None),
    ],
)
def test_the_image_protocol_is_told_from_the_environment(env: dict[str, str], expected: str | None) -> None:
    assert image_protocol(env) == expected


def test_paths_in_a_prompt_in_every_form_a_terminal_pastes(workspace: Path) -> None:
    spaced = workspace.parent / "My Pics"
    spaced.mkdir()
    a = spaced / "a b.png"
    a.write_bytes(png_bytes(2, 2))
    b = workspace / "b.png"
    b.write_bytes(png_bytes(2, 2))
    fake = workspace / "fake.png"
    fake.write_text("not really a png")
    escaped = str(a).replace(" ", "\\ ")
    text = f'compare {escaped} with @b.png, file://{str(a).replace(" ", "%20")} and "{a}"; ignore @fake.png and /nope.png'
    assert prompt_images(text, workspace) == [a.resolve(), b.resolve()]  # each once, in order
    items = image_inputs(text, workspace)
    assert [(i.name, i.path is not None, i.data_base64 is not None) for i in items] == [
        ("a b.png", False, True),  # outside the workspace: read here, by the user's own client
        ("b.png", True, False),  # inside: the server reads it through the workspace's file broker
    ]


def test_clipboard_tools_are_detected_and_their_answers_read(tmp_path: Path) -> None:
    found = {"wl-paste": "/usr/bin/wl-paste", "xclip": "/usr/bin/xclip"}
    assert clipboard_tool({"WAYLAND_DISPLAY": "w"}, found.get, "linux").name == "wl-paste"  # type: ignore[union-attr]
    assert clipboard_tool({"DISPLAY": ":0"}, found.get, "linux").name == "xclip"  # type: ignore[union-attr]
    assert clipboard_tool({"DISPLAY": ":0"}, {}.get, "linux") is None
    assert clipboard_tool({}, {}.get, "darwin") is not None
    fake_wl_paste(tmp_path / "bin", b"", types="text/plain\ntext/html")
    tool = clipboard_tool({"WAYLAND_DISPLAY": "w"}, lambda name: str(tmp_path / "bin" / name), "linux")
    tool = tool.__class__(tool.name, [str(tmp_path / "bin" / "wl-paste"), "--list-types"], None)  # type: ignore[union-attr]
    with pytest.raises(ClipboardError, match=r"the clipboard holds no image \(it holds: text/plain, text/html\)"):
        read_clipboard_image({"WAYLAND_DISPLAY": "w"}, tool.__class__(tool.name, tool.list_types, ["true"]))
    with pytest.raises(ClipboardError, match="this is an SSH session"):
        read_clipboard_image({"SSH_CONNECTION": "1 2 3 4"}, None)


def test_one_shot_mode_sends_an_at_mentioned_image(workspace: Path) -> None:
    import subprocess
    import sys

    from roder_core.settings.paths import RoderPaths

    image = png_bytes(5, 7)
    (workspace / "tiny.png").write_bytes(image)
    proc = subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", "-p", "what is @tiny.png?", "--provider", "mock"],
        cwd=workspace,
        input="",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    [folder] = RoderPaths.from_env().media_dir.iterdir()
    stored = folder / f"{hashlib.sha256(image).hexdigest()}.png"
    assert stored.read_bytes() == image
    thread_file = RoderPaths.from_env().threads_dir / f"{folder.name}.jsonl"
    assert '"name":"tiny.png"' in thread_file.read_text().replace(" ", "")
