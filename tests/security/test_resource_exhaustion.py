"""Roder itself exhausted: image bombs, JSON nested without end, a reply that never ends.

Through the real loop: ``roder -p`` against the loopback model server (chat-completions wire
format). The model reads pixel bombs (a small file whose header declares a huge image, in PNG,
GIF and WebP), sends tool arguments nested 200,000 deep, or streams an answer past the
response ceiling; each gets a clear error and the turn (or the next call) goes on.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from roder_core.media.images import MAX_PIXELS, MediaError, prepare, thumbnail
from roder_core.testing.fake_server import ThreadedFakeServer
from tests.security.terminal_support import provider_config

pytestmark = pytest.mark.e2e


def png_bomb(width: int, height: int) -> bytes:
    """A valid PNG header declaring ``width`` x ``height`` RGB pixels; the pixel data (zeros,
    a few rows) would decode to gigabytes if a decoder believed the header."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    rows = zlib.compress(b"\x00" * (1 + width * 3) * 4)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")


def gif_bomb(width: int, height: int) -> bytes:
    """A GIF89a whose logical screen and only frame are ``width`` x ``height`` (LZW data: none)."""
    screen = b"GIF89a" + struct.pack("<HH", width, height) + b"\x80\x00\x00" + b"\x00\x00\x00\xff\xff\xff"
    frame = b"\x2c" + struct.pack("<HHHH", 0, 0, width, height) + b"\x00" + b"\x02\x02\x4c\x01\x00"
    return screen + frame + b"\x3b"


def webp_bomb(width: int, height: int) -> bytes:
    """A WebP (extended format) whose canvas is ``width`` x ``height``."""
    vp8x = (
        b"VP8X"
        + struct.pack("<I", 10)
        + b"\x00\x00\x00\x00"
        + (width - 1).to_bytes(3, "little")
        + (height - 1).to_bytes(3, "little")
    )
    body = b"WEBP" + vp8x
    return b"RIFF" + struct.pack("<I", len(body)) + body


VISION = '\n[models."local/my-model"]\nimages = true\n'
BOMBS = {
    "tall.png": png_bomb(8000, 22000),
    "wide.gif": gif_bomb(65000, 65000),
    "square.webp": webp_bomb(16383, 16383),
}


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_a_pixel_bomb_is_refused_from_its_header(name: str) -> None:
    for decode in (prepare, thumbnail):
        with pytest.raises(MediaError, match="megapixels"):
            decode(BOMBS[name])


def test_a_large_photo_is_decoded_reduced() -> None:
    """A JPEG over the side limit is decoded at a fraction of its size (draft mode), then sent."""
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (9000, 3000), (200, 10, 10)).save(out, format="JPEG", quality=30)
    assert MAX_PIXELS >= 9000 * 3000
    prepared = prepare(out.getvalue())
    assert max(prepared.width, prepared.height) <= 8000
    assert thumbnail(out.getvalue()).width == 256


