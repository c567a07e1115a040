"""An MCP server that hangs, as a real process. It writes its pid to the file named by argv[1].

``python mcp_hanging_server.py PIDFILE`` is stuck before its handshake: it never reads stdin nor
answers ``initialize`` (as a server blocked on a slow start would).

``python mcp_hanging_server.py PIDFILE at-exit`` completes its handshake and answers every request
(one tool, ``ping``), but ignores the end of its stdin and SIGTERM, as a server whose shutdown is
stuck (a blocked worker thread, a hung flush) does: only SIGKILL ends it. ``exits`` is its healthy
twin (the same server, which exits when its stdin ends), for measurements.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

Path(sys.argv[1]).write_text(str(os.getpid()), encoding="utf-8")
if sys.argv[2:] not in (["at-exit"], ["exits"]):
    print("hanging server: blocked before initialize", file=sys.stderr, flush=True)
    while True:
        time.sleep(3600)

hangs = sys.argv[2] == "at-exit"
if hangs:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
TOOL = {"name": "ping", "description": "Answer pong.", "inputSchema": {"type": "object", "properties": {}}}
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method = message.get("method")
    if method == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hangs-at-exit", "version": "1"},
        }
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
    elif method == "tools/list":
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": {"tools": [TOOL]}}
    elif method == "tools/call":
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": {"content": [{"type": "text", "text": "pong"}]}}
    else:
        reply = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": f"no method {method}"}}
    print(json.dumps(reply), flush=True)
print(f"hanging server: stdin closed; {'not exiting' if hangs else 'exiting'}", file=sys.stderr, flush=True)
while hangs:
    time.sleep(3600)
