"""``bash`` against a model's habits, through the real loop: commands that wait for a terminal
(an editor, a REPL, a prompt), output meant for a screen (colours, ``\\r`` progress bars, bytes
that are not UTF-8), output too long to show, and commands that never end. Each gives a plain
result at once; none waits for a keyboard that never comes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.tools.harness import call, run_script

GIT = "git -c user.name=m -c user.email=m@example.com"


async def _bash(workspace: Path, command: str, **arguments: object) -> tuple[bool, str]:
    _rt, [result] = await run_script(workspace, [{"tool_calls": [call("bash", command=command, **arguments)]}, {"text": "ok"}])
    return result.is_error, result.text


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (f"git init -q . && {GIT} commit --allow-empty", "Aborting commit due to empty commit message."),
        (f"git init -q . && {GIT} commit --allow-empty -q -m one && {GIT} tag -a v1", "fatal: no tag message?"),
        (f"git init -q . && {GIT} commit --allow-empty -q -m one && {GIT} log | head -1", "commit "),
        ("python3", "(no output)"),
        ('read -r answer; echo "answer=[$answer]"', "answer=[]"),
        ("cat", "(no output)"),
        ("python3 -c 'input(\"Continue? [y/N] \")'", "EOFError"),
    ],
    ids=["git-commit-without-m", "git-tag-without-m", "git-log-pager", "python-repl", "read-stdin", "cat-stdin", "prompt"],
)
async def test_commands_waiting_for_a_terminal_end_at_once_and_say_why(workspace: Path, command: str, expected: str) -> None:
    _error, text = await _bash(workspace, command, timeout=60)
    assert expected in text, text
    assert "[timed out" not in text
    assert "Vim" not in text and "~" * 20 not in text


BINARY = "[binary output not shown; to see its bytes, pipe the command through: xxd | head]"


@pytest.mark.parametrize(
    ("command", "name", "instead"),
    [
        ("vim a.py", "vim", "edit or write"),
        ("cd sub && nano notes.txt", "nano", "edit or write"),
        ("/usr/bin/vi +12 a.py", "vi", "edit or write"),
        ("htop", "htop", "ps aux or top -b -n 1"),
        ("mc src/ /tmp", "mc", "ls or glob"),
    ],
    ids=["vim", "nano-after-cd", "vi-by-path", "htop", "midnight-commander"],
)
async def test_full_screen_programs_are_not_run_and_say_what_to_use(
    workspace: Path, command: str, name: str, instead: str
) -> None:
    """With no terminal they would fill the output with their screen until the timeout."""
    error, text = await _bash(workspace, command)
    assert error
    assert text == (
        f"not run: {name} is a full-screen program that waits for a terminal's keys, and commands run without a "
        f"terminal (it would hold the call until the timeout); use {instead} instead"
    )


@pytest.mark.parametrize(
    "command",
    [
        "echo vim a.py",
        "vim --version >/dev/null 2>&1; echo ran",
        "emacs --batch -Q 2>/dev/null; echo ran",
        "mc alias list 2>/dev/null; echo ran",
        "mc cp a.txt play/bucket/ 2>/dev/null; echo ran",
    ],
)
async def test_those_programs_named_or_run_without_a_screen_still_run(workspace: Path, command: str) -> None:
    """``mc`` with a subcommand is MinIO's client, not Midnight Commander."""
    error, text = await _bash(workspace, command)
    assert not error, text
    assert text.split("\n")[0] in ("vim a.py", "ran")


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        ("printf '\\033[31mred\\033[0m \\033[1;32mbold green\\033[0m\\n'", "red bold green\n"),
        ("printf 'downloading 10%%\\rdownloading 50%%\\rdownloading 100%%\\n'", "downloading 100%\n"),
        ("printf '\\033[2K\\rstep 1\\033[2K\\rstep 2\\n'", "step 2\n"),
        ("printf 'caf\\xe9 \\xff ok\\n'", "caf\ufffd \ufffd ok\n"),
        ("printf 'no final newline'", "no final newline"),
        ("echo start; printf '\\177ELF\\2\\1\\1\\n\\376\\0'; head -c 4000 /dev/zero; echo; echo end", f"start\n{BINARY}\nend\n"),
        ("printf 'start\\n\\211PNG\\r\\n\\032\\n\\0\\0\\0\\rIHDR\\0\\0\\1\\0'", f"start\n\ufffdPNG\n{BINARY}"),
        ("printf 'a.py\\0b/c.py\\0'", "a.py\\x00b/c.py\\x00"),
        ("printf 'ding\\a and del\\177\\n'", "ding\\x07 and del\\x7f\n"),
    ],
    ids=["colours", "progress-bar", "erase-line", "not-utf8", "no-final-newline", "program", "image", "print0", "bell"],
)
async def test_screen_output_reaches_the_model_as_text(workspace: Path, command: str, shown: str) -> None:
    error, text = await _bash(workspace, command)
    assert not error, text
    body = text.split("\n\n[exit code", 1)[0] if "\n\n[exit code" in text else text.split("\n[exit code", 1)[0]
    assert body.rstrip("\n") == shown.rstrip("\n"), text
    assert "\x1b" not in text and "\r" not in text


