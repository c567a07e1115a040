"""Helpers for control-plane tests: a trusted workspace with test tools, a mock script, servers.

The tools live in a project extension (``.roder/extensions/testtools.py``), loaded by a real
``roder`` subprocess started with ``--trust``; they reach the machine only through brokers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

TOOLS_EXTENSION = '''
from roder_core import (EXTENSION_API_VERSION, CapabilityRequest, ExtensionManifest, ProvidedService,
                        RoderExtension, Tool, ToolResult)
from roder_core.ir import FileChange, FileChangeItem


class WriteNote(Tool):
    name = "write_note"
    description = "Write text to a file in the workspace."
    parameters = {"type": "object", "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
                  "required": ["path", "text"]}
    kind = "edit"

    def mutated_paths(self, arguments, workspace):
        return [arguments["path"]]

    async def preview(self, ctx, call):
        return {"diff": "--- /dev/null\\n+++ " + call.arguments["path"] + "\\n@@\\n+" + call.arguments["text"]}

    async def execute(self, ctx, call):
        path = ctx.brokers.fs.write_bytes(call.arguments["path"], call.arguments["text"].encode())
        view = FileChangeItem(call_id=call.id, changes=[FileChange(path=str(path), kind="add",
                              diff="+" + call.arguments["text"])])
        return ToolResult(id=call.id, name=call.name, text=f"wrote {path}", views=[view])


class Shell(Tool):
    name = "shell"
    description = "Run a shell command."
    parameters = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
    kind = "execute"

    async def execute(self, ctx, call):
        result = await ctx.brokers.process.run(call.arguments["command"], timeout=30, on_output=ctx.emit_output)
        return ToolResult(id=call.id, name=call.name, text=f"exit {result.exit_code}\\n{result.output}")


class Peek(Tool):
    name = "peek"
    description = "A read-only tool."
    parameters = {"type": "object", "properties": {"x": {"type": "string"}}}
    kind = "read"
    read_only = True

    async def execute(self, ctx, call):
        return ToolResult(id=call.id, name=call.name, text="peeked " + str(call.arguments.get("x", "")))


class Tools:
    def id(self):
        return "test-tools"

    def contribute(self, registry):
        for tool in (WriteNote(), Shell(), Peek()):
            registry.register(tool)


class TestTools(RoderExtension):
    def manifest(self):
        return ExtensionManifest(
            id="test-tools", name="Test tools", version="0.1.0", api_version=EXTENSION_API_VERSION,
            description="tools for control-plane tests", provides=[ProvidedService.ToolProvider("test-tools")],
            required_capabilities=[CapabilityRequest("fs.write.workspace"),
                                   CapabilityRequest("process.spawn.shell")],
        )

    def install(self, registry):
        registry.tool_contributor(Tools())


def create(host):
    return TestTools()
'''


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def trusted_workspace(root: Path, steps: list[dict[str, Any]] | None = None) -> tuple[Path, dict[str, str]]:
    """A workspace with the test tools and (optionally) a mock script; returns it and the env."""
    workspace = root / "ws"
    (workspace / ".roder" / "extensions").mkdir(parents=True, exist_ok=True)
    (workspace / ".roder" / "extensions" / "testtools.py").write_text(TOOLS_EXTENSION)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if steps is not None:
        script = root / "script.json"
        script.write_text(json.dumps({"steps": steps}))
        env["RODER_MOCK_SCRIPT"] = str(script)
    return workspace, env


def roder_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "roder_tui.cli", *args]


def start_app_server(workspace: Path, env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        roder_command("app-server", "--provider", "mock", "--trust", *args),
        cwd=workspace, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
