"""Answers an MCP server author gets wrong, each played by a real server process
(tests/ecosystem/mcp_raw_server.py): every call ends at once, with the server's text where it
can be read and one plain line where it cannot, and the server stays connected."""

from __future__ import annotations

from pathlib import Path

from tests.core.harness import call
from tests.ecosystem.test_mcp_edges import SCHEMA, configure, raw_server, run_calls, text_result


async def test_an_answer_a_server_wrote_wrong_ends_its_call_at_once_saying_why(workspace: Path, roder_home: Path) -> None:
    """A lone surrogate escaped in a text (``"caf\\udce9"``: valid JSON, no valid UTF-8) used to
    be skipped as noise, so its call waited for the 10-minute tool timeout; it is read with
    U+FFFD, as undecodable bytes are. An answer whose envelope is wrong (``"jsonrpc": "1.0"``)
    fails its own call at once. A content block of a type MCP does not have is one line, not
    pydantic's page of union errors. The next call to the same server answers."""
    tools = [
        {"name": "surrogate", "raw_answer": {"jsonrpc": "2.0", "result": text_result("caf\udce9 ok")}},
        {"name": "envelope", "raw_answer": {"jsonrpc": "1.0", "result": text_result("never read")}},
        {"name": "video", "result": {"content": [{"type": "text", "text": "hi"}, {"type": "video", "data": "AAAA"}]}},
        # Held: a ping from the server mid-call is answered; undecodable bytes on stdout are
        # skipped; an error result owes nothing to its outputSchema.
        {"name": "ping", "before": [{"jsonrpc": "2.0", "id": "srv-1", "method": "ping"}], "result": text_result("pinged")},
        {"name": "bytes", "before_bytes": "fffe41", "result": text_result("after the junk")},
        {"name": "failed", "outputSchema": SCHEMA, "result": text_result("no disk", isError=True)},
        {"name": "ok", "result": text_result("still here")},
    ]
    configure(roder_home, raw_server("raw", tools))
    turn, results, statuses = await run_calls(workspace, [call(f"mcp__raw__{t['name']}") for t in tools])
    assert turn.status == "completed"
    got = {name.removeprefix("mcp__raw__"): (r.text, r.is_error) for name, r in results.items()}
    assert got["surrogate"] == ("caf\ufffd ok", False)
    envelope, envelope_failed = got["envelope"]
    assert envelope_failed and envelope.startswith(
        "MCP server 'raw' refused the call: MCPError: the MCP server's answer is not valid JSON-RPC: "
    )
    assert "jsonrpc: Input should be '2.0' (" in envelope and "\n" not in envelope
    video, video_failed = got["video"]
    assert video_failed and video.startswith(
        "MCP server 'raw' refused the call: the server's answer does not fit the MCP schema: content.1."
    )
    assert video.endswith(" problems; the first)") and "\n" not in video
    assert (got["ping"], got["bytes"], got["failed"]) == (("pinged", False), ("after the junk", False), ("no disk", True))
    assert got["ok"] == ("still here", False)
    assert [(s.status, s.error) for s in statuses] == [("connected", None)]


async def test_pagination_that_never_ends_stops_saying_so_and_a_tool_listed_twice_is_offered_once(
    workspace: Path, roder_home: Path
) -> None:
    """``loop`` names the same ``nextCursor`` on every page; ``twice`` lists one tool twice. Both
    tools are offered and answer, ``loop``'s status says its listing was cut and why, and no
    tool reads as "left out" for clashing with itself."""
    configure(
        roder_home,
        raw_server("loop", [{"name": "a", "result": text_result("a")}], RAW_PAGE_SIZE="1", RAW_CURSOR_LOOP="1"),
        raw_server("twice", [{"name": "b", "result": text_result("b")}, {"name": "b", "result": text_result("b again")}]),
    )
    turn, results, statuses = await run_calls(workspace, [call("mcp__loop__a"), call("mcp__twice__b")])
    assert turn.status == "completed"
    assert {name: r.text for name, r in results.items()} == {"mcp__loop__a": "a", "mcp__twice__b": "b"}
    by_name = {s.name: s for s in statuses}
    assert by_name["loop"].tools == ["mcp__loop__a"] and by_name["twice"].tools == ["mcp__twice__b"]
    assert by_name["loop"].error == "tools listing stopped after 1: its tools/list gave the cursor '0' again"
    assert by_name["twice"].error is None
