"""Hook scripts written for Claude Code run unchanged: its tool names and input fields, the
transcript path, SubagentStop, and updatedInput in Claude Code's field names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import roder_ext_command_hooks as command_hooks
import roder_ext_jsonl_store
import roder_ext_subagents
from roder_ext_builtin_coding_tools.edit import EditTool
from roder_ext_builtin_coding_tools.write import WriteTool
from roder_ext_command_hooks.claude_names import from_claude_input, to_claude_input

from roder_core.ir import ToolResultItem
from roder_core.kernel.tools import Tool, ToolResult
from tests.core.harness import call
from tests.ecosystem.harness import RoutedMockExtension, host_for, items, runtime_with
from tests.ecosystem.test_command_hooks import configure, hook_script

# A guard as people write it for Claude Code: refuses edits of .env files, logs every event.
GUARD = """
    with open(os.environ["LOG"], "a") as log:
        log.write(json.dumps(event) + "\\n")
    path = event.get("tool_input", {}).get("file_path", "")
    if event["hook_event_name"] == "PreToolUse" and path.endswith(".env"):
        print(f"{event['tool_name']} of {path} is not allowed", file=sys.stderr)
        sys.exit(2)
"""


def logged(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


async def test_claude_code_guard_script_sees_claude_names(workspace: Path, roder_home: Path, tmp_path: Path, monkeypatch) -> None:
    log = tmp_path / "events.jsonl"
    monkeypatch.setenv("LOG", str(log))
    (workspace / "app.py").write_text("x = 1\n")
    (workspace / ".env").write_text("A=1\n")
    cmd = hook_script(tmp_path, "guard", GUARD)
    configure(
        roder_home,
        f"""
        [[hooks.PreToolUse]]
        matcher = "Edit|Write"
        hooks = [{{ type = "command", command = "{cmd}" }}]
    """,
    )
    host = host_for(workspace, trusted=False)
    script = [
        {
            "tool_calls": [
                call("edit", path="app.py", old_string="x = 1", new_string="x = 2"),
                call("write", path=".env", content="A=2\n"),
            ]
        },
        {"text": "done"},
    ]
    runtime = runtime_with(
        host, [command_hooks.configured(host), roder_ext_jsonl_store.create(host)], script, tools=[EditTool(), WriteTool()]
    )
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "go")
    edit, write = sorted(logged(log), key=lambda event: event["tool_name"])  # the calls may run together
    assert edit["tool_name"] == "Edit" and edit["tool_input"] == {
        "file_path": str(workspace / "app.py"),
        "old_string": "x = 1",
        "new_string": "x = 2",
    }
    assert write["tool_name"] == "Write"
    assert write["tool_input"]["content"] == "A=2\n"
    transcript = Path(edit["transcript_path"])
    assert transcript.is_file()
    assert thread.id in transcript.read_text()
    results = {r.name: r for r in items(runtime, thread.id, ToolResultItem)}
    assert "Write of" in results["write"].text
    assert results["write"].is_error
    assert "hook" not in results["edit"].text
    assert (workspace / ".env").read_text() == "A=1\n"


class EchoRead(Tool):
    """Named like the builtin read tool; answers with the arguments it was called with."""

    name = "read"
    description = "echo"
    parameters = {"type": "object", "properties": {"path": {"type": "string"}}}
    read_only = True

    async def execute(self, ctx: Any, call: Any) -> ToolResult:
        return ToolResult(id=call.id, name=call.name, text=json.dumps(call.arguments))


async def test_updated_input_in_claude_names_reaches_the_tool(workspace: Path, roder_home: Path, tmp_path: Path) -> None:
    cmd = hook_script(
        tmp_path,
        "redirect",
        """
        data = dict(event["tool_input"], file_path=event["tool_input"]["file_path"].replace("a.txt", "b.txt"))
        print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow",
                          "updatedInput": data}}))
    """,
    )
    configure(
        roder_home,
        f"""
        [[hooks.PreToolUse]]
        matcher = "Read"
        command = "{cmd}"
    """,
    )
    host = host_for(workspace, trusted=False)
    script = [{"tool_calls": [call("read", path="a.txt", offset=2)]}, {"text": "done"}]
    runtime = runtime_with(host, [command_hooks.configured(host)], script, tools=[EchoRead()])
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "go")
    [result] = items(runtime, thread.id, ToolResultItem)
    assert json.loads(result.text) == {"path": str(workspace / "b.txt"), "offset": 2}


def test_field_names_round_trip() -> None:
    cwd = Path("/w")
    assert to_claude_input("bash", {"command": "ls", "timeout": 2}, cwd) == {"command": "ls", "timeout": 2000}
    assert to_claude_input("grep", {"pattern": "x", "case_insensitive": True}, cwd) == {"pattern": "x", "-i": True}
    assert to_claude_input("read", {"path": "/abs/f", "offset": 3}, cwd) == {"file_path": "/abs/f", "offset": 3}
    assert to_claude_input("peek", {"path": "p"}, cwd) == {"path": "p"}
    for tool, args in [
        ("bash", {"command": "ls", "timeout": 2}),
        ("grep", {"pattern": "x", "case_insensitive": False}),
        ("edit", {"path": "/w/f", "old_string": "a", "new_string": "b"}),
    ]:
        assert from_claude_input(tool, to_claude_input(tool, args, cwd)) == args


async def test_subagent_stop_fires_for_the_child_and_stop_for_the_parent(
    workspace: Path, roder_home: Path, tmp_path: Path, monkeypatch
) -> None:
    log = tmp_path / "events.jsonl"
    monkeypatch.setenv("LOG", str(log))
    cmd = hook_script(tmp_path, "log", GUARD)
    configure(
        roder_home,
        f"""
        [[hooks.Stop]]
        command = "{cmd}"
        [[hooks.SubagentStop]]
        command = "{cmd}"
    """,
    )
    host = host_for(workspace, trusted=False)
    parent = [{"tool_calls": [call("task", description="look", prompt="p", subagent_type="explore")]}, {"text": "parent done"}]
    runtime = runtime_with(
        host,
        [command_hooks.configured(host), roder_ext_subagents.create(host)],
        engine=RoutedMockExtension(parent, [{"text": "child done"}], "Your task:"),
    )
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "go")
    sub, stop = logged(log)
    child_id = items(runtime, thread.id, ToolResultItem)[0].data["subagent"]["childThreadId"]
    assert sub["hook_event_name"] == "SubagentStop"
    assert sub["session_id"] == thread.id
    assert sub["agent_id"] == child_id
    assert sub["last_assistant_message"] == "child done"
    assert stop["hook_event_name"] == "Stop"
    assert stop["last_assistant_message"] == "parent done"
