"""A turn interrupt (turn/interrupt, Esc, Ctrl+C) kills a running command's whole process
tree through the real loop, sandboxed or not, and the turn ends as interrupted."""

from __future__ import annotations

from pathlib import Path

import pytest

from roder_core.brokers.sandbox import probe_bubblewrap
from tests.brokers.helpers import assert_gone, marker, running
from tests.builders import until
from tests.tools.harness import call, start


@pytest.mark.parametrize("sandbox", ["off", "workspace-write"])
async def test_interrupt_kills_the_running_command(workspace: Path, sandbox: str) -> None:
    if sandbox != "off" and not probe_bubblewrap().works:
        pytest.skip(f"needs bubblewrap: {probe_bubblewrap().reason}")
    mark = marker()
    command = f"(exec -a {mark} sleep 300) & (exec -a {mark} sleep 300) & touch started; wait"
    steps = [{"tool_calls": [call("bash", command=command, timeout=600)]}, {"text": "never"}]
    runtime = start(workspace, steps, mode="bypass", sandbox=sandbox).runtime
    thread = await runtime.start_thread()
    await runtime.start_turn(thread.id, "go")
    await until((workspace / "started").exists)
    assert running(mark)
    assert await runtime.interrupt(thread.id)
    turn = await runtime.wait_turn(thread.id)
    assert turn.status == "interrupted"
    assert_gone(mark)
