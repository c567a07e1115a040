"""MCP servers that misbehave or stretch the protocol, as real processes: a server written by hand
(tests/ecosystem/mcp_raw_server.py, no MCP library) plays each case."""

from __future__ import annotations

import base64
import json
import struct
import sys
import zlib
from pathlib import Path
from typing import Any

import roder_ext_mcp
from roder_ext_mcp.config import tool_names

from roder_core.ir import ToolResultItem
from roder_core.kernel.tool_catalog import source_statuses
from tests.builders import until
from tests.core.harness import call
from tests.ecosystem.harness import host_for, items, runtime_with
from tests.ecosystem.test_mcp import write_config

RAW_SERVER = Path(__file__).with_name("mcp_raw_server.py")


def raw_server(name: str, tools: list[dict[str, Any]], **env: str) -> str:
    """The config table of one hand-written server playing ``tools`` (see mcp_raw_server.py)."""
    variables = {"RAW_TOOLS": json.dumps(tools), **env}
    return f"""
[mcp.servers.{json.dumps(name)}]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(RAW_SERVER))}]
env = {{ {", ".join(f"{k} = {json.dumps(v)}" for k, v in variables.items())} }}
startup_timeout = 30
"""


def png() -> str:
    """A valid 1x1 PNG, base64."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b"")
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + body).decode()


def configure(home: Path, *servers: str, extra: str = "") -> None:
    write_config(home, "[mcp]\nstartup_wait = 25\n" + extra + "".join(servers))


def text_result(text: str, **extra: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], **extra}


async def run_calls(workspace: Path, calls: list[dict[str, Any]]) -> tuple[Any, dict[str, ToolResultItem], Any]:
    """One turn calling ``calls`` at once; the turn, its results by tool name, and the runtime's statuses."""
    host = host_for(workspace, trusted=False)
    runtime = runtime_with(host, [roder_ext_mcp.create(host)], [{"tool_calls": calls}, {"text": "done"}])
    try:
        thread = await runtime.start_thread()
        turn = await runtime.run_turn(thread.id, "go")
        results = {r.name: r for r in items(runtime, thread.id, ToolResultItem)}
        return turn, results, source_statuses(runtime.registry)
    finally:
        await runtime.close()


async def test_tools_whose_names_collide_or_that_cannot_be_offered_never_hide_the_others(
    workspace: Path, roder_home: Path
) -> None:
    """``café`` and ``cafè`` both come out ``caf_``; a tool whose schema requires a property it
    does not define cannot be offered; servers ``t_wo`` and ``t.wo`` both give ``mcp__t_wo__ok``.
    Every other tool of every server stays callable (the colliding pair under hashed names),
    and the status says what was left out and why."""
    bad_schema = {"type": "object", "properties": {}, "required": ["path"]}
    configure(
        roder_home,
        raw_server(
            "one",
            [
                {"name": "café", "result": text_result("with acute")},
                {"name": "cafè", "result": text_result("with grave")},
                {"name": "needs_path", "inputSchema": bad_schema, "result": text_result("never")},
                {"name": "ok", "result": text_result("one ok")},
            ],
        ),
        raw_server("t_wo", [{"name": "ok", "result": text_result("t_wo ok")}]),
        raw_server("t.wo", [{"name": "ok", "result": text_result("t.wo ok")}, {"name": "own", "result": text_result("own")}]),
    )
    names = tool_names("mcp__one__", ["café", "cafè"])
    acute, grave = names["café"], names["cafè"]
    assert acute != grave and acute.startswith("mcp__one__caf__") and grave.startswith("mcp__one__caf__")

    turn, results, statuses = await run_calls(
        workspace, [call(acute), call(grave), call("mcp__one__ok"), call("mcp__t_wo__ok"), call("mcp__t_wo__own")]
    )
    assert turn.status == "completed"
    assert {name: r.text for name, r in results.items()} == {
        acute: "with acute",
        grave: "with grave",
        "mcp__one__ok": "one ok",
        "mcp__t_wo__ok": "t_wo ok",  # the first server keeps the name; the second's is left out
        "mcp__t_wo__own": "own",
    }
    by_name = {s.name: s for s in statuses}
    assert "tool 'needs_path' left out" in (by_name["one"].error or "")
    assert "required ['path'] not in properties" in (by_name["one"].error or "")
    assert "mcp__one__needs_path" not in by_name["one"].tools
    assert "tool 'ok' left out: duplicate tool name 'mcp__t_wo__ok'" in (by_name["t.wo"].error or "")


