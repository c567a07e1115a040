"""Command hooks as real processes: block, rewrite, crash, time out, ask/allow, context, stop."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import roder_ext_command_hooks as command_hooks

from roder_core.ir import ApprovalDecision, ErrorItem, ToolResultItem, UserMessageItem
from roder_core.kernel.services import ContextQuery
from roder_core.threads.events import ApprovalRequested
from tests.core.harness import ReadTool, SleepTool, call
from tests.ecosystem.harness import host_for, items, runtime_with


def hook_script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text("import json, os, sys\nevent = json.load(sys.stdin)\n" + textwrap.dedent(body))
    return f"{sys.executable} {path}"


def configure(home: Path, toml: str) -> None:
    (home / "config.toml").write_text(textwrap.dedent(toml), encoding="utf-8")


def hooked_runtime(workspace: Path, script: list, **kw):
    host = host_for(workspace, trusted=False, env={"SOME_API_TOKEN": "tok-123456789"})
    extension = command_hooks.configured(host)
    assert extension is not None
    return runtime_with(host, [extension], script, tools=[ReadTool(), SleepTool()], **kw), extension


async def run(runtime, prompt: str = "go"):
    thread = await runtime.start_thread()
    turn = await runtime.run_turn(thread.id, prompt)
    return thread, turn


async def test_exit_2_blocks_the_call_and_tells_the_model(workspace: Path, roder_home: Path, tmp_path: Path) -> None:
    log = tmp_path / "seen.json"
    cmd = hook_script(
        tmp_path,
        "guard",
        f"""
        open({str(log)!r}, "w").write(json.dumps(event))
        if event["tool_input"].get("x") == "secret":
            print("reading secrets is not allowed", file=sys.stderr)
            sys.exit(2)
    """,
    )
    configure(
        roder_home,
        f"""
        [[hooks.PreToolUse]]
        matcher = "Peek"
        hooks = [{{ type = "command", command = "{cmd}" }}]
    """,
    )
    runtime, _ = hooked_runtime(workspace, [{"tool_calls": [call("peek", x="secret")]}, {"text": "ok"}])
    thread, turn = await run(runtime)
    [result] = items(runtime, thread.id, ToolResultItem)
    assert result.is_error
    assert "reading secrets is not allowed" in result.text
    seen = json.loads(log.read_text())
    assert seen["hook_event_name"] == "PreToolUse"
    assert seen["tool_name"] == "peek"
    assert seen["tool_input"] == {"x": "secret"}
    assert seen["session_id"] == thread.id
    assert seen["permission_mode"] == "bypassPermissions"
    assert seen["cwd"] == str(workspace.resolve())
    assert turn.status == "completed"


async def test_updated_input_rewrites_the_call(workspace: Path, roder_home: Path, tmp_path: Path) -> None:
    cmd = hook_script(
        tmp_path,
        "rewrite",
        """
        print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                          "updatedInput": {"x": event["tool_input"]["x"].upper()}}}))
    """,
    )
    configure(
        roder_home,
        f"""
        [[hooks.PreToolUse]]
        command = "{cmd}"
    """,
    )
    runtime, _ = hooked_runtime(workspace, [{"tool_calls": [call("peek", x="quiet")]}, {"text": "ok"}])
    thread, _ = await run(runtime)
    assert items(runtime, thread.id, ToolResultItem)[0].text == "peeked QUIET"


async def test_crashing_and_hanging_gating_hooks_deny(workspace: Path, roder_home: Path, tmp_path: Path) -> None:
    crash = hook_script(tmp_path, "crash", "raise RuntimeError('hook bug')\n")
    hang = hook_script(tmp_path, "hang", "import time\ntime.sleep(30)\n")
    configure(
        roder_home,
        f"""
        [[hooks.PreToolUse]]
        matcher = "peek"
        command = "{crash}"

        [[hooks.PreToolUse]]
        matcher = "sleep"
        hooks = [{{ command = "{hang}", timeout = 1 }}]
    """,
    )
    runtime, _ = hooked_runtime(workspace, [{"tool_calls": [call("peek", x="a"), call("sleep", seconds=0)]}, {"text": "ok"}])
    thread, _ = await run(runtime)
    results = {r.name: r for r in items(runtime, thread.id, ToolResultItem)}
    assert results["peek"].is_error
    assert "fail closed" in results["peek"].text
    assert "hook bug" in results["peek"].text
    assert results["sleep"].is_error
    assert "timed out after 1s" in results["sleep"].text


async def test_permission_ask_and_allow(workspace: Path, roder_home: Path, tmp_path: Path) -> None:
    decide = hook_script(
        tmp_path,
        "decide",
        """
        verdict = "ask" if event["tool_name"] == "peek" else "allow"
        print(json.dumps({"hookSpecificOutput": {"permissionDecision": verdict}}))
    """,
    )
    configure(
        roder_home,
        f"""
        [[hooks.PreToolUse]]
        command = "{decide}"
    """,
    )
    runtime, _ = hooked_runtime(
        workspace, [{"tool_calls": [call("peek", x="a"), call("sleep", seconds=0)]}, {"text": "ok"}], mode="ask", interactive=True
    )
    asked: list[str] = []

    def approve(event):
        if isinstance(event, ApprovalRequested):
            asked.append(event.request.tool)
            runtime.resolve_approval(event.request.approval_id, ApprovalDecision(decision="allow_once"))

    runtime.bus.add_listener(approve)
    thread, _ = await run(runtime)
    # peek is read-only (no approval in ask mode) but the hook asked; sleep would ask but the hook allowed
    assert asked == ["peek"]
    assert {r.name: r.is_error for r in items(runtime, thread.id, ToolResultItem)} == {"peek": False, "sleep": False}


async def test_hook_allow_never_overrides_plan_mode_deny(workspace: Path, roder_home: Path, tmp_path: Path) -> None:
    allow = hook_script(tmp_path, "allow", 'print(json.dumps({"hookSpecificOutput": {"permissionDecision": "allow"}}))\n')
    configure(
        roder_home,
        f"""
        [[hooks.PreToolUse]]
        command = "{allow}"
    """,
    )
    runtime, _ = hooked_runtime(workspace, [{"tool_calls": [call("sleep", seconds=0)]}, {"text": "ok"}], mode="plan")
    thread, _ = await run(runtime)
    [result] = items(runtime, thread.id, ToolResultItem)
    assert result.is_error
    assert "plan mode" in result.text


async def test_post_tool_use_feedback_and_prompt_hooks(workspace: Path, roder_home: Path, tmp_path: Path) -> None:
    post = hook_script(
        tmp_path,
        "post",
        """
        print("lint found 2 problems", file=sys.stderr)
        sys.exit(2)
    """,
    )
    prompt = hook_script(
        tmp_path,
        "prompt",
        """
        if "forbidden" in event["prompt"]:
            print(json.dumps({"decision": "block", "reason": "no forbidden prompts"}))
        else:
            print("current branch: main; env token visible: " + str("SOME_API_TOKEN" in os.environ))
    """,
    )
    configure(
        roder_home,
        f"""
        [[hooks.PostToolUse]]
        matcher = "peek"
        command = "{post}"

        [[hooks.UserPromptSubmit]]
        command = "{prompt}"
    """,
    )
    runtime, ext = hooked_runtime(workspace, [{"tool_calls": [call("peek", x="a")]}, {"text": "ok"}])
    thread, _ = await run(runtime, "fine prompt")
    [result] = items(runtime, thread.id, ToolResultItem)
    assert result.text == "peeked a\n\n[hook feedback] lint found 2 problems"
    blocks = await ext.hooks.context.load_context(ContextQuery(thread_id=thread.id, cwd=workspace, prompt=""))
    assert "current branch: main; env token visible: False" in blocks[0].text  # secrets scrubbed
    blocked = await runtime.run_turn(thread.id, "a forbidden prompt")
    assert blocked.status == "failed"
    assert "no forbidden prompts" in (blocked.error.message if blocked.error else "")
    assert [i.text for i in items(runtime, thread.id, UserMessageItem)] == ["fine prompt"]


async def test_stop_hook_sends_the_model_back_once(workspace: Path, roder_home: Path, tmp_path: Path) -> None:
    stop = hook_script(
        tmp_path,
        "stop",
        """
        if not event["stop_hook_active"]:
            print("tests are still failing; fix them", file=sys.stderr)
            sys.exit(2)
    """,
    )
    configure(
        roder_home,
        f"""
        [[hooks.Stop]]
        command = "{stop}"
    """,
    )
    runtime, _ = hooked_runtime(workspace, [{"text": "done?"}, {"text": "now really done"}])
    thread, turn = await run(runtime)
    assert turn.model_calls == 2
    assert turn.status == "completed"
    steer = [i for i in items(runtime, thread.id, UserMessageItem) if i.steer]
    assert [s.text for s in steer] == ["tests are still failing; fix them"]


async def test_bad_hooks_config_fails_closed(workspace: Path, roder_home: Path) -> None:
    configure(
        roder_home,
        """
        [[hooks.PreToolUse]]
        matcher = "(unclosed"
        command = "true"
    """,
    )
    runtime, _ = hooked_runtime(workspace, [{"text": "hi"}])
    thread, turn = await run(runtime)
    assert turn.status == "failed"
    assert "[hooks] configuration is invalid" in (turn.error.message if turn.error else "")
    assert items(runtime, thread.id, ErrorItem)


def test_no_hooks_no_extension(workspace: Path) -> None:
    assert command_hooks.configured(host_for(workspace, trusted=False)) is None


def test_project_hooks_load_only_when_trusted(workspace: Path) -> None:
    (workspace / ".roder").mkdir()
    (workspace / ".roder" / "config.toml").write_text('[[hooks.Stop]]\ncommand = "true"\n')
    assert command_hooks.configured(host_for(workspace, trusted=False)) is None
    trusted = command_hooks.configured(host_for(workspace, trusted=True))
    assert trusted is not None
    assert [h.event for h in trusted.hooks.hooks] == ["Stop"]
