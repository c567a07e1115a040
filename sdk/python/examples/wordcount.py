"""An out-of-process extension in Python: a read-only tool, a hook, a policy contributor, a
context provider and a status segment (run by Roder as ``[extensions.process.wordcount]``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the SDK beside this folder

from roder_extension_sdk import Extension, ExtensionError, ToolContext

ext = Extension("acme-wordcount", "Word count", "0.1.0", description="Counts words", capabilities=["fs.read.workspace"])
calls = {"count": 0}


@ext.tool(
    "word_count",
    "Count the words and lines of a text file in the workspace.",
    {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "path relative to the workspace"}},
        "required": ["path"],
    },
    read_only=True,
)
async def word_count(arguments: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    path = (ctx.workspace / arguments["path"]).resolve()
    if not path.is_relative_to(ctx.workspace.resolve()):
        raise ExtensionError(f"{arguments['path']} is outside the workspace")
    ctx.output(f"reading {arguments['path']}\n")
    text = path.read_text(encoding="utf-8")
    calls["count"] += 1
    words, lines = len(text.split()), len(text.splitlines())
    return {"text": f"{words} words, {lines} lines", "data": {"words": words, "lines": lines}}


@ext.hook("no-force-push", ["tool_call_before"])
def no_force_push(point: str, payload: dict[str, Any]) -> dict[str, Any] | None:
    command = str(payload.get("arguments", {}).get("command", ""))
    if payload.get("tool") == "bash" and "push --force" in command:
        return {"block": True, "reason": "force pushes are not allowed here"}
    return None


@ext.policy("lockfiles")
def lockfiles(tool: str, arguments: dict[str, Any], mode: str) -> dict[str, Any] | None:
    if tool in ("write", "edit") and str(arguments.get("path", "")).endswith(".lock"):
        return {"verdict": "deny", "reason": "lock files are written by the package manager"}
    return None


@ext.context_provider("house-rules")
def house_rules(query: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"text": "House rule: answer in one sentence.", "source": "rules"}]


@ext.status_segment("wordcount-calls")
def status(state: dict[str, Any]) -> dict[str, Any] | None:
    return {"text": f"wc:{calls['count']}"} if calls["count"] else None


if __name__ == "__main__":
    ext.run()