async def test_a_server_that_leaves_unknown_methods_unanswered_connects_with_what_it_declared(
    workspace: Path, roder_home: Path
) -> None:
    """The server declares tools only and never answers a method it does not know (no
    prompts/list, resources/list): Roder asks only for what was declared, so it connects."""
    configure(
        roder_home,
        raw_server("quiet", [{"name": "ok", "result": text_result("fine")}], RAW_IGNORE_UNKNOWN="1"),
        # Serves tools without declaring them: they are listed all the same.
        raw_server("sloppy", [{"name": "ok", "result": text_result("sloppy fine")}], RAW_UNDECLARED="1"),
    )
    _, results, statuses = await run_calls(workspace, [call("mcp__quiet__ok"), call("mcp__sloppy__ok")])
    assert [(s.name, s.status, s.error) for s in statuses] == [("quiet", "connected", None), ("sloppy", "connected", None)]
    assert (results["mcp__quiet__ok"].text, results["mcp__sloppy__ok"].text) == ("fine", "sloppy fine")


async def test_a_server_that_never_answers_initialize_fails_saying_so(workspace: Path, roder_home: Path) -> None:
    configure(
        roder_home,
        raw_server("mute", [{"name": "ok", "result": text_result("fine")}], RAW_SILENT_INIT="1").replace(
            "startup_timeout = 30", "startup_timeout = 1"
        ),
    )
    turn, results, statuses = await run_calls(workspace, [call("mcp__mute__ok")])
    [status] = statuses
    assert status.status == "failed"
    assert status.error == (
        "failed to start: could not connect: no answer to the handshake (initialize) within 1 s (startup_timeout)"
    )
    assert turn.status == "completed" and results["mcp__mute__ok"].is_error


SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


async def test_results_errors_structured_output_pages_and_media(workspace: Path, roder_home: Path) -> None:
    """Seven tools over three pages; structured output checked against its outputSchema; a tool
    error (isError) and a protocol error both reach the model as errors with the server's words;
    a 3 MB result is cut visibly; an image, audio and a resource link arrive, and a broken image
    is dropped alone, saying so, beside the audio that is kept."""
    tools: list[dict[str, Any]] = [{"name": f"t{i}", "result": text_result(f"page tool {i}")} for i in range(7)]
    wav = base64.b64encode(b"RIFF\x24\x00\x00\x00WAVEfmt ").decode()
    tools += [
        {"name": "struct_ok", "outputSchema": SCHEMA, "result": {"content": [], "structuredContent": {"n": 3}}},
        {"name": "struct_bad", "outputSchema": SCHEMA, "result": {"content": [], "structuredContent": {"n": "three"}}},
        {"name": "iserr", "result": text_result("disk full", isError=True)},
        {"name": "proterr", "error": {"code": -32602, "message": "bad argument: path"}},
        {"name": "huge", "huge": 3_000_000},
        {
            "name": "media",
            "result": {
                "content": [
                    {"type": "image", "data": png(), "mimeType": "image/png"},
                    {"type": "audio", "data": wav, "mimeType": "audio/wav"},
                    {"type": "resource_link", "uri": "file:///x.txt", "name": "x.txt"},
                ]
            },
        },
        {
            "name": "broken_media",
            "result": {
                "content": [
                    {"type": "image", "data": base64.b64encode(b"\x89PNG\r\n\x1a\nnot really").decode(), "mimeType": "image/png"},
                    {"type": "audio", "data": wav, "mimeType": "audio/wav"},
                ]
            },
        },
    ]
    configure(roder_home, raw_server("raw", tools, RAW_PAGE_SIZE="3"))
    names = ["t0", "t6", "struct_ok", "struct_bad", "iserr", "proterr", "huge", "media", "broken_media"]
    turn, results, statuses = await run_calls(workspace, [call(f"mcp__raw__{n}") for n in names])
    assert turn.status == "completed"
    got = {name.removeprefix("mcp__raw__"): r for name, r in results.items()}
    assert len(statuses[0].tools) == len(tools)  # every page listed
    assert (got["t0"].text, got["t6"].text) == ("page tool 0", "page tool 6")
    assert (json.loads(got["struct_ok"].text), got["struct_ok"].data, got["struct_ok"].is_error) == ({"n": 3}, {"n": 3}, False)
    assert got["struct_bad"].is_error and "'three' is not of type 'integer'" in got["struct_bad"].text
    assert (got["iserr"].text, got["iserr"].is_error) == ("disk full", True)
    assert got["proterr"].is_error and got["proterr"].text.endswith("bad argument: path")
    assert got["huge"].text.endswith(
        "[output truncated: 3000000 characters in all; the first 100000 are shown, the last 2900000 were cut]"
    )
    assert len(got["huge"].text) < 100_200
    assert [a.mime_type for a in got["media"].attachments] == ["image/png", "audio/wav"]
    assert "[resource file:///x.txt x.txt]" in got["media"].text
    assert [a.mime_type for a in got["broken_media"].attachments] == ["audio/wav"]
    assert "[an attachment of this result was dropped: mcp__raw__broken_media-image is not an image" in got["broken_media"].text


