"""The hash-chained audit log: what a run records, tamper detection (edit, insert, delete,
reorder, truncate), `roder audit verify` exit codes, and appends from concurrent processes."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import threading
from pathlib import Path

from roder_core.policy.audit import AuditLog, verify
from tests.tools.harness import call, run_script


def write_log(path: Path, count: int = 5) -> None:
    with AuditLog(path) as log:
        for index in range(count):
            log.record("test.event", {"index": index})


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def rewrite(path: Path, new_lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in new_lines))


def test_intact_chain_verifies(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    write_log(path)
    report = verify(path)
    assert report.ok
    assert report.records == 5
    first = json.loads(lines(path)[0])
    assert first["seq"] == 0
    assert first["prev"] == "0" * 64
    assert first["kind"] == "test.event"


def test_modified_line_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    write_log(path)
    rows = lines(path)
    record = json.loads(rows[2])
    record["index"] = 99
    rows[2] = json.dumps(record)
    rewrite(path, rows)
    report = verify(path)
    assert not report.ok
    assert any("line 3: content does not match its hash" in p for p in report.problems)


def test_deleted_inserted_and_reordered_lines_are_detected(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    write_log(path)
    rows = lines(path)
    rewrite(path, rows[:1] + rows[2:])
    assert any("line 2" in p for p in verify(path).problems)
    rewrite(path, [rows[0], rows[2], rows[1], *rows[3:]])
    assert not verify(path).ok
    rewrite(path, [*rows[:2], rows[1], *rows[2:]])
    assert not verify(path).ok


def test_truncated_end_is_detected_by_the_head_file(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    write_log(path)
    rewrite(path, lines(path)[:3])
    report = verify(path)
    assert not report.ok
    assert any("removed from the end" in p for p in report.problems)


def test_secrets_are_redacted_before_writing(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with AuditLog(path, redact=lambda text: text.replace("hunter2hunter2", "[redacted]")) as log:
        log.record("process.start", {"command": "login --password hunter2hunter2"})
    assert "hunter2hunter2" not in path.read_text()
    assert verify(path).ok


def _append_many(path: str, worker: int) -> None:
    with AuditLog(Path(path)) as log:
        for index in range(40):
            log.record("concurrent", {"worker": worker, "index": index})


def test_concurrent_processes_keep_one_chain(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_append_many, args=(str(path), n)) for n in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    report = verify(path)
    assert report.ok, report.problems
    assert report.records == 160


def test_cli_verify_exit_codes(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    write_log(path)
    command = [sys.executable, "-m", "roder_tui.cli", "audit", "verify", "--file", str(path)]
    ok = subprocess.run(command, capture_output=True, text=True, timeout=60, env=os.environ)
    assert ok.returncode == 0
    assert "chain intact" in ok.stdout
    rows = lines(path)
    rows[1] = rows[1].replace('"index": 1', '"index": 7')
    rewrite(path, rows)
    bad = subprocess.run(command, capture_output=True, text=True, timeout=60, env=os.environ)
    assert bad.returncode == 1
    assert "TAMPERED" in bad.stdout
    assert "line 2" in bad.stdout


async def test_a_run_records_decisions_and_actions(workspace: Path, roder_home: Path) -> None:
    steps = [
        {"tool_calls": [call("write", path="a.txt", content="x"), call("bash", command="cat a.txt")]},
        {"tool_calls": [call("write", path=".git/config", content="evil")]},
        {"text": "done"},
    ]
    await run_script(workspace, steps, mode="bypass")
    path = roder_home / "data" / "audit.jsonl"
    records = [json.loads(line) for line in lines(path)]
    kinds = [r["kind"] for r in records]
    assert kinds[0] == "sandbox.status"
    assert kinds.count("policy.decision") == 3
    assert "fs.write" in kinds
    assert "process.start" in kinds
    assert "process.exit" in kinds
    denied = [r for r in records if r["kind"] == "policy.decision" and r["verdict"] == "deny"]
    assert denied
    assert ".git/ is protected" in denied[0]["reason"]
    assert verify(path).ok


def test_a_writer_that_keeps_the_log_open_follows_what_others_did_to_it(tmp_path: Path) -> None:
    """One writer keeps the log open between records; whatever happened to the file meanwhile
    (another writer's records, the log moved away, deleted, truncated, its head deleted), its
    next record chains onto the file its path names now, as a writer that opened it anew would."""
    path = tmp_path / "audit.jsonl"
    kept, other = AuditLog(path), AuditLog(path)
    kept.record("kept", {"n": 0})
    other.record("other", {"n": 1})
    kept.record("kept", {"n": 2})
    assert verify(path).ok and verify(path).records == 3

    path.rename(tmp_path / "audit.old.jsonl")  # moved away (rotated): a new log begins at the path
    kept.record("kept", {"n": 3})
    assert [json.loads(row)["seq"] for row in lines(path)] == [0]
    assert verify(path).ok and verify(tmp_path / "audit.old.jsonl").records == 3

    kept.record("kept", {"n": 4})
    path.unlink()  # deleted
    kept.record("kept", {"n": 5})
    assert [json.loads(row)["n"] for row in lines(path)] == [5] and verify(path).ok

    kept.record("kept", {"n": 6})
    rows = lines(path)
    rewrite(path, rows[:1])  # truncated in place: the next record follows what is left
    kept.record("kept", {"n": 7})
    assert [json.loads(row)["seq"] for row in lines(path)] == [0, 1] and verify(path).ok

    kept.head_path.unlink()  # the head deleted: written again with the next record
    kept.record("kept", {"n": 8})
    assert json.loads(kept.head_path.read_text())["seq"] == 2 and verify(path).ok
    kept.close()
    other.close()


def test_a_forked_writer_opens_its_own_log(tmp_path: Path) -> None:
    """A process forked from a writer that holds the log open must not lock through the
    parent's descriptor (one lock for both would not keep them apart): both append, one chain."""
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    log.record("parent", {"n": 0})
    context = multiprocessing.get_context("fork")
    child = context.Process(target=_record_through, args=(log,))
    child.start()
    for index in range(40):
        log.record("parent", {"n": index})
    child.join(30)
    log.close()
    assert child.exitcode == 0
    report = verify(path)
    assert report.ok, report.problems
    assert report.records == 81


def _record_through(log: AuditLog) -> None:
    for index in range(40):
        log.record("child", {"n": index})


def test_threads_sharing_a_writer_keep_one_chain(tmp_path: Path) -> None:
    """The file lock belongs to the open file, not to a thread: threads of one process that share
    a writer take turns inside it."""
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    threads = [threading.Thread(target=_record_through, args=(log,)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    log.close()
    report = verify(path)
    assert report.ok, report.problems
    assert report.records == 160
