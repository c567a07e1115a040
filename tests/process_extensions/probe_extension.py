"""A process extension for the tests, written with the Python SDK: tools that crash, hang, wait
for cancellation, and probe what the sandbox lets through."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, os.environ["RODER_SDK_PATH"])

from roder_extension_sdk import Extension, ToolContext

ext = Extension("probe", "Probe", "0.1.0", capabilities=[c for c in os.environ.get("PROBE_REQUIRES", "").split(",") if c])
MARKS = Path(os.environ["PROBE_MARKS"])


def mark(name: str) -> None:
    (MARKS / name).write_text(INSTANCE)


@ext.tool("crash", "Exit the process at once.")
async def crash(arguments: dict[str, Any], ctx: ToolContext) -> str:
    print("about to crash: goodbye", file=sys.stderr, flush=True)
    os._exit(3)


@ext.tool("hang", "Never answer.")
async def hang(arguments: dict[str, Any], ctx: ToolContext) -> str:
    mark("hang-started")
    await asyncio.Event().wait()
    return "unreachable"


@ext.tool("wait_for_cancel", "Wait until Roder cancels the call.")
async def wait_for_cancel(arguments: dict[str, Any], ctx: ToolContext) -> str:
    mark("waiting")
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        mark("cancelled")
        raise
    return "unreachable"


@ext.tool("hold", "Answer once the test leaves a release mark.")
async def hold(arguments: dict[str, Any], ctx: ToolContext) -> str:
    mark("holding")
    while not (MARKS / "release").exists():  # the extension's own wait: the test waits on the mark
        await asyncio.sleep(0.02)
    return "released"


@ext.context_provider("probe-context")
async def context(query: dict[str, Any]) -> list[dict[str, Any]]:
    (MARKS / "prompt").write_text(str(query.get("prompt", "")))
    return []


INSTANCE = uuid.uuid4().hex  # pids repeat inside the sandbox's own pid namespace


@ext.tool("instance", "Which start of the extension process answers.", read_only=True)
async def instance(arguments: dict[str, Any], ctx: ToolContext) -> str:
    return INSTANCE


@ext.tool("probe", "Say what the process can reach.", read_only=True)
async def probe(arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    found: dict[str, Any] = {}
    try:
        found["workspace"] = sorted(os.listdir(ctx.workspace))
    except OSError as exc:
        found["workspace"] = f"error: {exc.strerror}"
    try:
        (Path(ctx.workspace) / "written-by-probe").write_text("x")
        found["write"] = "ok"
    except OSError as exc:
        found["write"] = f"error: {exc.strerror}"
    secret = Path(os.environ["PROBE_SECRET_FILE"])
    try:
        found["secret_file"] = secret.read_text()
    except OSError as exc:
        found["secret_file"] = f"error: {exc.strerror}"
    found["secret_env"] = "present" if os.environ.get("PROBE_TOKEN") else "unset"
    found["secret_echo"] = os.environ.get("PROBE_TOKEN", "")  # what a careless extension might print
    found["env_names"] = sorted(os.environ)
    try:
        with socket.create_connection(("127.0.0.1", int(os.environ["PROBE_PORT"])), timeout=5):
            found["network"] = "connected"
    except OSError as exc:
        found["network"] = f"error: {exc.strerror or exc}"
    return {"text": "probed", "data": found}


if __name__ == "__main__":
    ext.run()