def _ask(
    steps: list[dict[str, object]], home: Path, workspace: Path, *flags: str, config: str = ""
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """``roder -p go`` on the loopback server with ``steps``; the run, and each request's JSON."""
    done, sent, _peak = _ask_measured(steps, home, workspace, *flags, config=config)
    return done, sent


#: Runs argv[2:] and writes its peak resident KiB to argv[1]. A fresh, small interpreter forks
#: the measured process: a child forked straight from pytest would inherit pytest's own
#: high-water mark (Linux carries the pre-exec resident size into ``ru_maxrss``).
_PEAK_WRAPPER = (
    "import os, sys, subprocess\n"
    "child = subprocess.Popen(sys.argv[2:])\n"
    "_pid, status, usage = os.wait4(child.pid, 0)\n"
    "open(sys.argv[1], 'w').write(str(usage.ru_maxrss))\n"
    "sys.exit(os.waitstatus_to_exitcode(status))\n"
)


def _ask_measured(
    steps: list[dict[str, object]], home: Path, workspace: Path, *flags: str, config: str = ""
) -> tuple[subprocess.CompletedProcess[str], list[str], int]:
    """As :func:`_ask`, plus the peak resident KiB of that one ``roder`` process (and what it
    waited for); ``RUSAGE_CHILDREN`` would also count leftovers of other tests reaped meanwhile."""
    with ThreadedFakeServer(steps, models=("my-model",)) as server:
        env = provider_config(home, server.base_url)
        with (home / "config.toml").open("a") as file:
            file.write(config)
        command = [sys.executable, "-m", "roder_tui.cli", "-p", "go", "--provider", "local", "--model", "my-model"]
        peak_file = home / "peak-kib"
        done = subprocess.run(
            [sys.executable, "-c", _PEAK_WRAPPER, str(peak_file), *command, *flags],
            env=env,
            cwd=workspace,
            capture_output=True,
            text=True,
            timeout=300,
        )
        sent = [json.dumps(call.json) for call in server.calls]
    return done, sent, int(peak_file.read_text())


def test_four_bombs_in_one_reply_leave_the_turn_running(roder_home: Path, workspace: Path) -> None:
    for name, data in BOMBS.items():
        (workspace / name).write_bytes(data)
    (workspace / "again.png").write_bytes(BOMBS["tall.png"])
    calls = [{"name": "read", "arguments": {"path": name}} for name in [*BOMBS, "again.png"]]
    steps = [{"text": "Looking.", "tool_calls": calls}, {"text": "IMAGES-HANDLED"}]
    done, sent, peak_kb = _ask_measured(steps, roder_home, workspace, "--mode", "bypass", config=VISION)
    assert done.returncode == 0, done.stderr
    assert "IMAGES-HANDLED" in done.stdout
    assert sent[1].count("megapixels") >= 4, sent[1][:2000]  # the model was told, per image
    assert peak_kb < 300 * 1024, peak_kb  # no bomb was decoded (that takes hundreds of MB)


def test_tool_arguments_nested_without_end(roder_home: Path, workspace: Path) -> None:
    deep = "[" * 200_000 + "]" * 200_000
    raw_args = '{"path": ' + deep + "}"
    steps = [
        {"text": "Reading.", "tool_calls": [{"name": "read", "arguments": raw_args}], "chunk_size": 65536},
        {"text": "NESTING-HANDLED"},
    ]
    done, sent = _ask(steps, roder_home, workspace, "--mode", "bypass")
    assert done.returncode == 0, done.stderr
    assert "NESTING-HANDLED" in done.stdout
    assert "RecursionError" not in done.stderr + done.stdout
    assert "nested deeper than" in sent[1]


@pytest.mark.parametrize("kind", ["text", "tool"])
def test_a_reply_past_the_size_ceiling_is_cut_off(kind: str, roder_home: Path, workspace: Path) -> None:
    """Text or a tool call's arguments: both are bytes of the one response."""
    big = "x" * 300_000
    step = {"text": big} if kind == "text" else {"tool_calls": [{"name": "read", "arguments": {"path": big}}]}
    done, _sent = _ask([{**step, "chunk_size": 4096}], roder_home, workspace, config="\n[limits]\nresponse_mb = 0.1\n")
    assert done.returncode == 1
    assert "response exceeded 0.1 MB and was cut off" in done.stderr and "response_mb" in done.stderr, done.stderr


def test_a_reply_that_never_ends_is_cut_off_in_time(roder_home: Path, workspace: Path) -> None:
    """A stream that keeps coming (here: slowly, far longer than the ceiling) ends at the ceiling."""
    steps = [{"text": "y" * 100_000, "chunk_size": 1, "delay_ms": 20}]
    done, _sent = _ask(steps, roder_home, workspace, config="\n[limits]\nresponse_seconds = 1\n")
    assert done.returncode == 1
    assert "was still streaming after 1 s" in done.stderr and "response_seconds" in done.stderr, done.stderr


#: Modules where JSON from a model, an MCP server or a client is parsed.
BOUNDARIES = [
    "roder_core/providers/wire.py",
    "roder_core/providers/failures.py",
    "roder_core/providers/transport.py",
    "roder_core/providers/engine.py",
    "roder_core/server/connection.py",
    "roder_core/server/rpc_client.py",
    "extensions/roder_ext_mcp/stdio.py",
    "extensions/roder_ext_chat_completions/decode.py",
    "extensions/roder_ext_anthropic/decode.py",
    "extensions/roder_ext_openai_responses/decode.py",
    "extensions/roder_ext_command_hooks/__init__.py",
    "extensions/roder_ext_process/connection.py",
]


def test_boundaries_parse_json_through_one_helper() -> None:
    """A boundary module that parses JSON itself would let nesting without end through."""
    root = Path(__file__).resolve().parents[2]
    for name in BOUNDARIES:
        source = (root / name).read_text(encoding="utf-8")
        assert "json.loads(" not in source.replace("bounded_json.loads(", ""), f"{name} parses JSON without the depth limit"
        assert "validate_json(" not in source or "depth_problem(" in source, name


def test_the_depth_limit_is_linear_and_exact() -> None:
    from roder_core import bounded_json

    assert bounded_json.loads("[" * 128 + "]" * 128) is not None
    with pytest.raises(json.JSONDecodeError, match="nested deeper than 128"):
        bounded_json.loads("[" * 129 + "]" * 129)
    # brackets inside strings are not nesting
    assert bounded_json.loads(json.dumps({"a": "[" * 10_000})) == {"a": "[" * 10_000}
    with pytest.raises(json.JSONDecodeError):
        bounded_json.loads('{"a": ' + "[" * 200_000)


def test_a_deeply_nested_mcp_result_fails_its_call_at_once(roder_home: Path, workspace: Path) -> None:
    """A real MCP server process answers a tool call with JSON nested 100,000 deep: the call
    gets an error naming the limit (instead of waiting out its timeout), the turn goes on."""
    server = Path(__file__).with_name("mcp_deep_server.py")
    config = f'\n[mcp.servers.deep]\ncommand = "{sys.executable}"\nargs = ["{server}"]\ntool_timeout = 60\n'
    steps = [{"text": "Asking.", "tool_calls": [{"name": "mcp__deep__deep", "arguments": {}}]}, {"text": "MCP-HANDLED"}]
    done, sent = _ask(steps, roder_home, workspace, "--mode", "bypass", config=config)
    assert done.returncode == 0, done.stderr
    assert "MCP-HANDLED" in done.stdout
    assert "nested deeper than 128 levels" in sent[1], sent[1][-3000:]


def test_an_mcp_answer_of_one_endless_line_fails_its_call(roder_home: Path, workspace: Path) -> None:
    """A real MCP server answers a tool call with one line of 200 MB: Roder keeps the line's
    beginning (its id) and drops the rest as it arrives, the call gets an error naming the limit,
    the turn goes on, and ``roder`` stays under 300 MB."""
    server = Path(__file__).with_name("mcp_deep_server.py")
    config = (
        f'\n[mcp.servers.deep]\ncommand = "{sys.executable}"\nargs = ["{server}"]\ntool_timeout = 120\n'
        'env = { MCP_DEEP_MODE = "long" }\n'
    )
    steps = [{"text": "Asking.", "tool_calls": [{"name": "mcp__deep__deep", "arguments": {}}]}, {"text": "MCP-HANDLED"}]
    done, sent, peak_kb = _ask_measured(steps, roder_home, workspace, "--mode", "bypass", config=config)
    assert done.returncode == 0, done.stderr
    assert "MCP-HANDLED" in done.stdout
    assert "a line of over 64 MiB" in sent[1], sent[1][-3000:]
    assert peak_kb < 300 * 1024, peak_kb


@pytest.mark.parametrize(
    ("name", "content"),
    [("deep.py", "x = " + "-" * 100_000 + "1\n"), ("deep.json", "[" * 100_000 + "]" * 100_000)],
    ids=["python", "json"],
)
def test_writing_a_file_nested_without_end(name: str, content: str, roder_home: Path, workspace: Path) -> None:
    """The write tool checks that a change keeps a file parsable; a file nested deeper than a
    parser follows gets no verdict instead of ending the call with MemoryError/RecursionError."""
    (workspace / name).write_text("x = 1\n" if name.endswith(".py") else "{}")
    steps = [
        {"text": "Reading.", "tool_calls": [{"name": "read", "arguments": {"path": name}}]},
        {"text": "Writing.", "tool_calls": [{"name": "write", "arguments": {"path": name, "content": content}}]},
        {"text": "WRITE-HANDLED"},
    ]
    done, sent = _ask(steps, roder_home, workspace, "--mode", "bypass")
    assert done.returncode == 0, done.stderr
    assert "WRITE-HANDLED" in done.stdout
    assert (workspace / name).read_text() == content
    assert "MemoryError" not in sent[2] and "RecursionError" not in sent[2]


def test_the_text_tools_never_hold_a_huge_file(roder_home: Path, workspace: Path) -> None:
    """edit, write and apply_patch on a 1 GiB file (sparse: no disk used) and a 100 MiB text file
    each answer with one clear line, and ``roder`` stays under 300 MB: the file is read with a
    limit (``write.changeable_bytes``), never whole."""
    with (workspace / "huge.bin").open("wb") as file:
        file.truncate(1024**3)
    (workspace / "big.txt").write_text("a line of text\n" * (7 * 1024 * 1024))
    patch = "*** Begin Patch\n*** Delete File: big.txt\n*** End Patch\n"
    calls = [
        {"name": "edit", "arguments": {"path": "huge.bin", "old_string": "a", "new_string": "b"}},
        {"name": "edit", "arguments": {"path": "big.txt", "old_string": "a line", "new_string": "one line"}},
        {"name": "write", "arguments": {"path": "huge.bin", "content": "small now"}},
        {"name": "apply_patch", "arguments": {"patch": patch}},
    ]
    steps = [*({"tool_calls": [call]} for call in calls), {"text": "FILES-HANDLED"}]
    done, sent, peak_kb = _ask_measured(steps, roder_home, workspace, "--mode", "bypass")
    assert done.returncode == 0, done.stderr
    assert "FILES-HANDLED" in done.stdout
    assert sent[-1].count("larger than 32 MiB") == 4, sent[-1][-3000:]
    assert (workspace / "big.txt").stat().st_size == 15 * 7 * 1024 * 1024  # nothing was written
    assert (workspace / "huge.bin").stat().st_size == 1024**3
    assert peak_kb < 300 * 1024, peak_kb
