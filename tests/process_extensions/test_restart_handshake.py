"""A process extension started again after a crash: calls made while its ``initialize`` is still
unanswered wait for that answer (the protocol's ``initialize`` comes first), instead of being
sent to a process that has not finished starting. A real process holds its answer until the test
lets it go."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from roder_ext_process.connection import ExtensionCallError
from roder_ext_process.supervisor import Supervisor

from roder_core.brokers.confined import ConfinedCommand
from roder_core.settings.config import ProcessExtensionConfig
from tests.builders import until

PROBE = Path(__file__).with_name("restart_probe.py")


async def test_calls_during_a_restart_wait_for_its_initialize_answer(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    argv = [sys.executable, str(PROBE), str(marks)]
    supervisor = Supervisor(
        "probe", ProcessExtensionConfig(command=argv), tmp_path, ConfinedCommand(argv, dict(os.environ), sandboxed=False)
    )
    try:
        await asyncio.to_thread(supervisor.handshake)
        with pytest.raises(ExtensionCallError):
            await supervisor.call("tool/execute", {"tool": "crash"})
        os.mkfifo(marks / "go")
        first = asyncio.create_task(supervisor.call("tool/execute", {"tool": "one"}))
        await until(lambda: (marks / "init2").exists())  # restarted; its initialize is held
        second = asyncio.create_task(supervisor.call("tool/execute", {"tool": "two"}))
        await asyncio.sleep(0)  # one step of the second call (a yield, not a wait for time)
        await asyncio.to_thread(lambda: (marks / "go").write_text("go"))
        assert await first == {"text": "ok"}
        assert await second == {"text": "ok"}
        assert (marks / "order").read_text() == "late"
        assert supervisor.restarts == 1
    finally:
        await asyncio.to_thread(supervisor.close)
