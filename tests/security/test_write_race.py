"""Class 5: a folder swapped for a symlink to the outside while files are written through it.

A real process flips ``d`` between a folder and a symlink to a folder outside the workspace as
fast as it can, while Roder writes, moves, deletes and reads ``d/...``. Nothing may land
outside, every call ends with a result (a clear refusal when the path changed under it), and
the turn completes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from roder_core.brokers import BrokerDenied
from roder_core.brokers.fs import WorkspaceFileSystem
from roder_core.ir import ToolResultItem
from tests.brokers.helpers import outside_folder
from tests.tools.harness import call, start

FLIPPER = """
import os, sys
os.chdir(sys.argv[1])
os.makedirs("d", exist_ok=True)
os.symlink(sys.argv[2], "L")
print("flipping", flush=True)
while True:
    for src, dst in (("d", "D"), ("L", "d"), ("d", "L"), ("D", "d")):
        try:
            os.rename(src, dst)
        except OSError:
            pass
"""


@pytest.fixture
def outside() -> Iterator[Path]:
    with outside_folder("roder-race-") as folder:
        yield folder


@pytest.fixture
def flipping(workspace: Path, outside: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The racing process, already flipping when the test body starts."""
    proc = subprocess.Popen([sys.executable, "-c", FLIPPER, str(workspace), str(outside)], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"flipping\n"
    yield proc
    proc.kill()
    proc.wait()


def test_broker_never_writes_through_a_swapped_folder(workspace: Path, outside: Path, flipping: subprocess.Popen[bytes]) -> None:
    fs = WorkspaceFileSystem(workspace)
    outcomes: dict[str, int] = {}
    for n in range(1500):
        moved = f"d/moved-{n}.txt"
        for action in (
            lambda: fs.write_bytes("d/race.txt", b"x"),
            lambda: fs.move("d/race.txt", moved),  # noqa: B023 (called before the next round)
            lambda: fs.delete(moved),  # noqa: B023
            lambda: fs.read_bytes("d/race.txt"),
        ):
            try:
                action()
                kind = "ok"
            except BrokerDenied as exc:
                kind = "refused"
                assert "changed" in str(exc) or "outside" in str(exc) or "keeps changing" in str(exc), exc
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
                kind = type(exc).__name__
            outcomes[kind] = outcomes.get(kind, 0) + 1
    assert list(outside.iterdir()) == [], outcomes
    assert outcomes.get("ok", 0) > 0


async def test_parallel_writes_during_a_flip_never_escape_or_crash_the_turn(
    workspace: Path, outside: Path, flipping: subprocess.Popen[bytes]
) -> None:
    writes = [dict(call("write", path="d/race.txt", content=f"attempt {n}"), id=f"w{n}") for n in range(40)]
    flip_too = dict(
        call("bash", command="for i in $(seq 300); do mv d D; mv L d; mv d L; mv D d; done 2>/dev/null; echo flipped"), id="flip"
    )
    runtime = start(workspace, [{"tool_calls": [flip_too, *writes]}, {"text": "done"}], mode="bypass").runtime
    thread = await runtime.start_thread()
    turn = await runtime.run_turn(thread.id, "race")
    assert turn.status == "completed"
    results = [i for i in runtime.thread(thread.id).items() if isinstance(i, ToolResultItem)]
    assert len(results) == len(writes) + 1
    for result in results:
        assert "Traceback" not in result.text and "ExceptionGroup" not in result.text, result.text
        if result.is_error and result.name == "write":
            clear = ("refused", "no such", "changed", "vanished", "removed or replaced", "outside the workspace")
            assert any(w in result.text for w in clear), result.text
    assert list(outside.iterdir()) == []
    assert flipping.poll() is None  # the race ran for the whole turn
