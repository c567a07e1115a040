"""A language server that misbehaves the way real ones do, on stdio, for the tests. It only
publishes diagnostics (no pull): every line holding BROKEN is an error (as the tiny server
says it). ``ODD_MODE`` picks the
misbehaviour:

- ``slow-start``: never answers ``initialize``;
- ``crash``: exits with status 3 at the first change of a document, saying why on stderr;
- ``other-file``: publishes each document's diagnostics under another file's URI;
- ``unversioned``: publishes without a version (as many servers do).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins"))
from tiny_lsp import diagnostics, lifecycle, read, send

MODE = os.environ.get("ODD_MODE", "")


def publish(uri: str, version: int, text: str) -> None:
    params: dict[str, Any] = {"uri": uri, "diagnostics": diagnostics(text)}
    if MODE == "other-file":
        params["uri"] = uri.rsplit("/", 1)[0] + "/someone_else.odd"
    if MODE != "unversioned":
        params["version"] = version
    send({"method": "textDocument/publishDiagnostics", "params": params})


def main() -> int:
    while (message := read()) is not None:
        method, params = message.get("method"), message.get("params") or {}
        if method == "initialize":
            if MODE != "slow-start":
                send({"id": message["id"], "result": {"capabilities": {"textDocumentSync": 1}}})
        elif method == "textDocument/didOpen":
            document = params["textDocument"]
            publish(document["uri"], document["version"], document["text"])
        elif method == "textDocument/didChange":
            if MODE == "crash":
                print("odd: cannot handle a change, giving up", file=sys.stderr, flush=True)
                return 3
            document = params["textDocument"]
            publish(document["uri"], document["version"], params["contentChanges"][-1]["text"])
        elif (code := lifecycle(message)) is not None:
            return code
    return 1


if __name__ == "__main__":
    sys.exit(main())
