"""Class 4, skills: a skill's ``allowed-tools`` pattern (``Bash(git log:*)``) pre-approves only
plain commands it matches, read by the same shell parser as policy rules. A second command
after ``;``, a redirect that writes, or anything the parser cannot fully read still asks."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest
import roder_ext_skills
from roder_ext_builtin_coding_tools.bash import BashTool

from roder_core.customization.definitions import Skill
from roder_core.customization.slash_commands import CommandRegistry
from roder_core.ir import ApprovalDecision, ToolResultItem
from roder_core.policy.allowed_tools import allowed_by
from roder_core.threads.events import ApprovalRequested
from tests.core.harness import call
from tests.ecosystem.harness import host_for, items, runtime_with

SKILL = Skill(
    name="history",
    description="git history",
    body="",
    path=Path("SKILL.md"),
    scope="user",
    allowed_tools=["Read", "Bash(git log:*)", "Bash(wc -l)"],
)


@pytest.mark.parametrize(
    ("command", "preapproved"),
    [
        ("git log -1", True),
        ("git log", True),
        ("git log --oneline | wc -l", True),
        ("git log -1; touch x", False),
        ("git log > notes.txt", False),
        ("git log >> .git/hooks/post-commit", False),
        ("git log $(touch x)", False),
        ("git log `touch x`", False),
        ("git log && rm -rf .", False),
        ("git log | sh", False),
        ("git logx", False),
        ("git log; f() { touch x; }; f", False),
        ("case a in a) git log;; esac", False),
        ("GIT_EXTERNAL_DIFF=./x git log -p", False),
    ],
)
def test_allowed_tools_go_through_the_shell_parser(command: str, preapproved: bool, workspace: Path) -> None:
    assert allowed_by(SKILL.allowed_tools, "bash", {"command": command}, str(workspace)) is preapproved


async def test_skill_preapproval_does_not_cover_a_second_command_in_the_loop(workspace: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    skill = workspace / ".roder" / "skills" / "history" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(
        textwrap.dedent("""\
        ---
        description: Reads git history.
        allowed-tools: Bash(git log:*)
        ---
        Read the history.
    """)
    )
    host = host_for(workspace, trusted=True)
    runtime = runtime_with(
        host,
        [roder_ext_skills.create(host)],
        [
            {"tool_calls": [call("bash", command="git log -1 2>&1")]},
            {"tool_calls": [call("bash", command="git log -1; touch pwned")]},
            {"tool_calls": [call("bash", command="git log > notes.txt")]},
            {"text": "done"},
        ],
        tools=[BashTool()],
        mode="ask",
        interactive=True,
    )
    asked: list[str] = []

    def deny(event: object) -> None:
        if isinstance(event, ApprovalRequested):
            asked.append(event.request.arguments["command"])
            runtime.resolve_approval(event.request.approval_id, ApprovalDecision(decision="deny"))

    runtime.bus.add_listener(deny)
    thread = await runtime.start_thread()
    await CommandRegistry.for_runtime(runtime).run(runtime, thread.id, "history", "now")
    turn = await runtime.wait_turn(thread.id)
    assert turn.status == "completed"
    results = items(runtime, thread.id, ToolResultItem)
    # matched the pattern: went past policy without asking (the test extension has no process grant,
    # so the broker then refuses it; what matters here is that policy let it through)
    assert not results[0].data.get("policy_denied")
    assert "git log -1 2>&1" not in asked
    assert asked == ["git log -1; touch pwned", "git log > notes.txt"]
    assert not (workspace / "pwned").exists()
    assert not (workspace / "notes.txt").exists()
