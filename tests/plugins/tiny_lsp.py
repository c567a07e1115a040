"""A small language server on stdio for the tests: every line holding BROKEN is an error, told
when asked (pull diagnostics). It answers shutdown and leaves with code 0 at exit, as a
well-behaved server does; killed instead, it would end by a signal."""

from __future__ import annotations

import json
import sys
from typing import Any

documents: dict[str, str] = {}


def read() -> dict[str, Any] | None:
    length = 0
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    message: dict[str, Any] = json.loads(sys.stdin.buffer.read(length))
    return message


def send(message: dict[str, Any]) -> None:
    body = json.dumps(message).encode()
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    sys.stdout.buffer.flush()


def diagnostics(text: str) -> list[dict[str, Any]]:
    found = []
    for number, line in enumerate(text.splitlines()):
        if "BROKEN" in line:
            span = {"start": {"line": number, "character": 0}, "end": {"line": number, "character": len(line)}}
            found.append({"range": span, "severity": 1, "message": "tiny: this line is broken", "source": "tiny"})
    return found


def main() -> int:
    while (message := read()) is not None:
        method, params = message.get("method"), message.get("params") or {}
        if method == "initialize":
            capabilities = {"textDocumentSync": 1, "diagnosticProvider": {"interFileDependencies": False}}
            send({"id": message["id"], "result": {"capabilities": capabilities}})
        elif method in ("textDocument/didOpen", "textDocument/didChange"):
            document = params["textDocument"]
            text = document.get("text", (params.get("contentChanges") or [{}])[-1].get("text", ""))
            documents[document["uri"]] = text
        elif method == "textDocument/diagnostic":
            items = diagnostics(documents.get(params["textDocument"]["uri"], ""))
            send({"id": message["id"], "result": {"kind": "full", "items": items}})
        elif (code := lifecycle(message)) is not None:
            return code
    return 1  # stdin closed without an exit: not a clean stop


def lifecycle(message: dict[str, Any]) -> int | None:
    """The rest of the protocol, as every well-behaved server answers it: ``shutdown``, then
    ``exit`` (the exit code, 0); any other request is refused as not handled."""
    method = message.get("method")
    if method == "shutdown":
        send({"id": message["id"], "result": None})
    elif method == "exit":
        return 0
    elif "id" in message:
        send({"id": message["id"], "error": {"code": -32601, "message": f"{method} is not handled"}})
    return None


if __name__ == "__main__":
    sys.exit(main())
