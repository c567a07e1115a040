"""GPT/Codex habits with apply_patch, through the real loop: the heredoc run through bash runs as
the apply_patch tool (same policy, approvals and result), in every shell form models write, and a
patch argument wrapped in that heredoc is unwrapped."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tools.harness import call, run_script

PATCH = "*** Begin Patch\n*** Update File: a.txt\n-one\n+ONE\n*** End Patch"
RAN_AS = "[this bash call ran as the apply_patch tool]\n"


@pytest.mark.parametrize(
    "command",
    [
        f"apply_patch <<'EOF'\n{PATCH}\nEOF",
        f'apply_patch <<"PATCH"\n{PATCH}\nPATCH\n',
        f"apply_patch <<EOF\n{PATCH}\nEOF",
        f"applypatch <<'EOF'\n{PATCH}\nEOF",
        f"apply_patch \"$(cat <<'EOF'\n{PATCH}\nEOF\n)\"",
        f"apply_patch '{PATCH}'",
    ],
    ids=["quoted-tag", "double-quoted-tag", "bare-tag", "applypatch", "cat-subshell", "single-quoted-arg"],
)
async def test_apply_patch_heredoc_through_bash_runs_as_the_tool(workspace: Path, command: str) -> None:
    (workspace / "a.txt").write_text("one\ntwo\n")
    _rt, [result] = await run_script(workspace, [{"tool_calls": [call("bash", command=command)]}, {"text": "ok"}])
    assert not result.is_error, result.text
    assert result.name == "bash"
    assert result.text.startswith(RAN_AS + "applied the patch:\nM a.txt\n")
    assert (workspace / "a.txt").read_text() == "ONE\ntwo\n"


async def test_cd_and_workdir_make_paths_relative_to_that_folder(workspace: Path) -> None:
    (workspace / "pkg" / "sub").mkdir(parents=True)
    (workspace / "pkg" / "sub" / "a.txt").write_text("one\n")
    (workspace / "pkg" / "b.txt").write_text("one\n")
    steps = [
        {
            "tool_calls": [
                call("bash", command=f"cd sub && apply_patch <<'EOF'\n{PATCH}\nEOF", workdir="pkg"),
                call("bash", command=f"cd pkg && apply_patch <<'EOF'\n{PATCH.replace('a.txt', 'b.txt')}\nEOF"),
            ]
        },
        {"text": "ok"},
    ]
    _rt, results = await run_script(workspace, steps)
    assert [r.is_error for r in results] == [False, False], [r.text for r in results]
    assert results[0].text.startswith(RAN_AS + "applied the patch:\nM pkg/sub/a.txt\n")
    assert (workspace / "pkg" / "sub" / "a.txt").read_text() == "ONE\n"
    assert (workspace / "pkg" / "b.txt").read_text() == "ONE\n"


async def test_the_heredoc_is_judged_as_apply_patch_by_policy(workspace: Path) -> None:
    """auto-edit allows file edits and asks before commands: the heredoc is an edit, so it runs
    headless, while a real command is denied for want of an approver."""
    (workspace / "a.txt").write_text("one\n")
    steps = [
        {"tool_calls": [call("bash", command=f"apply_patch <<'EOF'\n{PATCH}\nEOF")]},
        {"tool_calls": [call("bash", command="touch b.txt")]},
        {"text": "ok"},
    ]
    _rt, [patched, command] = await run_script(workspace, steps, mode="auto-edit")
    assert not patched.is_error, patched.text
    assert (workspace / "a.txt").read_text() == "ONE\n"
    assert command.is_error
    assert "needs approval" in command.text


async def test_the_heredoc_to_a_protected_path_is_refused_like_apply_patch(workspace: Path) -> None:
    patch = "*** Begin Patch\n*** Add File: .git/hooks/pre-commit\n+echo pwned\n*** End Patch"
    (workspace / ".git").mkdir()
    _rt, [result] = await run_script(
        workspace, [{"tool_calls": [call("bash", command=f"apply_patch <<'EOF'\n{patch}\nEOF")]}, {"text": "ok"}]
    )
    assert result.is_error
    assert result.text.startswith(RAN_AS)
    assert not (workspace / ".git" / "hooks" / "pre-commit").exists()


async def test_other_commands_mentioning_apply_patch_still_run_as_commands(workspace: Path) -> None:
    command = f"apply_patch <<'EOF'\n{PATCH}\nEOF\necho after"
    _rt, [result] = await run_script(workspace, [{"tool_calls": [call("bash", command=command)]}, {"text": "ok"}], sandbox="off")
    assert not result.text.startswith(RAN_AS)
    assert "apply_patch: command not found" in result.text


@pytest.mark.parametrize(
    "wrapped",
    [f"<<'EOF'\n{PATCH}\nEOF", f"apply_patch <<'EOF'\n{PATCH}\nEOF\n", f"cd . && apply_patch <<EOF\n{PATCH}\nEOF"],
    ids=["bare-heredoc", "with-command", "with-cd"],
)
async def test_a_patch_argument_wrapped_in_the_heredoc_is_unwrapped(workspace: Path, wrapped: str) -> None:
    (workspace / "a.txt").write_text("one\n")
    _rt, [result] = await run_script(workspace, [{"tool_calls": [call("apply_patch", patch=wrapped)]}, {"text": "ok"}])
    assert not result.is_error, result.text
    assert result.text.startswith("applied the patch:\nM a.txt\n")
    assert (workspace / "a.txt").read_text() == "ONE\n"