@pytest.mark.parametrize(
    "command",
    [
        "seq 1 200000",
        "yes 'a fairly long line of output for the model' | head -c 5000000",
        "head -c 3000000 /dev/zero | tr '\\0' 'x'",
    ],
    ids=["many-lines", "megabytes", "one-huge-line"],
)
async def test_long_output_is_cut_visibly_with_the_full_output_named(workspace: Path, command: str) -> None:
    error, text = await _bash(workspace, command)
    assert not error, text[-500:]
    assert len(text) < 60_000
    marker = re.search(r"(omitted|cut)", text)
    assert marker is not None, text[-2000:]
    saved = re.search(r"(/\S+\.log|/\S+output\S*)", text)
    assert saved is not None, text[-2000:]
    assert Path(saved.group(1).rstrip(".,;:)]'")).exists()


@pytest.mark.parametrize(
    ("command", "timeout"),
    [("sleep 600", 1), ("while true; do :; done", 1), ("sleep 600 & sleep 600; wait", "1s"), ("tail -f /dev/null", "1000ms")],
    ids=["sleep", "busy-loop", "with-a-background-job", "watcher"],
)
async def test_commands_that_never_end_are_killed_at_the_timeout_and_say_so(
    workspace: Path, command: str, timeout: object
) -> None:
    error, text = await _bash(workspace, command, timeout=timeout)
    assert error
    assert re.search(r"\[timed out after [\d.]+ s: the command and everything it started were killed", text), text


@pytest.mark.parametrize(
    ("command", "job"),
    [
        ("sleep 30 & echo started", "`sleep 30`"),
        ("nohup sleep 30 > /dev/null 2>&1 & echo $!", "`nohup sleep 30 > /dev/null 2>&1`"),
        ("(sleep 30 &); echo sub", "`sleep 30`"),
        ("setsid sleep 30 & disown; echo ok", "`setsid sleep 30`"),
        ("python3 -m http.server 8765 >/dev/null 2>&1 &", "`python3 -m http.server 8765 >/dev/null 2>&1`"),
    ],
    ids=["ampersand", "nohup", "subshell", "setsid-disown", "server"],
)
async def test_a_job_sent_to_the_background_with_an_ampersand_is_said_to_be_stopped(
    workspace: Path, command: str, job: str
) -> None:
    error, text = await _bash(workspace, command)
    assert not error, text
    assert text.endswith(
        f"[{job} ran in the background with &; whatever still ran when this command ended was stopped then (nothing a "
        "command leaves running outlives it). Start a server or watcher with run_in_background: true, then read its "
        "output with task_output]"
    ), text


async def test_what_the_note_says_is_true_without_a_sandbox_too(workspace: Path) -> None:
    """Without the sandbox's process namespace, the jobs are still gone once the command ends."""
    marker = "sleep 4242.4242"
    steps: list[dict[str, Any]] = [
        {"tool_calls": [call("bash", command=f"setsid {marker} & disown; nohup {marker} >/dev/null 2>&1 & echo ok")]},
        {"tool_calls": [call("bash", command=f"ps -eo args | grep -c '^[s]{marker[1:]}$' || true")]},
        {"text": "ok"},
    ]
    _rt, [started, after] = await run_script(workspace, steps, sandbox="off")
    assert "ran in the background with &" in started.text
    assert after.text.startswith("0\n"), after.text


@pytest.mark.parametrize(
    "command",
    ["for i in 1 2; do sleep 0.1 & done; wait", "a=1 && echo $a", "ls &> /dev/null; echo 'x & y'", "echo done"],
    ids=["waited-for", "and-and", "redirect-and-quoted", "plain"],
)
async def test_commands_without_a_background_job_get_no_such_note(workspace: Path, command: str) -> None:
    _error, text = await _bash(workspace, command)
    assert "ran in the background" not in text


@pytest.mark.parametrize(
    ("command", "what"),
    [
        ("cd sub", "the folder cd moved to"),
        ("ls; cd sub", "the folder cd moved to"),
        ("pushd sub", "the folder pushd moved to"),
        ("source env.sh", "what source set up"),
        (". env.sh", "what . (source) set up"),
        ("export DEBUG=1", "the variables set here"),
        ("DEBUG=1", "the variables set here"),
    ],
    ids=["cd", "ls-then-cd", "pushd", "source", "dot", "export", "assignment"],
)
async def test_shell_state_that_ends_with_the_call_is_said_to(workspace: Path, command: str, what: str) -> None:
    (workspace / "sub").mkdir()
    (workspace / "env.sh").write_text("DEBUG=1\n")
    steps: list[dict[str, Any]] = [
        {"tool_calls": [call("bash", command=command)]},
        {"tool_calls": [call("bash", command='pwd; echo "debug=[$DEBUG]"')]},
        {"text": "ok"},
    ]
    _rt, [changed, after] = await run_script(workspace, steps)
    assert changed.text.endswith(
        f"[{what} does not carry over: every bash call starts in a new shell in the workspace; chain the commands "
        "with && in one call (cd sub && make), or pass workdir]"
    ), changed.text
    assert after.text.startswith(f"{workspace.resolve()}\ndebug=[]\n")  # as the note says


@pytest.mark.parametrize(
    "command", ["cd sub && ls", "cd sub; ls", "ls", "cd nope"], ids=["cd-and", "cd-then", "plain", "failed-cd"]
)
async def test_commands_that_use_the_state_they_set_get_no_such_note(workspace: Path, command: str) -> None:
    (workspace / "sub").mkdir()
    _error, text = await _bash(workspace, command)
    assert "does not carry over" not in text
