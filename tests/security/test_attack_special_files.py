"""A file the tools read that is not a regular file: a FIFO, a device, a socket.

``read``, ``edit`` and ``write`` refuse them (the file broker's ``check_readable``), but grep
handed an explicitly named path to ripgrep, which reads whatever it is named: a FIFO held the
turn until the search's 60-second limit (nobody writes to it), and a character device made
where a file was (``mknod zero.txt c 1 5`` is ``/dev/zero``) was read for that whole minute.
Through the real loop (the loopback model server, the default distribution), grep now refuses
each of them at once with the read tool's reason; a folder holding them is still searched.
"""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.security.test_attack_git_include import _call, turn_and_requests


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _link_to_fifo(path: Path) -> None:
    os.mkfifo(path.with_name("real.pipe"))
    path.symlink_to("real.pipe")


def _zero_device(path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root (CI runs this case as root)")
    os.mknod(path, 0o644 | stat.S_IFCHR, os.makedev(1, 5))


def _socket(path: Path) -> None:
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.close()


SPECIAL: dict[str, Callable[[Path], None]] = {
    "fifo": _fifo,
    "link to a fifo": _link_to_fifo,
    "/dev/zero made in place": _zero_device,
    "unix socket": _socket,
}


@pytest.mark.parametrize("kind", list(SPECIAL))
async def test_grep_refuses_a_named_file_that_is_not_regular(workspace: Path, roder_home: Path, kind: str) -> None:
    (workspace / "sub").mkdir()
    SPECIAL[kind](workspace / "sub" / "data.txt")
    (workspace / "sub" / "notes.txt").write_text("needle here\n")
    steps = [
        _call("grep", pattern="needle", path="sub/data.txt"),
        _call("grep", pattern="needle", path="sub/data.txt", glob="*.txt"),
        _call("read", path="sub/data.txt"),
        _call("grep", pattern="needle", path="sub"),
    ]
    results, _requests = await turn_and_requests(workspace, roder_home, steps, "bypass")
    assert [r.name for r in results] == ["grep", "grep", "read", "grep"]
    for refused in results[:3]:
        assert refused.is_error, refused.text
        assert "not a regular file (device, socket or pipe)" in refused.text, refused.text
    assert not results[3].is_error, results[3].text
    assert "sub/notes.txt:1:needle here" in results[3].text, results[3].text
