"""Approvals through the real loop: request with preview, allow once / session / always (the
exact rule lands in config.toml), deny, deny and interrupt, timeout, headless denial, and the
audit records they leave."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from roder_core.ir import ApprovalDecision, ToolResultItem
from roder_core.threads.events import ApprovalRequested
from tests.tools.harness import call, start


def answer_with(runtime: Any, decisions: list[ApprovalDecision], seen: list[Any]) -> None:
    """Resolve each approval request with the next decision, as a client would."""

    def on_event(event: Any) -> None:
        if isinstance(event, ApprovalRequested):
            seen.append(event.request)
            decision = decisions.pop(0)
            asyncio.get_running_loop().call_soon(runtime.resolve_approval, event.request.approval_id, decision)

    runtime.bus.add_listener(on_event)


def results(runtime: Any, thread_id: str) -> list[ToolResultItem]:
    return [i for i in runtime.thread(thread_id).items() if isinstance(i, ToolResultItem)]


async def test_allow_always_saves_the_exact_rule_shown(workspace: Path, roder_home: Path) -> None:
    steps = [
        {"tool_calls": [call("bash", command="echo one && echo two > out.txt")]},
        {"tool_calls": [call("bash", command="echo one && echo two > out.txt", timeout=30)]},
        {"text": "done"},
    ]
    runtime = start(workspace, steps, mode="ask", interactive=True).runtime
    seen: list[Any] = []
    answer_with(runtime, [ApprovalDecision(decision="allow_always")], seen)
    thread = await runtime.start_thread()
    turn = await runtime.run_turn(thread.id, "go")
    assert turn.status == "completed"
    assert len(seen) == 1  # the second call is allowed by the saved rules
    request = seen[0]
    assert request.command == "echo one && echo two > out.txt"
    always = next(o for o in request.options if o.id == "allow_always")
    assert always.rule == "bash(echo one)\nbash(echo two)\nedit(./out.txt)"
    assert always.label == "Always allow: bash(echo one), bash(echo two), edit(./out.txt)"
    config = (roder_home / "config.toml").read_text()
    for rule in ("bash(echo one)", "bash(echo two)", "edit(./out.txt)"):
        assert rule in config
    assert [r.is_error for r in results(runtime, thread.id)] == [False, False]
    kinds = [json.loads(line)["kind"] for line in (roder_home / "data" / "audit.jsonl").read_text().splitlines()]
    assert "approval.requested" in kinds
    assert "approval.resolved" in kinds
    assert "policy.rule_saved" in kinds


async def test_edit_approval_shows_a_diff_and_deny_reaches_the_model(workspace: Path) -> None:
    (workspace / "a.py").write_text("x = 1\n")
    steps = [{"tool_calls": [call("edit", path="a.py", old_string="x = 1", new_string="x = 2")]}, {"text": "ok"}]
    runtime = start(workspace, steps, mode="ask", interactive=True).runtime
    seen: list[Any] = []
    answer_with(runtime, [ApprovalDecision(decision="deny", reason="not now")], seen)
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "go")
    assert "-x = 1\n+x = 2" in (seen[0].diff or "")
    denied = results(runtime, thread.id)[0]
    assert denied.is_error
    assert "the user denied this edit call: not now" in denied.text
    assert (workspace / "a.py").read_text() == "x = 1\n"


async def test_allow_session_then_deny_and_interrupt(workspace: Path) -> None:
    steps = [
        {"tool_calls": [call("bash", command="echo a")]},
        {
            "tool_calls": [
                call("bash", command="echo a"),
            ]
        },
        {"tool_calls": [call("bash", command="echo b")]},
        {"text": "never reached"},
    ]
    runtime = start(workspace, steps, mode="ask", interactive=True).runtime
    seen: list[Any] = []
    answer_with(runtime, [ApprovalDecision(decision="allow_session"), ApprovalDecision(decision="deny_interrupt")], seen)
    thread = await runtime.start_thread()
    turn = await runtime.run_turn(thread.id, "go")
    assert [r.command for r in seen] == ["echo a", "echo b"]
    assert turn.status == "interrupted"


async def test_unanswered_approval_times_out_to_deny(workspace: Path, roder_home: Path) -> None:
    (roder_home / "config.toml").write_text("approval_timeout = 0.3\n")
    steps = [{"tool_calls": [call("bash", command="echo hi")]}, {"text": "ok"}]
    runtime = start(workspace, steps, mode="ask", interactive=True).runtime
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "go")
    result = results(runtime, thread.id)[0]
    assert result.is_error
    assert "approval timed out" in result.text


async def test_headless_ask_is_denied_with_a_way_out(workspace: Path) -> None:
    steps = [{"tool_calls": [call("write", path="f.txt", content="x")]}, {"text": "ok"}]
    runtime = start(workspace, steps, mode="ask", interactive=False).runtime
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "go")
    result = results(runtime, thread.id)[0]
    assert result.is_error
    assert "headless" in result.text
    assert "[policy]" in result.text
    assert not (workspace / "f.txt").exists()


async def test_configured_rules_apply_in_a_run(workspace: Path, roder_home: Path) -> None:
    (roder_home / "config.toml").write_text('[policy]\nallow = ["bash(echo *)"]\ndeny = ["read(.env)"]\n')
    (workspace / ".env").write_text("TOKEN=1\n")
    steps = [{"tool_calls": [call("bash", command="echo allowed"), call("read", path=".env")]}, {"text": "ok"}]
    runtime = start(workspace, steps, mode="ask", interactive=False).runtime
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "go")
    by_name = {r.name: r for r in results(runtime, thread.id)}
    assert not by_name["bash"].is_error
    assert "allowed" in by_name["bash"].text
    assert by_name["read"].is_error
    assert "denied by the rule read(.env)" in by_name["read"].text


async def test_project_rules_apply_only_when_the_folder_is_trusted(workspace: Path) -> None:
    (workspace / ".roder").mkdir()
    (workspace / ".roder" / "config.toml").write_text('[policy]\nallow = ["bash(make lint)"]\n')
    steps = [{"tool_calls": [call("bash", command="make lint")]}, {"text": "ok"}]
    for trusted, allowed in ((False, False), (True, True)):
        runtime = start(workspace, steps, mode="ask", interactive=False, trust=trusted).runtime
        thread = await runtime.start_thread()
        await runtime.run_turn(thread.id, "go")
        result = results(runtime, thread.id)[0]
        assert ("headless" not in result.text) is allowed, (trusted, result.text)


async def test_headless_denial_hints_what_would_allow_the_call(workspace: Path, tmp_path: Path) -> None:
    async def denial(mode: str, tool_call: dict[str, Any]) -> str:
        runtime = start(workspace, [{"tool_calls": [tool_call]}, {"text": "ok"}], mode=mode, interactive=False).runtime
        thread = await runtime.start_thread()
        await runtime.run_turn(thread.id, "go")
        result = results(runtime, thread.id)[0]
        await runtime.close()
        assert result.is_error and "nobody can approve in this headless run" in result.text, result.text
        return result.text

    write = await denial("ask", call("write", path="f.txt", content="x"))
    assert "--mode auto-edit" in write
    command = await denial("auto-edit", call("bash", command="touch made-by-bash"))
    assert "--mode bypass" in command
    assert "--mode auto-edit" not in command  # never the mode in use
    outside = await denial("bypass", call("bash", command=f"echo x > {tmp_path / 'outside.txt'}"))
    assert "--mode" not in outside and "always needs a person" in outside, outside
    assert not (tmp_path / "outside.txt").exists()
    assert not (workspace / "f.txt").exists()
    assert not (workspace / "made-by-bash").exists()


async def test_always_allow_with_an_unwritable_config_runs_the_call_and_says_the_rule_was_not_saved(
    workspace: Path, roder_home: Path, tmp_path: Path
) -> None:
    """config.toml links into a path whose folder is a file: no write can succeed, as root too."""
    from roder_core.threads.events import ErrorEvent

    steps = [
        {"tool_calls": [call("bash", command="echo allowed-ran")]},
        {"tool_calls": [call("bash", command="echo allowed-ran")]},
        {"text": "done"},
    ]
    runtime = start(workspace, steps, mode="ask", interactive=True).runtime
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    (roder_home / "config.toml").symlink_to(blocker / "config.toml")  # after start-up read the config
    seen: list[Any] = []
    errors: list[ErrorEvent] = []
    runtime.bus.add_listener(lambda event: errors.append(event) if isinstance(event, ErrorEvent) else None)
    answer_with(runtime, [ApprovalDecision(decision="allow_always")], seen)
    thread = await runtime.start_thread()
    turn = await runtime.run_turn(thread.id, "go")
    assert turn.status == "completed", turn.error
    assert len(seen) == 1  # the rule still applies for the session
    assert [r.is_error for r in results(runtime, thread.id)] == [False, False]
    assert "allowed-ran" in results(runtime, thread.id)[0].text
    [unsaved] = errors
    assert unsaved.kind == "config"
    assert "bash(echo allowed-ran) applies to this session but was not saved to" in unsaved.message
    assert str(roder_home / "config.toml") in unsaved.message


async def test_an_unexpected_error_in_a_tool_group_is_reported_by_its_real_type(workspace: Path) -> None:
    """The last-resort handler opens an ExceptionGroup: the turn's error names the real exception."""
    steps = [{"tool_calls": [call("bash", command="echo x")]}, {"text": "done"}]
    runtime = start(workspace, steps, mode="ask", interactive=True).runtime

    def broken(rule: str, verdict: Any = None) -> str | None:
        raise LookupError("the policy table is gone")

    runtime.persist_rule = broken  # type: ignore[method-assign]
    answer_with(runtime, [ApprovalDecision(decision="allow_always")], [])
    thread = await runtime.start_thread()
    turn = await runtime.run_turn(thread.id, "go")
    assert turn.status == "failed"
    assert turn.error is not None
    assert turn.error.message == "LookupError: the policy table is gone"
    assert "TaskGroup" not in turn.error.message
