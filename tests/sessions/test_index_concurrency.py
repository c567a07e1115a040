"""Several processes listing and rebuilding one thread index at once never break it.

A busy index ("database is locked") must never be mistaken for a corrupt one and deleted under
the feet of the other processes, and two processes opening a fresh index must not drop each
other's table.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from roder_ext_jsonl_store.index import ThreadIndex

from roder_core.settings.paths import RoderPaths
from tests.sessions.harness import make_runtime

WORKER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from roder_ext_jsonl_store.index import ThreadIndex

    root, rounds, expected = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    for round_ in range(rounds):
        # every round is a fresh folder, so every round is a race to create its index
        index = ThreadIndex(root / f"copy{round_}")
        index.refresh()
        rows = index.query()
        assert len(rows) == expected, (round_, len(rows))
    """
)


async def test_concurrent_processes_share_one_index(workspace: Path, tmp_path: Path) -> None:
    runtime, _ = make_runtime(workspace, [{"text": "ok"}])
    for n in range(6):
        thread = await runtime.start_thread()
        await runtime.run_turn(thread.id, f"thread {n}")
    await runtime.close()
    directory = RoderPaths.from_env().threads_dir
    rounds = 40
    for round_ in range(rounds):
        copy = tmp_path / "copies" / f"copy{round_}"
        copy.mkdir(parents=True)
        for path in directory.glob("*.jsonl"):
            shutil.copy2(path, copy / path.name)
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(tmp_path / "copies"), str(rounds), "6"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    failures = []
    for worker in workers:
        _, err = worker.communicate(timeout=120)
        if worker.returncode != 0:
            failures.append(err[-800:])
    assert not failures, failures[0]


def test_a_corrupt_index_is_rebuilt(tmp_path: Path) -> None:
    index = ThreadIndex(tmp_path)
    index.refresh()
    index.path.write_bytes(b"this is not a database" * 100)
    assert index.query() == []
    assert index.path.read_bytes()[:15] == b"SQLite format 3"
