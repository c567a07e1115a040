"""`roder sessions list` without start-up: the recorded store, its invalidation, same output."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from roder_ext_jsonl_store.index import ThreadIndex

from roder_core.kernel.store_record import JSONL_STORE, RECORD_NAME, installed_fingerprint, recorded_jsonl_dir
from roder_core.settings.paths import RoderPaths
from roder_tui.cli import main
from roder_tui.commands.session_listing import indexed_rows, list_options


@pytest.fixture
def here(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(workspace)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    return workspace


def _out(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(list(args)) == 0
    return capsys.readouterr().out


def _thread_and_fork(capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["-p", "hello there", "--provider", "mock", "--output-format", "json"]) == 0
    thread_id = json.loads(capsys.readouterr().out)["thread_id"]
    assert main(["sessions", "fork", thread_id]) == 0
    capsys.readouterr()
    return thread_id


def test_listing_reads_the_index_and_prints_what_a_started_runtime_prints(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    thread_id = _thread_and_fork(capsys)
    paths = RoderPaths.from_env()
    assert recorded_jsonl_dir(paths, "developer") == paths.threads_dir, "the start-up recorded the JSONL store"
    fast = {args: _out(capsys, "sessions", "list", *args) for args in [("--json",), (), ("--all",), ("--all", "--json")]}
    assert indexed_rows(here.resolve(), False, None) is not None

    (paths.cache_dir / RECORD_NAME).unlink()  # now only a started runtime can tell
    assert indexed_rows(here.resolve(), False, None) is None
    started = {args: _out(capsys, "sessions", "list", *args) for args in fast}
    assert fast == started
    rows = json.loads(fast[("--json",)])
    assert [row["id"] for row in rows][1] == thread_id and rows[0]["parent"]["threadId"] == thread_id
    assert fast[()].splitlines()[1].startswith("  ↳ "), "the fork hangs under its parent"
    assert (paths.cache_dir / RECORD_NAME).exists(), "the started listing recorded the store again"


def test_the_text_listing_is_a_page_that_says_what_it_left_out_on_both_paths(
    here: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    thread_id = _thread_and_fork(capsys)
    monkeypatch.setattr("roder_tui.commands.session_listing.DEFAULT_PAGE", 1)
    cases = [(), ("--limit", "1"), ("--limit", "0"), ("--limit", "5"), ("--json",), ("--json", "--limit", "1")]
    fast = {args: _out(capsys, "sessions", "list", *args) for args in cases}
    (RoderPaths.from_env().cache_dir / RECORD_NAME).unlink()  # the started runtime's listing
    started = {args: _out(capsys, "sessions", "list", *args) for args in cases}
    assert fast == started
    page = fast[()].splitlines()
    assert len(page) == 2 and page[-1] == "(only the newest 1 shown: `--limit N` shows more, `--limit 0` every thread)"
    assert fast[("--limit", "1")] == fast[()]
    assert len(fast[("--limit", "0")].splitlines()) == 2 and "only the newest" not in fast[("--limit", "0")]
    assert fast[("--limit", "5")] == fast[("--limit", "0")], "no note when nothing was left out"
    assert len(json.loads(fast[("--json",)])) == 2, "JSON lists every row unless --limit is given"
    rows = json.loads(fast[("--json",)])
    assert json.loads(fast[("--json", "--limit", "1")]) == rows[:1] and rows[1]["id"] == thread_id


def test_the_record_is_ignored_when_distributions_profile_or_folder_differ(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _thread_and_fork(capsys)
    paths = RoderPaths.from_env()
    record_file = paths.cache_dir / RECORD_NAME
    record = json.loads(record_file.read_text())
    assert record == {**record, "store": JSONL_STORE, "fingerprint": installed_fingerprint()}
    assert recorded_jsonl_dir(paths, "offline") is None
    for changed in ({"fingerprint": "0" * 64}, {"directory": str(here)}, {"store": "other.Store"}):
        record_file.write_text(json.dumps({**record, **changed}))
        assert recorded_jsonl_dir(paths, "developer") is None, changed
    record_file.write_text("{not json")
    assert recorded_jsonl_dir(paths, "developer") is None
    record_file.write_text(json.dumps(record))
    (here / ".roder" / "extensions").mkdir(parents=True)
    assert indexed_rows(here.resolve(), False, None) is None, "project extensions may bring another store"


def test_listing_in_a_fresh_process_imports_neither_pydantic_nor_extensions_nor_a_parser(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    thread_id = _thread_and_fork(capsys)
    probe = (
        "import sys; from roder_tui.cli import main; code = main(['sessions', 'list', '--json']);"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'roder_ext_jsonl_store') "
        "and m not in ('roder_ext_jsonl_store', 'roder_ext_jsonl_store.index', 'roder_ext_jsonl_store.files'));"
        # the command line is read without argparse, and nothing is logged (stdio are pipes here)
        "heavy += [m for m in ('argparse', 'logging', 'hashlib', 'roder_tui.terminal_text') if m in sys.modules];"
        "print(code, heavy, file=sys.stderr)"
    )
    # The record is keyed by the interpreter's installed distributions as a fresh process sees
    # them; earlier tests in this process may have put fake distributions on sys.path, so a first
    # fresh start-up records the store, and the probe's start-up is the second one.
    subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", "sessions", "list"], cwd=here, env=os.environ, check=True, capture_output=True
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=here, env=os.environ, capture_output=True, text=True, check=True)
    assert done.stderr.strip() == "0 []"
    assert thread_id in done.stdout


def test_index_rows_skip_unparsed_lines_but_still_fold_the_summary_events(workspace: Path) -> None:
    directory = RoderPaths.from_env().threads_dir
    directory.mkdir(parents=True)
    thread = "thr_" + "a" * 20
    lines = [
        {"type": "header", "id": thread, "cwd": str(workspace), "createdAt": 10.0, "title": "", "provider": "mock", "model": "m"},
        {"threadId": thread, "ts": 11.0, "method": "turn/started", "turnId": "turn_1"},
        {
            "threadId": thread,
            "ts": 12.5,
            "method": "item/completed",
            "turnId": "turn_1",
            "item": {"text": '"method":"turn/started"'},
        },
        {"threadId": thread, "ts": 13.0, "method": "thread/title/changed", "title": "fixed the loop"},
        {"method": "turn/started", "threadId": thread, "ts": 14.0, "turnId": "turn_2"},  # keys in another order
        {"threadId": thread, "ts": 1.5e1, "method": "item/started", "turnId": "turn_2"},
    ]
    body = b"".join(json.dumps(line, separators=(",", ":")).encode() + b"\n" for line in lines)
    body += b'{"threadId":"' + thread.encode() + b'","ts":99.0,"method":"thread/status/changed","sta\n'  # corrupt line
    body += b'{"threadId":"' + thread.encode() + b'","ts":16.0,"method":"item/upd'  # torn tail
    (directory / f"{thread}.jsonl").write_bytes(body)
    index = ThreadIndex(directory)
    index.refresh()
    [row] = index.query_wire()
    assert row == {
        "id": thread,
        "cwd": str(workspace),
        "title": "fixed the loop",
        "createdAt": 10.0,
        "updatedAt": 15.0,
        "provider": "mock",
        "model": "m",
        "turnCount": 2,
        "status": "idle",
    }
    assert [summary.wire() for summary in index.query()] == [row]


#: The forms ``list_options`` reads itself, then forms it must leave to argparse (abbreviations,
#: help, bad or missing numbers, unknown options), which explains them or reads them its way.
READ = [[], ["--all"], ["--json", "--all"], ["--limit", "5"], ["--limit=0", "--json"], ["--limit", "5", "--limit", "7"]]
LEFT = [["--lim", "5"], ["--al"], ["-h"], ["--limit", "-1"], ["--limit"], ["--limit", "x"], ["--limit", "²"], ["--limit="]]
LEFT += [["--bogus"], ["--", "--all"], ["--limit", "+5"], ["--limit", " 5"]]


@pytest.mark.parametrize("argv", READ + LEFT)
def test_the_listing_reads_its_options_as_argparse_does_or_leaves_them_to_it(argv: list[str]) -> None:
    """``roder_tui.cli`` lists from the index before argparse runs: the forms it reads itself
    must mean what argparse makes of them, and it must leave every other form to argparse."""
    import argparse

    from roder_tui.commands import sessions

    read = list_options(argv)
    if argv in LEFT:
        assert read is None
        return
    parser = argparse.ArgumentParser(prog="roder sessions", exit_on_error=False)
    sessions.add_arguments(parser)
    parsed = parser.parse_args(["list", *argv])
    assert read == (parsed.all, parsed.json, parsed.limit)
