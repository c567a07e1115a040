"""An MCP server written by hand, without any MCP library: JSON-RPC lines on stdin/stdout, as an
author in another language writes one. Its behaviour comes from environment variables, so one
file plays every misbehaving server the edge-case tests need:

- ``RAW_TOOLS``: a JSON list of tool definitions (``name``, optional ``description``,
  ``inputSchema``, ``outputSchema``); each call answers with the tool's ``result`` (a JSON
  ``CallToolResult``), ``error`` (a JSON-RPC error object), ``sleep`` (never answers; logs the
  ``notifications/cancelled`` it gets), ``exit`` (the process exits mid-call) or ``huge`` (that
  many characters of text; ``huge_blocks``: text blocks of those sizes and a last one ``TAIL``;
  ``huge_structured``: only structured content of that many characters; ``raw_answer``: the
  whole answer message as given, only its id filled in).
  A tool's ``before`` is a list of messages sent before its answer (a ``ping`` request or a
  notification mid-call), and ``before_bytes`` a line of raw bytes (hex) written first.
- ``RAW_PAGE_SIZE``: tools/list answers this many tools a page, with ``nextCursor``.
- ``RAW_CURSOR_LOOP``: every page of tools/list names the same ``nextCursor`` again (a server
  whose pagination never ends).
- ``RAW_PROTOCOL``: the protocolVersion the server answers initialize with.
- ``RAW_SILENT_INIT``: never answer initialize.
- ``RAW_IGNORE_UNKNOWN``: requests for methods it does not know get no answer at all.
- ``RAW_UNDECLARED``: the handshake declares no capabilities (tools are served all the same).
- ``RAW_JOURNAL``: a file each received message is appended to (one JSON line each).
"""

from __future__ import annotations

import json
import os
import sys

TOOLS: list[dict] = json.loads(os.environ.get("RAW_TOOLS", "[]"))
PAGE = int(os.environ.get("RAW_PAGE_SIZE", "0"))
JOURNAL = os.environ.get("RAW_JOURNAL", "")


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def journal(message: dict) -> None:
    if JOURNAL:
        with open(JOURNAL, "a", encoding="utf-8") as f:
            f.write(json.dumps(message) + "\n")


def listing(cursor: str | None) -> dict:
    public = [{k: v for k, v in t.items() if k in ("name", "description", "inputSchema", "outputSchema", "title")} for t in TOOLS]
    for tool in public:
        tool.setdefault("inputSchema", {"type": "object"})
    if not PAGE:
        return {"tools": public}
    start = int(cursor or 0)
    page = {"tools": public[start : start + PAGE]}
    if os.environ.get("RAW_CURSOR_LOOP"):
        page["nextCursor"] = str(start)
    elif start + PAGE < len(public):
        page["nextCursor"] = str(start + PAGE)
    return page


def call(message: dict) -> None:
    name = message["params"]["name"]
    tool = next((t for t in TOOLS if t["name"] == name), None)
    for before in (tool or {}).get("before", []):
        send(before)
    if tool is not None and "before_bytes" in tool:
        sys.stdout.buffer.write(bytes.fromhex(tool["before_bytes"]) + b"\n")
        sys.stdout.buffer.flush()
    if tool is None:
        send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32602, "message": f"unknown tool {name}"}})
    elif "error" in tool:
        send({"jsonrpc": "2.0", "id": message["id"], "error": tool["error"]})
    elif "sleep" in tool:
        print(f"sleeping in call {message['id']}", file=sys.stderr, flush=True)
    elif "exit" in tool:
        print("crashing in the middle of a call", file=sys.stderr, flush=True)
        os._exit(7)
    elif "raw_answer" in tool:  # the answer's envelope as given, with the call's id
        send({**tool["raw_answer"], "id": message["id"]})
    elif "huge" in tool:
        text = "x" * int(tool["huge"])
        send({"jsonrpc": "2.0", "id": message["id"], "result": {"content": [{"type": "text", "text": text}]}})
    elif "huge_blocks" in tool:  # text blocks of these many characters each, the last one "TAIL"
        blocks = [{"type": "text", "text": "x" * int(n)} for n in tool["huge_blocks"]] + [{"type": "text", "text": "TAIL"}]
        send({"jsonrpc": "2.0", "id": message["id"], "result": {"content": blocks}})
    elif "huge_structured" in tool:  # no content, structured content of that many characters
        structured = {"x": "y" * int(tool["huge_structured"])}
        send({"jsonrpc": "2.0", "id": message["id"], "result": {"content": [], "structuredContent": structured}})
    else:
        send({"jsonrpc": "2.0", "id": message["id"], "result": tool["result"]})


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        journal(message)
        method = message.get("method")
        if method == "initialize":
            if os.environ.get("RAW_SILENT_INIT"):
                continue
            version = os.environ.get("RAW_PROTOCOL") or message["params"]["protocolVersion"]
            send(
                {
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "result": {
                        "protocolVersion": version,
                        "capabilities": {} if os.environ.get("RAW_UNDECLARED") else {"tools": {"listChanged": True}},
                        "serverInfo": {"name": "raw", "version": "1"},
                    },
                }
            )
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": message["id"], "result": listing((message.get("params") or {}).get("cursor"))})
        elif method == "tools/call":
            call(message)
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        elif "id" in message and method is not None and not os.environ.get("RAW_IGNORE_UNKNOWN"):
            send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": f"no {method}"}})


if __name__ == "__main__":
    main()
