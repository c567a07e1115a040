"""Terminal injection: nothing from outside Roder reaches a terminal raw.

A model on the loopback server (real chat-completions wire format) answers with text full of
escape sequences, bidi overrides and invisible characters, and asks to run a command that
carries them. ``roder -p`` on a terminal (a pty), its JSON output, ``roder sessions show`` and
error lines are scanned byte for byte; piped output stays exact. The app's surfaces are
covered in ``test_terminal_injection_app.py``.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest

from roder_core.testing.fake_server import ThreadedFakeServer
from roder_tui.terminal_text import UNSAFE, json_line, visible
from tests.security.terminal_support import HOSTILE, SHOWN, payload_sequences, provider_config, unsafe_characters

pytestmark = pytest.mark.e2e

STEPS = [
    {"text": HOSTILE, "tool_calls": [{"name": "bash", "arguments": {"command": f"echo hi{HOSTILE}"}}]},
    {"text": "done " + HOSTILE},
]


def test_every_unsafe_character_is_made_visible() -> None:
    """The whole class, by Unicode category: every control, format, separator and surrogate
    code point (newline and tab aside) is replaced, by something with none of them in it."""
    for code in range(0x110000):
        ch = chr(code)
        if not unsafe_characters(ch):
            continue
        shown = visible(ch)
        assert shown != ch and not unsafe_characters(shown), f"U+{code:04X}"
    assert visible(visible(HOSTILE)) == visible(HOSTILE)
    assert visible("a\r\nb") == "a\nb" and visible("a\r\nb", line_endings=False) == "a␍\nb"
    assert all(part in visible(HOSTILE) for part in SHOWN)


def test_json_lines_keep_the_value_and_show_nothing_raw() -> None:
    line = json_line({"text": HOSTILE, "lone": "\ud800"})
    assert json.loads(line) == {"text": HOSTILE, "lone": "\ud800"}
    assert UNSAFE.search(line) is None and not unsafe_characters(line)


def _on_a_terminal(args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, bytes]:
    """Run ``roder ARGS`` with stdout and stderr on a pty; everything it wrote, raw."""
    main, child = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "roder_tui.cli", *args], stdin=subprocess.DEVNULL, stdout=child, stderr=child, env=env, cwd=cwd
    )
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:  # EIO: the child closed its side
            break
        if not data:
            break
        chunks.append(data)
    os.close(main)
    return proc.wait(timeout=120), b"".join(chunks)


def _thread_id(home: Path) -> str:
    listed = subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", "sessions", "list", "--all", "--json"],
        env={**os.environ, "RODER_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return str(json.loads(listed.stdout)[0]["id"])


def test_one_shot_and_sessions_show_on_a_terminal(roder_home: Path, workspace: Path) -> None:
    with ThreadedFakeServer(STEPS, models=("my-model",)) as server:
        env = provider_config(roder_home, server.base_url)
        code, raw = _on_a_terminal(["-p", "go", "--provider", "local", "--model", "my-model"], env, workspace)
    text = raw.decode("utf-8", errors="replace")
    assert code == 0, text
    assert payload_sequences(raw) == [], text
    assert not unsafe_characters(text.replace("\r\n", "\n")), text
    assert all(part in text for part in SHOWN), text
    assert "needs approval" in text or "denied" in text  # the refused command's line, on stderr

    code, raw = _on_a_terminal(["sessions", "show", _thread_id(roder_home)], env, workspace)
    text = raw.decode("utf-8", errors="replace")
    assert code == 0, text
    assert payload_sequences(raw) == [] and not unsafe_characters(text.replace("\r\n", "\n")), text
    assert "␛]0;PWNTITLE" in text and "<U+202E>PWNRLO" in text


def test_the_app_servers_stderr_on_a_terminal_shows_what_an_mcp_server_printed(roder_home: Path, workspace: Path) -> None:
    """``roder app-server`` keeps stdout for JSON-RPC, but its stderr is for a person (a
    terminal when run by hand, with ``--listen`` too): the warning that quotes an MCP server's
    stray stdout line shows its sequences instead of acting on them."""
    noisy = workspace.parent / "noisy_mcp.py"
    noisy.write_text(f"import sys\nsys.stdout.write({HOSTILE!r} + '\\n')\nsys.stdout.flush()\n")
    (roder_home / "config.toml").write_text(
        f"[mcp.servers.noisy]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(noisy))}]\n"
    )
    main, child = pty.openpty()
    env = {**os.environ, "RODER_HOME": str(roder_home)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "roder_tui.cli", "app-server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=child,
        env=env,
        cwd=workspace,
    )
    os.close(child)
    raw = b""
    try:
        while b"not JSON-RPC" not in raw or not raw.endswith(b"\n"):  # the warning, whole
            ready, _, _ = select.select([main], [], [], 60)
            assert ready, raw
            raw += os.read(main, 65536)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=120)
        os.close(main)
    text = raw.decode("utf-8", errors="replace")
    assert payload_sequences(raw) == [], text
    assert "␛]0;PWNTITLE" in text, text


def test_json_on_a_terminal_is_the_exact_value(roder_home: Path, workspace: Path) -> None:
    with ThreadedFakeServer(STEPS, models=("my-model",)) as server:
        env = provider_config(roder_home, server.base_url)
        args = ["-p", "go", "--provider", "local", "--model", "my-model", "--output-format", "json"]
        code, raw = _on_a_terminal(args, env, workspace)
    assert code == 0, raw
    assert payload_sequences(raw) == []
    result = json.loads(raw.decode().split("\r\n")[-2] if raw.endswith(b"\r\n") else raw.decode())
    assert result["text"] == "done " + HOSTILE  # the value is the model's, escaped in JSON


def test_piped_output_is_the_models_text_exactly(roder_home: Path, workspace: Path) -> None:
    """Sanitizing is for terminals: a script reading stdout gets what the model said."""
    with ThreadedFakeServer(STEPS, models=("my-model",)) as server:
        env = provider_config(roder_home, server.base_url)
        done = subprocess.run(
            [sys.executable, "-m", "roder_tui.cli", "-p", "go", "--provider", "local", "--model", "my-model"],
            env=env,
            cwd=workspace,
            capture_output=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    assert HOSTILE.encode() in done.stdout
    assert re.search(rb"\x1b\]0;PWNTITLE", done.stdout)


def test_the_frame_writer_shows_text_and_drops_hostile_links() -> None:
    """``Strip.render`` (where every frame's characters are made) once guarded: segment text is
    shown, a hyperlink whose target would break out of its OSC 8 loses the link (its text stays),
    a safe link and a library's control segment pass."""
    from rich.console import Console
    from rich.segment import Segment
    from rich.style import Style
    from textual.strip import Strip

    from roder_tui.terminal_text import guard_textual, textual_guarded

    guard_textual()
    assert textual_guarded()
    hostile_link = Style(link="http://x\x1b\\\x1b]52;c;UFdOQ0xJUA==\x07")
    links = Strip(
        [
            Segment("docs", hostile_link),
            Segment(" home", Style(link="https://example.org/")),
            Segment("\x1b7", None, []),  # a control segment (textual-image's sixel draws with these)
        ]
    ).render(Console())
    assert payload_sequences(links.encode()) == [] and "http://x" not in links
    assert "docs" in links and "\x1b]8;id=" in links and "https://example.org/" in links
    assert links.endswith("\x1b7")
    text = Strip([Segment(HOSTILE)]).render(Console())
    assert payload_sequences(text.encode()) == [] and text.startswith("hostile: ␛]0;PWNTITLE␇")


def test_roders_own_styled_output_keeps_its_styles_and_shows_the_data() -> None:
    """A table printed by a subcommand (``roder batch``'s summary) on a guarded terminal: the
    table's styling reaches the terminal, a hostile cell does not."""
    import io

    from rich.table import Table

    from roder_tui.terminal_text import TerminalStream, rich_console

    raw = io.StringIO()
    guarded = TerminalStream(raw)
    assert guarded.encoding == raw.encoding and not guarded.closed  # it stands in for the stream
    console = rich_console(guarded, force_terminal=True, width=400)
    table = Table(title="summary")
    table.add_column("cause", style="bold")
    table.add_row(HOSTILE)
    console.print(table)
    out = raw.getvalue()
    assert "\x1b[1m" in out  # Roder's bold
    assert payload_sequences(out.encode()) == [] and "␛]0;PWNTITLE" in out
