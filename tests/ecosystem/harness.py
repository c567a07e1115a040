"""Runtimes for ecosystem tests: the mock engine plus the real extensions under test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from roder_ext_mock import MockEngine, MockProviderExtension

from roder_core import RoderExtension, Tool
from roder_core.kernel.distribution import HostContext, make_host
from roder_core.runtime.runtime import Runtime
from tests.builders import build_runtime
from tests.core.harness import ReadTool, SleepTool, TestExtension

FIXTURE_SERVER = Path(__file__).with_name("mcp_fixture_server.py")


def host_for(workspace: Path, *, trusted: bool, env: dict[str, str] | None = None) -> HostContext:
    return make_host(workspace, env={**os.environ, **(env or {})}, trust=trusted)


def runtime_with(
    host: HostContext,
    extensions: list[RoderExtension],
    script: list[dict[str, Any]] | None = None,
    *,
    tools: list[Tool] | None = None,
    mode: str = "bypass",
    interactive: bool = False,
    engine: RoderExtension | None = None,
) -> Runtime:
    return build_runtime(
        host.cwd,
        script=script,
        engine=engine,
        extensions=[TestExtension(tools if tools is not None else [SleepTool(), ReadTool()]), *extensions],
        paths=host.paths,
        config=host.config,
        mode=mode,
        interactive=interactive,
        trusted=host.trusted,
    )


def items(runtime: Runtime, thread_id: str, kind: type) -> list[Any]:
    return [i for i in runtime.thread(thread_id).items() if isinstance(i, kind)]


def start_http_fixture(
    token: str = "", mode: str = "http", env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """The fixture MCP server over HTTP on loopback (``mode``: ``http``, ``http-oauth``,
    ``sse-oauth``); returns (process, url) once the server's socket listens (it prints the port then)."""
    proc = subprocess.Popen(
        [sys.executable, str(FIXTURE_SERVER), mode],
        env={**os.environ, "FIXTURE_TOKEN": token, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.isdigit():
        proc.kill()
        raise RuntimeError(f"fixture server exited: {proc.stderr.read().decode() if proc.stderr else ''}")
    return proc, f"http://127.0.0.1:{int(line)}/{'sse' if mode.startswith('sse') else 'mcp'}"


class RoutedMockEngine(MockEngine):
    """The mock engine with one script per kind of thread: threads whose first message contains
    a marker (a subagent's task) play ``child_script``, every other thread plays ``script``."""

    def __init__(self, script: list[dict[str, Any]], child_script: list[dict[str, Any]], marker: str) -> None:
        super().__init__(script)
        self._child = MockEngine(child_script)
        self._marker = marker

    def _next_step(self, ctx: Any, request: Any) -> dict[str, Any]:
        first = next((m.text() for m in request.messages if m.role == "user"), "")
        if self._marker in first:
            return self._child._next_step(ctx, request)
        return super()._next_step(ctx, request)


class RoutedMockExtension(MockProviderExtension):
    def __init__(self, script: list[dict[str, Any]], child_script: list[dict[str, Any]], marker: str) -> None:
        self.engine = RoutedMockEngine(script, child_script, marker)
