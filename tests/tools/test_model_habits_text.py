"""Text the model should see as text, through the real loop: files that are not UTF-8 are
decoded with the encoding named, and command output reaches the model without colours and with
carriage-return rewrites reduced to each line's final state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from roder_core.brokers.task_log import TaskLog
from roder_core.brokers.terminal_text import BINARY_NOTE
from roder_core.testing.fake_server import FakeModelServer
from tests.brokers.helpers import needs_bwrap
from tests.security.test_background_network import results, start, wait_for_task
from tests.tools.harness import call, run_script

LATIN1 = "caf\u00e9 = 1\n# r\u00e9sum\u00e9\n"


async def test_a_latin1_file_is_read_as_text_and_says_its_encoding(workspace: Path) -> None:
    (workspace / "legacy.py").write_bytes(LATIN1.encode("latin-1"))
    _rt, [result] = await run_script(workspace, [{"tool_calls": [call("read", path="legacy.py")]}, {"text": "ok"}])
    assert not result.is_error
    assert result.text == (
        "[not UTF-8: decoded as cp1252; edit and write keep this encoding]\n     1\tcaf\u00e9 = 1\n     2\t# r\u00e9sum\u00e9"
    )
    assert result.data["encoding"] == "cp1252"


async def test_editing_a_latin1_file_keeps_its_encoding(workspace: Path) -> None:
    (workspace / "legacy.py").write_bytes(LATIN1.encode("latin-1"))
    steps = [
        {"tool_calls": [call("edit", path="legacy.py", old_string="r\u00e9sum\u00e9", new_string="d\u00e9j\u00e0 vu")]},
        {"tool_calls": [call("edit", path="legacy.py", old_string="d\u00e9j\u00e0 vu", new_string="\u2603 snow")]},
        {"text": "ok"},
    ]
    _rt, [edited, refused] = await run_script(workspace, steps)
    assert not edited.is_error, edited.text
    assert (workspace / "legacy.py").read_bytes() == "caf\u00e9 = 1\n# d\u00e9j\u00e0 vu\n".encode("latin-1")
    assert refused.is_error
    assert refused.text == "the new text has '\u2603', which this file's encoding (cp1252) cannot hold; nothing was written"


async def test_a_utf16_file_is_read_as_text(workspace: Path) -> None:
    (workspace / "notes.txt").write_bytes("first\nzweite Zeile \u00fc\n".encode("utf-16"))
    _rt, [result] = await run_script(workspace, [{"tool_calls": [call("read", path="notes.txt")]}, {"text": "ok"}])
    assert result.text == (
        "[not UTF-8: decoded as utf-16; edit and write keep this encoding]\n     1\tfirst\n     2\tzweite Zeile \u00fc"
    )


async def test_binary_files_are_still_refused(workspace: Path) -> None:
    (workspace / "blob.bin").write_bytes(bytes(range(256)) * 4)
    _rt, [result] = await run_script(workspace, [{"tool_calls": [call("read", path="blob.bin")]}, {"text": "ok"}])
    assert result.is_error
    assert "looks like a binary file" in result.text


async def test_command_output_without_colours_and_progress_rewrites(workspace: Path) -> None:
    command = (
        r"printf '\033[1;32mPASS\033[0m test_a\n'; "
        r"""for i in 10 50 100; do printf '\r\033[K[%-10s] %s%%' "$(printf '#%.0s' $(seq 1 $((i/10))))" $i; done; """
        r"printf '\n\033]0;window title\007done\n'"
    )
    _rt, [result] = await run_script(workspace, [{"tool_calls": [call("bash", command=command)]}, {"text": "ok"}], sandbox="off")
    output = result.text.split("\n[exit code")[0]
    assert output == "PASS test_a\n[##########] 100%\ndone\n"


def test_task_output_is_cleaned_the_same_way(tmp_path: Path) -> None:
    log = TaskLog(tmp_path / "task.log")
    log.feed(b"\x1b[31mred\x1b[0m\nstep 1/3\rstep 2/3\rstep 3/3\n")
    log.close()
    assert log.read().text == "red\nstep 3/3\n"


@needs_bwrap
async def test_task_output_shows_binary_the_same_way(workspace: Path, roder_home: Path) -> None:
    """A background command that prints a program's bytes: ``task_output`` says so in one line."""
    command = "echo start; printf '\\177ELF\\2\\1\\1\\0\\0\\0\\0\\0\\0\\0\\n'; printf 'a\\0b\\n'; echo end"
    steps: list[dict[str, Any]] = [{"tool_calls": [call("bash", command=command, run_in_background=True)]}, {"text": "started"}]
    async with FakeModelServer(steps) as server:
        runtime = await start(workspace, roder_home, server)
        try:
            thread = await runtime.start_thread()
            await runtime.run_turn(thread.id, "start it")
            task_id = results(runtime, thread.id)[0].data["task_id"]
            await wait_for_task(runtime, task_id, lambda t: t.status != "running")
            steps += [{"tool_calls": [call("task_output", task_id=task_id)]}, {"text": "ok"}]
            await runtime.run_turn(thread.id, "read it")
            output = results(runtime, thread.id)[1].text
        finally:
            await runtime.close()
    assert output.startswith(f"start\n{BINARY_NOTE}\na\\x00b\nend\n"), output
