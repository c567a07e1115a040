"""A hard-linked file's content reaches the model through no tool: ``read`` refuses it (its
other names may lie outside the workspace), and ``grep`` withholds it too, counted in its
result, also when no read rule or mask inside the workspace made it ask the content gate file
by file (its fast path)."""

from __future__ import annotations

import os
from pathlib import Path

from roder_core.ir import ToolResultItem
from tests.brokers.helpers import marker, outside_folder
from tests.tools.harness import start


async def test_grep_withholds_a_file_hard_linked_to_one_outside(workspace: Path, monkeypatch: object) -> None:
    secret = f"OUTSIDE-{marker()}"
    with outside_folder("roder-hardlink-") as base:
        (base / "roder").mkdir()
        private = base / "private.txt"
        private.write_text(f"{secret}\n")
        os.link(private, workspace / "linked.txt")
        (workspace / "plain.txt").write_text("OUTSIDE is a word here\n")
        env = {**os.environ, "RODER_HOME": str(base / "roder")}
        calls = [
            {"name": "grep", "arguments": {"pattern": "OUTSIDE"}},
            {"name": "grep", "arguments": {"pattern": "OUTSIDE", "path": "linked.txt"}},
            {"name": "read", "arguments": {"path": "linked.txt"}},
        ]
        steps = [{"tool_calls": [dict(call, id=f"c{n}")]} for n, call in enumerate(calls)]
        runtime = start(workspace, [*steps, {"text": "done"}], mode="ask", sandbox=None, interactive=False, env=env).runtime
        try:
            thread = await runtime.start_thread()
            await runtime.run_turn(thread.id, "search")
            results = [item for item in runtime.thread(thread.id).items() if isinstance(item, ToolResultItem)]
        finally:
            await runtime.close()
    assert len(results) == 3
    for result in results:
        assert secret not in result.text, result.text
    everything, only_link, read = results
    assert "plain.txt:1:OUTSIDE is a word here" in everything.text
    assert (everything.data or {}).get("withheld") == 1 and "1 file was left out" in everything.text
    assert (only_link.data or {}).get("withheld") == 1
    assert "hard-linked file" in read.text