async def test_control_bytes_and_binary_in_a_result_reach_the_model_as_bash_output_does(
    workspace: Path, roder_home: Path
) -> None:
    """A server's text with NULs (``find -print0``) or a run of binary is read as command output
    is (``shown_text``): escapes and one line saying so, never raw bytes that break a request."""
    binary = "\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03\x00>\x00\x01"
    tools: list[dict[str, Any]] = [
        {"name": "nul", "result": text_result("a.py\x00b.py\x00")},
        {"name": "elf", "result": text_result(f"start\n{binary}\nend\n")},
    ]
    configure(roder_home, raw_server("raw", tools))
    turn, results, _statuses = await run_calls(workspace, [call("mcp__raw__nul"), call("mcp__raw__elf")])
    assert turn.status == "completed"
    assert results["mcp__raw__nul"].text == "a.py\\x00b.py\\x00"
    assert results["mcp__raw__elf"].text == ("start\n[binary data not shown]\nend\n")


async def test_protocol_versions_older_ones_work_and_an_unknown_one_is_named(workspace: Path, roder_home: Path) -> None:
    configure(
        roder_home,
        raw_server("old", [{"name": "ok", "result": text_result("old fine")}], RAW_PROTOCOL="2024-11-05"),
        raw_server("mid", [{"name": "ok", "result": text_result("mid fine")}], RAW_PROTOCOL="2025-03-26"),
        raw_server("future", [{"name": "ok", "result": text_result("never")}], RAW_PROTOCOL="2099-01-01"),
    )
    _, results, statuses = await run_calls(workspace, [call("mcp__old__ok"), call("mcp__mid__ok")])
    assert (results["mcp__old__ok"].text, results["mcp__mid__ok"].text) == ("old fine", "mid fine")
    future = next(s for s in statuses if s.name == "future")
    assert future.status == "failed" and "Unsupported protocol version from the server: 2099-01-01" in (future.error or "")


async def test_an_interrupted_call_sends_cancelled_and_a_crash_mid_call_is_one_clear_error(
    workspace: Path, roder_home: Path, tmp_path: Path
) -> None:
    journal = tmp_path / "journal"
    configure(
        roder_home,
        raw_server(
            "raw",
            [{"name": "slow", "sleep": 1}, {"name": "boom", "exit": 1}, {"name": "ok", "result": text_result("fine")}],
            RAW_JOURNAL=str(journal),
        ),
    )
    host = host_for(workspace, trusted=False)
    script = [
        {"tool_calls": [call("mcp__raw__slow")]},
        {"tool_calls": [call("mcp__raw__boom")]},
        {"tool_calls": [call("mcp__raw__ok")]},
        {"text": "done"},
    ]
    runtime = runtime_with(host, [roder_ext_mcp.create(host)], script)
    try:
        thread = await runtime.start_thread()
        await runtime.start_turn(thread.id, "go")
        await until(lambda: journal.exists() and '"tools/call"' in journal.read_text(), 60)
        await runtime.interrupt(thread.id)
        assert (await runtime.wait_turn(thread.id)).status == "interrupted"
        await until(lambda: "notifications/cancelled" in journal.read_text())
        sent = [json.loads(line) for line in journal.read_text().splitlines()]
        [called] = [m for m in sent if m.get("method") == "tools/call"]
        [cancelled] = [m for m in sent if m.get("method") == "notifications/cancelled"]
        assert cancelled["params"]["requestId"] == called["id"]

        turn = await runtime.run_turn(thread.id, "again")
        assert turn.status == "completed"
        boom, ok = [r for r in items(runtime, thread.id, ToolResultItem) if r.name != "mcp__raw__slow"]
        assert boom.is_error and "the server closed the connection (it exited or crashed)" in boom.text
        assert "crashing in the middle of a call" in boom.text  # its stderr
        assert (ok.text, ok.is_error) == ("fine", False)  # restarted for the next call
    finally:
        await runtime.close()


async def test_an_answer_too_long_to_hold_fails_its_call_and_the_server_stays(workspace: Path, roder_home: Path) -> None:
    """A result line past the 64 MiB limit is refused as the answer to its call (read in pieces,
    never held whole) and the connection goes on: the next call answers."""
    configure(
        roder_home,
        raw_server("raw", [{"name": "flood", "huge": 66 * 1024 * 1024}, {"name": "ok", "result": text_result("still here")}]),
    )
    host = host_for(workspace, trusted=False)
    script = [{"tool_calls": [call("mcp__raw__flood")]}, {"tool_calls": [call("mcp__raw__ok")]}, {"text": "done"}]
    runtime = runtime_with(host, [roder_ext_mcp.create(host)], script)
    try:
        thread = await runtime.start_thread()
        assert (await runtime.run_turn(thread.id, "go")).status == "completed"
        flood, ok = items(runtime, thread.id, ToolResultItem)
    finally:
        await runtime.close()
    assert flood.is_error
    assert (
        flood.text
        == "MCP server 'raw' refused the call: MCPError: the MCP server's answer was refused: a line of over 64 MiB (the limit)"
    )
    assert (ok.text, ok.is_error) == ("still here", False)
