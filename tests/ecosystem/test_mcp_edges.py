"""MCP servers that misbehave or stretch the protocol, as real processes: a server written by hand
(tests/ecosystem/mcp_raw_server.py, no MCP library) plays each case."""

from __future__ import annotations

import asyncio
import json
import sys
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
    configure(roder_home, raw_server("quiet", [{"name": "ok", "result": text_result("fine")}], RAW_IGNORE_UNKNOWN="1"))
    turn, results, statuses = await run_calls(workspace, [call("mcp__quiet__ok")])
    assert [(s.name, s.status, s.error) for s in statuses] == [("quiet", "connected", None)]
    assert results["mcp__quiet__ok"].text == "fine"


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
    assert status.error == "could not connect: no answer to the handshake (initialize) within 1 s (startup_timeout)"
    assert turn.status == "completed" and results["mcp__mute__ok"].is_error
