"""An MCP server over stdio, written by hand, whose one tool answers with JSON nested 100,000
deep (``structuredContent``), or with ``MCP_DEEP_MODE=long`` with one line of 200 MB (a text
of that size, written a megabyte at a time): the wire bytes are what a hostile server would send."""

from __future__ import annotations

import json
import os
import sys

DEPTH = 100_000


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        method, request_id = request.get("method"), request.get("id")
        if method == "initialize":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "result": {
                        "protocolVersion": request["params"]["protocolVersion"],
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "deep", "version": "1"},
                    },
                }
            )
        elif method == "tools/list":
            tool = {
                "name": "deep",
                "description": "returns data",
                "inputSchema": {"type": "object", "properties": {}},
                "annotations": {"readOnlyHint": True},
            }
            send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": [tool]}})
        elif method == "tools/call" and os.environ.get("MCP_DEEP_MODE") == "long":
            sys.stdout.write(f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"result":{{"content":[{{"type":"text","text":"')
            for _ in range(200):
                sys.stdout.write("x" * 1024 * 1024)
            sys.stdout.write('"}]}}\n')
            sys.stdout.flush()
        elif method == "tools/call":
            nested = "[" * DEPTH + "]" * DEPTH
            sys.stdout.write(
                f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"result":{{"content":[{{"type":"text","text":"x"}}],'
                f'"structuredContent":{{"a":{nested}}}}}}}\n'
            )
            sys.stdout.flush()
        elif request_id is not None:
            empty = {"prompts/list": "prompts", "resources/list": "resources", "resources/templates/list": "resourceTemplates"}
            send({"jsonrpc": "2.0", "id": request_id, "result": {empty[method]: []} if method in empty else {}})


if __name__ == "__main__":
    main()
