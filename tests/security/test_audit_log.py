"""The hash-chained audit log: what a run records, tamper detection (edit, insert, delete,
reorder, truncate), `roder audit verify` exit codes, and appends from concurrent processes."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

from roder_core.policy.audit import AuditLog, verify
from tests.tools.harness import call, run_script


def write_log(path: Path, count: int = 5) -> None:
    log = AuditLog(path)
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
    AuditLog(path, redact=lambda text: text.replace("hunter2hunter2", "[redacted]")).record(
        "process.start", {"command": "login --password hunter2hunter2"}
    )
    assert "hunter2hunter2" not in path.read_text()
    assert verify(path).ok


def _append_many(path: str, worker: int) -> None:
    log = AuditLog(Path(path))
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
