"""A raw process extension for tests/process_extensions/test_restart_handshake.py: it answers
``initialize`` and ``tool/execute``, and exits on the tool ``crash``. Started a second time (its
marks folder has ``first``), it holds its ``initialize`` answer until the test opens the FIFO
``go``, then records in ``order`` whether another request was already waiting on its stdin
(``early``: Roder sent a call before its ``initialize`` was answered) or not (``late``)."""

from __future__ import annotations

import json
import os
import select
import sys

marks = sys.argv[1]
second = os.path.exists(os.path.join(marks, "first"))
open(os.path.join(marks, "first"), "a").close()


def line() -> bytes:
    """One line of stdin, read a byte at a time (no read-ahead, so select sees what waits)."""
    read = b""
    while not read.endswith(b"\n"):
        byte = os.read(0, 1)
        if not byte:
            sys.exit(0)
        read += byte
    return read


def answer(request_id: int, result: object) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}) + "\n")
    sys.stdout.flush()


while True:
    message = json.loads(line())
    if message.get("method") == "initialize":
        if second:
            open(os.path.join(marks, "init2"), "w").close()
            with open(os.path.join(marks, "go")) as go:
                go.read()
            waiting = bool(select.select([0], [], [], 0)[0])
            with open(os.path.join(marks, "order"), "w") as order:
                order.write("early" if waiting else "late")
        manifest = {"id": "restart-probe", "name": "restart-probe", "version": "0.1.0", "api_version": "0.1.0"}
        answer(message["id"], {"manifest": manifest, "services": {}})
    elif message.get("method") == "tool/execute":
        if message["params"].get("tool") == "crash":
            sys.exit(3)
        answer(message["id"], {"text": "ok"})
