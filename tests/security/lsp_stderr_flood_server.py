"""A language server that writes a 200 KB line to its stderr, then 1 MB more of short lines,
before it answers ``initialize``: a client that stops reading its stderr leaves it blocked on a
full pipe, and the answer never comes. Then it answers every request with ``null`` until stdin
closes, after a last stderr line ``flood server: done``."""

from __future__ import annotations

import json
import sys


def main() -> None:
    sys.stderr.buffer.write(b"x" * 200_000 + b"\n")
    for n in range(20_000):
        sys.stderr.buffer.write(b"flood server: line %d of its start-up chatter\n" % n)
    sys.stderr.flush()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        length = 0
        while (header := stdin.readline()) not in (b"\r\n", b""):
            if header.lower().startswith(b"content-length:"):
                length = int(header.split(b":")[1])
        if not header:
            break
        message = json.loads(stdin.read(length))
        if "id" in message:
            result = {"capabilities": {}} if message.get("method") == "initialize" else None
            body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
            stdout.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            stdout.flush()
    sys.stderr.write("flood server: done\n")


if __name__ == "__main__":
    main()
