"""Process extensions as an author in another language writes them from
docs/extension-protocol.md alone, without an SDK (tests/process_extensions/authors/): a Node.js
extension with a tool and an engine, a bash one with a tool; and the author's mistakes (a line
of non-JSON on stdout, a tool named like a built-in), each a real process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from roder_core.server.protocol import EXTENSIONS_LIST
from tests.builders import scripted_client, turn_tool_results
from tests.process_extensions.test_process_extensions import call, declare

AUTHORS = Path(__file__).with_name("authors")
NODE = shutil.which("node")
BASH = shutil.which("bash")
needs_node = pytest.mark.skipif(NODE is None, reason="Node.js is not installed")


def one_shot(roder_home: Path, workspace: Path, prompt: str, provider: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", "-p", prompt, "--provider", provider, "--mode", "bypass"],
        cwd=workspace,
        env={**os.environ, "RODER_HOME": str(roder_home)},
        capture_output=True,
        text=True,
        timeout=180,
    )


@needs_node
def test_a_node_extension_from_the_docs_runs_a_one_shot_turn_on_its_engine_and_tool(roder_home: Path, workspace: Path) -> None:
    declare(roder_home, "echo", [str(NODE), str(AUTHORS / "node_echo.mjs")], [], {})
    done = one_shot(roder_home, workspace, "make some noise", "node-echo")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("The tool said: {"), done.stdout
    assert '"name":"shout"' in done.stdout and "MAKE SOME NOISE" in done.stdout and '"isError":false' in done.stdout


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
async def test_a_bash_extension_from_the_docs_is_a_tool(roder_home: Path, workspace: Path, tmp_path: Path) -> None:
    declare(roder_home, "lines", [str(BASH), str(AUTHORS / "shell_tool.sh")], [], {})
    async with scripted_client(workspace, tmp_path, [call("line_count", text="a\nb\nc"), {"text": "done"}]) as app:
        (counted,) = await turn_tool_results(app)
    assert (counted.name, counted.text, counted.is_error) == ("line_count", "3 lines", False)


@needs_node
async def test_non_json_on_stdout_is_named_at_once_not_a_timeout(roder_home: Path, workspace: Path, tmp_path: Path) -> None:
    declare(roder_home, "echo", [str(NODE), str(AUTHORS / "node_echo.mjs")], [], {"NODE_ECHO_MODE": "garbage"})
    async with scripted_client(workspace, tmp_path, [{"text": "done"}]) as app:
        reasons = {s.source: s.reason for s in (await app.call(EXTENSIONS_LIST)).skipped}
    assert reasons["process:echo"] == (
        "process extension echo did not start: extension echo wrote something that is not JSON-RPC to stdout: "
        "b'node-echo starting up (this line is not JSON)\\n'"
    )


@needs_node
@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("collide", "duplicate tool name 'read' (from 'node-echo' and 'builtin-coding-tools')"),
        ("bad-schema", "tool 'shout': required ['txt'] not in properties"),
    ],
)
def test_a_tool_named_like_a_built_in_or_with_a_broken_schema_skips_that_extension_and_nothing_else(
    roder_home: Path, workspace: Path, mode: str, reason: str
) -> None:
    declare(roder_home, "echo", [str(NODE), str(AUTHORS / "node_echo.mjs")], [], {"NODE_ECHO_MODE": mode})
    done = one_shot(roder_home, workspace, "hello there", "mock")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Mock reply:"), done.stdout
    assert f"extension node-echo not loaded: extension 'node-echo': tool contributor 'node-echo': {reason}" in done.stderr
    listing = subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", "extensions", "list"],
        cwd=workspace,
        env={**os.environ, "RODER_HOME": str(roder_home)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listing.returncode == 0, listing.stderr
    assert f"not loaded: node-echo: extension 'node-echo': tool contributor 'node-echo': {reason}" in listing.stdout


@needs_node
def test_an_engine_that_crashes_mid_stream_fails_the_turn_saying_why(roder_home: Path, workspace: Path) -> None:
    declare(roder_home, "echo", [str(NODE), str(AUTHORS / "node_echo.mjs")], [], {"NODE_ECHO_MODE": "crash"})
    done = one_shot(roder_home, workspace, "hi", "node-echo")
    assert done.returncode == 1
    assert done.stdout.startswith("Half a")
    assert (
        "roder: turn failed: engine node-echo failed: extension echo exited with status 9 "
        "(stderr: node-echo: out of memory (pretend))"
    ) in done.stderr


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
def test_extensions_that_never_answer_initialize_are_left_out_on_one_line_and_the_rest_starts(
    roder_home: Path, workspace: Path, tmp_path: Path
) -> None:
    """Two extensions hang in ``initialize`` (real bash processes); a third works. ``roder -p``
    starts both hung ones before waiting for either (each saw the other started before Roder
    gave up on it), leaves each out after its ``startup_timeout`` with one line naming it and
    what it did not answer, and runs the turn through the working extension's tool."""
    marks = workspace / "marks"
    marks.mkdir()
    hang = [str(BASH), str(AUTHORS / "hang_in_initialize.sh")]
    grants = ["fs.write.workspace"]
    declare(roder_home, "stuck", hang, grants, {"HANG_MARKS": str(marks), "HANG_PEER": "mute"}, "startup_timeout = 3\n")
    declare(roder_home, "mute", hang, grants, {"HANG_MARKS": str(marks), "HANG_PEER": "stuck"}, "startup_timeout = 3\n")
    declare(roder_home, "lines", [str(BASH), str(AUTHORS / "shell_tool.sh")], [], {})
    script = tmp_path / "script.json"
    steps = [{"tool_calls": [{"name": "line_count", "arguments": {"text": "a\nb"}}]}, {"text": "counted"}]
    script.write_text(json.dumps({"steps": steps}))
    one_shot_json = ["-p", "count", "--provider", "mock", "--mode", "bypass", "--output-format", "stream-json"]
    done = subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", *one_shot_json],
        cwd=workspace,
        env={**os.environ, "RODER_HOME": str(roder_home), "RODER_MOCK_SCRIPT": str(script)},
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert '"2 lines"' in done.stdout
    for name in ("stuck", "mute"):
        line = (
            f"extension process:{name} not loaded: process extension {name} did not start: "
            f"extension {name} did not answer initialize within 3 s (startup_timeout); Roder started without it"
        )
        assert [row for row in done.stderr.splitlines() if f"process:{name}" in row] == [f"roder: {line}"]
        assert (marks / f"{name}.ended").read_text() == "together\n"


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
async def test_a_huge_answer_is_cut_saying_so_and_an_exit_mid_call_fails_only_that_call(
    roder_home: Path, workspace: Path, tmp_path: Path
) -> None:
    """A bash extension's tool answering three million characters reaches the model as its first
    100,000 with a line saying how much was cut (not the whole flood, not silently less); one
    exiting mid-call fails that call with its stderr, and the next call starts it again."""
    declare(roder_home, "flood", [str(BASH), str(AUTHORS / "flood_tool.sh")], [], {})
    steps = [call("flood"), call("vanish"), call("flood"), {"text": "done"}]
    async with scripted_client(workspace, tmp_path, steps) as app:
        flood, vanish, again = await turn_tool_results(app)
    cut = "\n[output truncated: 3000003 characters in all; the first 100000 are shown, the last 2900003 were cut]"
    assert (flood.text, flood.is_error) == ("x" * 100_000 + cut, False)
    assert vanish.is_error
    assert vanish.text == ("vanish failed: extension flood exited with status 5 (stderr: flood: leaving in the middle of a call)")
    assert (again.text, again.is_error) == (flood.text, False)


@pytest.mark.skipif(BASH is None, reason="bash is not installed")
async def test_an_error_answer_to_initialize_is_its_reason_not_a_timeout(
    roder_home: Path, workspace: Path, tmp_path: Path
) -> None:
    """An extension that answers ``initialize`` with an error at once (and keeps running) is left
    out with its own message: it did answer, so nothing says it missed its startup_timeout."""
    refuse = (
        'IFS= read -r line; id=${line#*\\"id\\":}; id=${id%%,*}; id=${id%%\\}*}; '
        'printf \'{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"set WIDGET_TOKEN first"}}\\n\' "$id"; '
        "while IFS= read -r _line; do :; done"
    )
    declare(roder_home, "picky", [str(BASH), "-c", refuse], [], {})
    async with scripted_client(workspace, tmp_path, [{"text": "done"}]) as app:
        reasons = {s.source: s.reason for s in (await app.call(EXTENSIONS_LIST)).skipped}
    assert reasons["process:picky"] == "process extension picky did not start: set WIDGET_TOKEN first"
