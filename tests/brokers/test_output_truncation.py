"""What the model is told about output too long to show whole is true of the file it names.

A command's output past 2000 lines or 50 KB (``command_output``), and a background task's log
read in one slice (``task_log``), show their head and tail with one marker between. Every
number in that marker (lines and bytes in all, the lines shown, the lines or part of a line
omitted, the bytes omitted, the ``sed``/``tail`` command to read them) is checked here
against the file itself, for outputs whose cut falls between lines, inside a line, inside the
only line, and in one whose last line has no line end.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from roder_core.brokers.command_output import MAX_BYTES, CommandOutput
from roder_core.brokers.secrets import SecretRedactor
from roder_core.brokers.task_log import TaskLog

OUTPUTS = {
    "many short lines": "".join(f"line {n}\n" for n in range(1, 5001)).encode(),
    "long lines cut between lines": "".join(f"{n:04d}" + "x" * 2996 + "\n" for n in range(1, 31)).encode(),
    "a first line longer than the head": b"y" * 60_000 + b"\nshort\n",
    "one line without a line end": b"z" * 100_000,
    "short lines then one long last line": b"ab\n" * 10 + b"q" * 70_000,
    "no line end at the very end": "".join(f"row {n}\n" for n in range(1, 3000)).encode() + b"the last row",
    "multibyte text cut inside a character": ("é" * 40_000 + "\n" + "ü" * 10 + "\n").encode(),
}

_MARKER = re.compile(
    r"\n\[\.\.\. output truncated: (?P<lines>\d+) lines?, (?P<bytes>\d+) bytes in all; shown here: (?P<shown>[^;]+); "
    r"omitted: (?P<omitted>[^;]+) \((?P<omitted_bytes>\d+) bytes\); full output: (?P<path>\S+)(?: \([^)]*\))?; "
    r"read the omitted part with bash: (?P<hint>.+?) \(or grep -n PATTERN (?P=path)\) \.\.\.\]\n"
)


def _lines(data: bytes) -> list[bytes]:
    """The file's lines as ``sed`` numbers them (the last one may lack its line end)."""
    return data.splitlines(keepends=True)


def check(text: str, data: bytes, path: Path) -> None:
    match = _MARKER.search(text)
    assert match is not None, text[:300]
    assert match["path"] == str(path)
    assert path.read_bytes() == data  # the file holds the whole output
    lines = _lines(data)
    assert int(match["lines"]) == len(lines)
    assert int(match["bytes"]) == len(data)
    head, tail = text[: match.start()], text[match.end() :]
    head_cut, tail_cut = head.endswith(" …[line cut]\n"), tail.startswith("[line cut]… ")
    head_bytes = head.removesuffix(" …[line cut]\n").encode()
    tail_bytes = tail.removeprefix("[line cut]… ").encode()
    if "\ufffd" not in head + tail:
        assert int(match["omitted_bytes"]) == len(data) - len(head_bytes) - len(tail_bytes)
        assert data.startswith(head_bytes) and data.endswith(tail_bytes)
    assert len(head_bytes) <= MAX_BYTES // 2 + 1 and len(tail_bytes) <= MAX_BYTES // 2 + 1
    # the lines shown, by number, are the file's lines
    spans = re.findall(r"(the start of |the end of )?lines? (\d+)(?:-(\d+))?", match["shown"])
    (head_part, h1, h2), *rest = spans
    assert h1 == "1"
    if head_part:  # a cut first line: what is shown is its start, and it says so
        assert head_cut and not head_bytes.endswith(b"\n") and lines[0].startswith(head_bytes)
        head_last = 1
    else:
        head_last = int(h2 or h1)
        assert not head_cut and head_bytes == b"".join(lines[:head_last])
    tail_part, t1, _last_of_span = rest[0]
    tail_first = int(t1)
    last = int(rest[-1][2] or rest[-1][1])
    assert last == len(lines)
    if tail_part:  # a cut line: what is shown is its end, then whole lines
        piece, end, after = tail_bytes.partition(b"\n")
        assert tail_cut and lines[tail_first - 1].endswith(piece + end) and after == b"".join(lines[tail_first:])
    else:
        assert not tail_cut and tail_bytes == b"".join(lines[tail_first - 1 :])
    # what is omitted, by number, is everything between
    gap = re.search(r"lines? (\d+)(?:-(\d+))?", re.sub(r"the (rest|start|middle) of line \d+", "", match["omitted"]))
    if gap is not None:
        assert (int(gap[1]), int(gap[2] or gap[1])) == (head_last + 1, tail_first - 1)
        first = int(gap[1])
        printed = subprocess.run(match["hint"], shell=True, capture_output=True, check=True).stdout
        assert printed == b"".join(lines[first - 1 : min(int(gap[2] or gap[1]), first + 99)])
    else:
        assert head_last + 1 >= tail_first
        printed = subprocess.run(match["hint"], shell=True, capture_output=True, check=True).stdout
        assert data[len(head_bytes) :].startswith(printed) and printed  # the bytes right after the head


@pytest.mark.parametrize("case", sorted(OUTPUTS))
def test_a_commands_truncated_output_tells_the_truth_about_its_file(tmp_path: Path, case: str) -> None:
    data = OUTPUTS[case]
    output = CommandOutput(tmp_path, SecretRedactor({}), None, None, separate=False)
    for start in range(0, len(data), 4096):  # as a pipe delivers it
        output.stdout.feed(data[start : start + 4096])
    output.close()
    result = output.result(exit_code=0, timed_out=False, duration_ms=1, sandbox="off", quarantined=[])
    assert result.truncated and result.full_output_path is not None
    check(result.output, data, Path(result.full_output_path))


@pytest.mark.parametrize("case", sorted(OUTPUTS))
def test_a_tasks_truncated_log_tells_the_truth_about_its_file(tmp_path: Path, case: str) -> None:
    data = OUTPUTS[case]
    log = TaskLog(tmp_path / "task.log")
    log.feed(data)
    whole = log.read(0)
    check(whole.text, data, tmp_path / "task.log")
    assert whole.omitted_bytes == int(_MARKER.search(whole.text)["omitted_bytes"])  # type: ignore[index]
    log.close()


def test_a_two_line_output_is_never_told_to_read_line_1000(tmp_path: Path) -> None:
    output = CommandOutput(tmp_path, SecretRedactor({}), None, None, separate=False)
    output.stdout.feed(b"a" * 80_000 + b"\nb\n")
    output.close()
    text = output.stdout.text()[0]
    assert "sed -n" not in text  # no line is omitted whole: the hint names the cut line's bytes
    assert f"tail -c +25001 {output.stdout.spill_path} | head -c 2000" in text
    assert "2 lines, 80003 bytes in all; shown here: the start of line 1 and line 2; omitted: the rest of line 1" in text
