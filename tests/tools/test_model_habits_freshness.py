"""A thread's file ledger through the real loop: write refuses to replace a file this thread never
read or one that changed since it last saw it; edit and apply_patch say when their text no longer
matches because the file changed; new files, resumed threads and subagent threads."""

from __future__ import annotations

from pathlib import Path

from roder_core.ir import ToolResultItem
from tests.tools.harness import call, run_script, start

CHANGED = (
    "refused: notes.txt changed on disk since you last read or wrote it (a command, the user, a formatter or another "
    "agent changed it); writing now would discard those changes. Read it again and redo your change on its current content"
)


async def test_write_after_an_outside_change_is_refused_and_loses_nothing(workspace: Path) -> None:
    (workspace / "notes.txt").write_text("one\ntwo\n")
    steps = [
        {"tool_calls": [call("read", path="notes.txt")]},
        {"tool_calls": [call("bash", command="echo three >> notes.txt")]},  # a formatter, the user, another agent
        {"tool_calls": [call("write", path="notes.txt", content="one\nTWO\n")]},
        {"tool_calls": [call("read", path="notes.txt")]},
        {"tool_calls": [call("write", path="notes.txt", content="one\nTWO\nthree\n")]},
        {"text": "ok"},
    ]
    _rt, results = await run_script(workspace, steps)
    refused, reread, written = results[2], results[3], results[4]
    assert refused.is_error
    assert refused.text == CHANGED
    assert not reread.is_error
    assert written.text == "updated notes.txt: +1 -1 lines (now 3 lines)"
    assert (workspace / "notes.txt").read_text() == "one\nTWO\nthree\n"


async def test_write_to_a_file_never_read_is_refused_but_creating_one_is_fine(workspace: Path) -> None:
    (workspace / "old.txt").write_text("keep me\n")
    steps = [
        {"tool_calls": [call("write", path="old.txt", content="gone\n"), call("write", path="new.txt", content="hi\n")]},
        {"tool_calls": [call("write", path="new.txt", content="hi again\n")]},  # its own file: no read needed
        {"text": "ok"},
    ]
    _rt, [never_read, created, rewritten] = await run_script(workspace, steps)
    assert never_read.is_error
    assert never_read.text == (
        "refused: old.txt already exists and has not been read in this conversation; read it first (write replaces the whole "
        "file), or change part of it with edit"
    )
    assert (workspace / "old.txt").read_text() == "keep me\n"
    assert created.text == "created new.txt (1 lines, 3 bytes)"
    assert not rewritten.is_error
    assert (workspace / "new.txt").read_text() == "hi again\n"


async def test_edit_and_patch_say_the_file_changed_since_it_was_read(workspace: Path) -> None:
    (workspace / "a.py").write_text("x = 1\ny = 2\n")
    steps = [
        {"tool_calls": [call("read", path="a.py")]},
        {"tool_calls": [call("bash", command="sed -i 's/x = 1/x = 10/' a.py")]},
        {"tool_calls": [call("edit", path="a.py", old_string="x = 1\n", new_string="x = 3\n")]},
        {
            "tool_calls": [
                call("apply_patch", patch="*** Begin Patch\n*** Update File: a.py\n-x = 1\n+x = 3\n y = 2\n*** End Patch")
            ]
        },
        {"tool_calls": [call("edit", path="a.py", old_string="y = 2", new_string="y = 5")]},  # still matches: fine
        {"text": "ok"},
    ]
    _rt, results = await run_script(workspace, steps)
    edit, patch, other = results[2], results[3], results[4]
    assert edit.is_error
    assert edit.text.endswith("The file changed on disk since you last read or wrote it; read it again before editing.")
    assert patch.is_error
    assert patch.text.endswith("The file changed on disk since you last read or wrote it; read it again before editing.")
    assert not other.is_error
    assert (workspace / "a.py").read_text() == "x = 10\ny = 5\n"


async def test_own_edits_keep_the_ledger_current(workspace: Path) -> None:
    (workspace / "f.txt").write_text("a\nb\n")
    steps = [
        {"tool_calls": [call("read", path="f.txt")]},
        {"tool_calls": [call("edit", path="f.txt", old_string="a\n", new_string="A\n")]},
        {"tool_calls": [call("apply_patch", patch="*** Begin Patch\n*** Update File: f.txt\n-b\n+B\n*** End Patch")]},
        {"tool_calls": [call("write", path="f.txt", content="all new\n")]},
        {"text": "ok"},
    ]
    _rt, results = await run_script(workspace, steps)
    assert [r.is_error for r in results] == [False, False, False, False]
    assert (workspace / "f.txt").read_text() == "all new\n"


async def test_a_resumed_thread_remembers_what_it_read(workspace: Path) -> None:
    (workspace / "kept.txt").write_text("v1\n")
    first = start(workspace, [{"tool_calls": [call("read", path="kept.txt")]}, {"text": "read"}], store=True).runtime
    thread = await first.start_thread()
    await first.run_turn(thread.id, "read it")
    await first.close()
    steps = [{"tool_calls": [call("write", path="kept.txt", content="v2\n")]}, {"text": "done"}]
    second = start(workspace, steps, store=True).runtime
    await second.resume_thread(thread.id)
    await second.run_turn(thread.id, "now write it")
    results = [i for i in second.thread(thread.id).items() if isinstance(i, ToolResultItem)]
    assert results[-1].text == "updated kept.txt: +1 -1 lines (now 1 lines)"
    assert (workspace / "kept.txt").read_text() == "v2\n"
    await second.close()


async def test_a_new_thread_has_not_read_what_another_thread_read(workspace: Path) -> None:
    (workspace / "kept.txt").write_text("v1\n")
    await run_script(workspace, [{"tool_calls": [call("read", path="kept.txt")]}, {"text": "read"}])
    _rt, [result] = await run_script(workspace, [{"tool_calls": [call("write", path="kept.txt", content="v2\n")]}, {"text": "x"}])
    assert result.text.startswith("refused: kept.txt already exists and has not been read in this conversation")
    assert (workspace / "kept.txt").read_text() == "v1\n"
