"""The context providers extension: base instructions, AGENTS.md/CLAUDE.md, environment."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from roder_ext_context import ContextExtension
from roder_ext_context.environment import Environment, describe_git_status
from roder_ext_context.project import MAX_FILE_CHARS, ProjectInstructions, instruction_files

from roder_core.brokers.project_reader import ProjectReader, project_root
from roder_core.kernel.distribution import HostContext
from roder_core.kernel.services import ContextQuery
from roder_core.settings.config import RoderConfig
from roder_core.settings.paths import RoderPaths

from .harness import make_runtime


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
            "PATH": "/usr/bin:/bin:/usr/local/bin",
            "HOME": str(cwd),
        },
    )


def _paths(config_dir: Path) -> RoderPaths:
    return RoderPaths(config_dir, config_dir.parent / "data", config_dir.parent / "cache")


def _instructions(config_dir: Path) -> ProjectInstructions:
    return ProjectInstructions(RoderConfig(), _paths(config_dir), {"HOME": str(config_dir.parent / "home")})


def _files(cwd: Path, config_dir: Path) -> list[Path]:
    found = instruction_files(cwd, ProjectReader(config_dir), ProjectReader(project_root(cwd)))
    return [path for _reader, path in found]


def test_instruction_files_go_from_global_to_root_to_the_working_directory(tmp_path: Path) -> None:
    config = tmp_path / "config"
    repo = tmp_path / "repo"
    deep = repo / "pkg" / "mod"
    deep.mkdir(parents=True)
    config.mkdir()
    (repo / ".git").mkdir()
    (tmp_path / "AGENTS.md").write_text("above the repository: not this project's")
    (config / "AGENTS.md").write_text("global")
    (repo / "AGENTS.md").write_text("root")
    (repo / "CLAUDE.md").write_text("ignored: AGENTS.md wins in the same folder")
    (repo / "pkg" / "CLAUDE.md").write_text("pkg, from CLAUDE.md")
    (deep / "AGENTS.md").write_text("module")
    found = _files(deep, config)
    assert found == [config / "AGENTS.md", repo / "AGENTS.md", repo / "pkg" / "CLAUDE.md", deep / "AGENTS.md"]


def test_outside_a_repository_only_the_working_directory_counts(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("parent folder")
    work = tmp_path / "work"
    work.mkdir()
    assert _files(work, tmp_path / "no-config") == []
    (work / "CLAUDE.md").write_text("here")
    assert _files(work, tmp_path / "no-config") == [work / "CLAUDE.md"]


async def test_project_block_quotes_each_file_and_cuts_runaway_ones(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Run `make test` before committing.\n" + "x" * (MAX_FILE_CHARS + 10))
    blocks = await _instructions(tmp_path / "cfg").load_context(ContextQuery("t", tmp_path, "hi"))
    text = blocks[0].text
    assert blocks[0].priority == 20
    assert not blocks[0].droppable
    assert f'<instructions path="{tmp_path / "AGENTS.md"}">' in text
    assert "Run `make test`" in text
    assert f"cut at {MAX_FILE_CHARS} characters" in text
    assert len(text) < MAX_FILE_CHARS + 1_000
    assert await _instructions(tmp_path / "cfg").load_context(ContextQuery("t", tmp_path / "cfg", "")) == []


def test_git_status_lines_become_one_sentence() -> None:
    assert describe_git_status("## main...origin/main [ahead 2]\n M a.py\n?? b.py\n") == (
        "branch main, tracking origin/main [ahead 2]; 2 uncommitted change(s)"
    )
    assert describe_git_status("## No commits yet on main\n") == "branch main (no commits yet); clean working tree"
    assert describe_git_status("## HEAD (no branch)\n") == "detached HEAD; clean working tree"


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
async def test_environment_reports_branch_and_dirty_state_once_per_turn(workspace: Path) -> None:
    _git("init", "-q", "-b", "trunk", cwd=workspace)
    (workspace / "a.txt").write_text("a")
    _git("add", "a.txt", cwd=workspace)
    _git("commit", "-q", "-m", "one", cwd=workspace)
    env = Environment()
    clean = (await env.load_context(ContextQuery("t1", workspace, "first", turn_start=True)))[0].text
    assert "- Git: branch trunk; clean working tree" in clean
    assert f"- Working directory: {workspace}" in clean
    assert "- Date: " in clean
    assert "- Operating system: " in clean
    (workspace / "b.txt").write_text("b")
    same_turn = (await env.load_context(ContextQuery("t1", workspace, "first", turn_start=True)))[0].text
    assert same_turn == clean, "the same turn keeps the same block (prompt caches stay warm)"
    next_turn = (await env.load_context(ContextQuery("t1", workspace, "second", turn_start=True)))[0].text
    assert "1 uncommitted change(s)" in next_turn
    plain = (await env.load_context(ContextQuery("t2", workspace / "..", "x", turn_start=True)))[0].text
    assert "not a git repository" in plain


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
async def test_a_turn_asks_git_once_however_many_model_calls_it_makes(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment block is a turn block, built at the turn's start; the queries of the
    turn's model calls (which read only system blocks) build none and run no ``git status``."""
    from roder_ext_context import environment

    _git("init", "-q", "-b", "trunk", cwd=workspace)
    asked: list[Path] = []
    real = environment.git_state

    async def git_state(cwd: Path) -> str:
        asked.append(cwd)
        return await real(cwd)

    monkeypatch.setattr(environment, "git_state", git_state)
    steps = [{"text": "", "tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]}, {"text": "done"}]
    (workspace / "a.txt").write_text("a")
    runtime, engine = make_runtime(
        workspace,
        [*steps, {"text": "again"}],
        extensions=[ContextExtension(HostContext(workspace, RoderPaths.from_env(), RoderConfig(), {}))],
    )
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "read it")
    assert len(engine.requests) == 2
    assert len(asked) == 1
    await runtime.run_turn(thread.id, "and again")
    assert len(asked) == 2
    assert "- Git: branch trunk" in engine.requests[2].messages[-1].parts[0].text
    assert "- Git: branch trunk" in engine.requests[0].messages[0].parts[0].text
    await runtime.close()


async def test_the_system_prompt_is_assembled_in_order_for_a_real_turn(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("Always answer in haiku.")
    runtime, engine = make_runtime(
        workspace, extensions=[ContextExtension(HostContext(workspace, RoderPaths.from_env(), RoderConfig(), {}))]
    )
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "hello")
    (workspace / "new.txt").write_text("an edit between turns")
    await runtime.run_turn(thread.id, "again")
    system = engine.requests[0].system
    assert system.startswith("You are Roder, a coding agent")
    assert system.index("# Project instructions") < system.index("Always answer in haiku.")
    # What changes between turns is not in the system prompt, which stays byte-stable...
    assert "# Environment" not in system
    assert engine.requests[1].system == system
    # ...but recorded with each turn's message, so earlier messages are repeated verbatim.
    first, _answer, second = engine.requests[1].messages
    assert first == engine.requests[0].messages[0]
    assert first.parts[0].text.startswith("<context>\n# Environment")
    assert first.parts[1].text == "hello"
    assert second.parts[0].text.startswith("<context>\n# Environment")
    assert second.parts[1].text == "again"
    await runtime.close()
