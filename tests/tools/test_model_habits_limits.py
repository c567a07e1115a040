"""The model is told what it cannot do, through the real loop: the turn's environment names the
sandbox, the network and the approval mode; bash's description says whether commands have
network; a network failure without network, a server held to the timeout and a timeout in
milliseconds each get a plain answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from roder_core.brokers.command_output import CommandOutput
from roder_core.brokers.secrets import SecretRedactor
from roder_core.ir import UserMessageItem
from tests.tools.harness import call, run_script, start

NO_NETWORK = (
    "none for commands: installs, downloads and other hosts fail (name resolution fails); only 127.0.0.1, "
    "shared by this thread's commands, works"
)


@pytest.mark.parametrize(
    ("sandbox", "mode", "lines"),
    [
        (
            "workspace-write",
            "auto-edit",
            [
                "- Sandbox: workspace-write: commands can write only inside the workspace and a private /tmp",
                f"- Network: {NO_NETWORK}",
                "- Approval mode: auto-edit: reading and file changes run; commands need the user's approval; "
                "nobody can approve in this run, so calls that need approval are denied",
            ],
        ),
        (
            "off",
            "bypass",
            [
                "- Sandbox: off: commands run unconfined, as the user",
                "- Network: commands can reach the network",
                "- Approval mode: bypass: every tool call runs without asking",
            ],
        ),
    ],
)
async def test_the_turn_context_says_sandbox_network_and_mode(workspace: Path, sandbox: str, mode: str, lines: list[str]) -> None:
    started = start(workspace, [{"text": "ok"}], sandbox=sandbox, mode=mode, context=True)
    runtime = started.runtime
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "hello")
    [user] = [i for i in runtime.thread(thread.id).items() if isinstance(i, UserMessageItem)]
    context = user.context.splitlines()
    assert context[context.index(lines[0]) : context.index(lines[0]) + 3] == lines
    bash = runtime.registry.tool_registry().get("bash")
    assert bash is not None
    said = lines[1].removeprefix("- Network: ")
    assert f"; network: {said}." in bash.spec().description
    await runtime.close()


async def test_a_network_failure_without_network_says_why(workspace: Path) -> None:
    failing = "echo 'curl: (6) Could not resolve host: registry.npmjs.org' >&2; exit 6"
    steps = [{"tool_calls": [call("bash", command=failing)]}, {"text": "ok"}]
    _rt, [sandboxed] = await run_script(workspace, steps, sandbox="workspace-write")
    assert sandboxed.text.endswith(
        "[protection: no network. Commands here cannot reach other hosts (names do not resolve; only 127.0.0.1 "
        "shared by this thread's commands works), so retrying or waiting will not help: work offline, use what "
        "is installed, or tell the user which command to run with network access.]"
    )
    _rt, [unconfined] = await run_script(workspace, steps, sandbox="off")
    assert "protection: no network" not in unconfined.text


async def test_a_foreground_server_held_to_the_timeout_points_to_background(workspace: Path) -> None:
    server = "echo 'Server running at http://127.0.0.1:8000/'; sleep 30"
    steps = [{"tool_calls": [call("bash", command=server, timeout=1)]}, {"text": "ok"}]
    _rt, [result] = await run_script(workspace, steps, sandbox="off")
    assert result.is_error
    assert result.text.endswith(
        "[this looks like a server or watcher, which runs until stopped, so it held the call until the timeout: "
        "start it with run_in_background: true, then read its output with task_output and stop it with task_kill]"
    )


@pytest.mark.parametrize(
    ("timeout", "answer"),
    [
        (30000, "not run: timeout is in seconds, at most 3600; 30000 looks like milliseconds; for 30 seconds send timeout=30"),
        (
            7_200_000,
            "not run: timeout is in seconds, at most 3600; use run_in_background for commands that run longer than 3600 seconds",
        ),
    ],
)
async def test_a_timeout_in_milliseconds_gets_a_clear_answer(workspace: Path, timeout: int, answer: str) -> None:
    steps = [{"tool_calls": [call("bash", command="touch ran.txt", timeout=timeout)]}, {"text": "ok"}]
    _rt, [result] = await run_script(workspace, steps, sandbox="off")
    assert result.is_error
    assert result.text == answer
    assert not (workspace / "ran.txt").exists()


def test_spilled_output_says_how_to_read_it(tmp_path: Path) -> None:
    output = CommandOutput(tmp_path, SecretRedactor([]), None, None, separate=False)
    output.stdout.feed("".join(f"line {n}\n" for n in range(5000)).encode())
    output.close()
    result = output.result(exit_code=0, timed_out=False, duration_ms=1, sandbox="off", quarantined=[])
    path = result.full_output_path
    assert path is not None
    assert f"read the omitted part with bash: sed -n '1001,1100p' {path} (or grep -n PATTERN {path})" in result.output
