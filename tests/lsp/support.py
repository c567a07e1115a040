"""What the language-server tests share: where the servers are, and one scripted turn of edits
through the real loop with the tool results and the status bar's lsp segment after it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.builders import scripted_client, tool_steps, turn_tool_results


def tools_path() -> str:
    """PATH with the language servers: .ci/run installs them with npm into RODER_TEST_LSP_BIN."""
    extra = os.environ.get("RODER_TEST_LSP_BIN", "")
    return os.pathsep.join(p for p in (extra, os.environ.get("PATH", "")) if p)


def need(command: str) -> None:
    if shutil.which(command, path=tools_path()) is None:
        message = f"{command} is not installed (.ci/run installs it: npm install pyright typescript typescript-language-server)"
        if os.environ.get("RODER_REQUIRE_LSP"):
            pytest.fail(message)
        pytest.skip(message)


#: Generous: a language server's first analysis on a loaded 2-core machine takes tens of seconds.
SLOW_MACHINE = "hook_timeout = 300\n[lsp]\ndiagnostics_timeout = 280\nsettle_seconds = 3\n"


async def tool_results(workspace: Path, tmp_path: Path, calls: list[dict[str, Any]]) -> tuple[list[Any], str]:
    """The tool results of one turn making ``calls``, and the status bar's lsp segment after it."""
    config = Path(os.environ["RODER_HOME"]) / "config.toml"
    if "[lsp]" not in (config.read_text() if config.exists() else ""):
        config.write_text((config.read_text() if config.exists() else "") + SLOW_MACHINE)
    async with scripted_client(workspace, tmp_path, tool_steps(calls), env={"PATH": tools_path()}) as app:
        results = await turn_tool_results(app, timeout=600)
        views = [s.render({}) for s in app.runtime.registry.status_segments if s.id() == "lsp"]
        status = " ".join(view.text for view in views if view is not None)
    return results, status


def edit(path: str, old: str, new: str) -> dict[str, Any]:
    return {"name": "edit", "arguments": {"path": path, "old_string": old, "new_string": new}}
