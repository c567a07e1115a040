"""Skills, slash commands and agents from a temporary project: loaded when trusted, ignored
otherwise; the skill tool, /skill-name, templates with $ARGUMENTS/$1, the built-in registry."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import roder_ext_skills

from roder_core.customization.definitions import DefinitionRoots, discover, parse_frontmatter, tool_list
from roder_core.customization.slash_commands import CommandError, CommandRegistry, expand_template, parse_invocation
from roder_core.customization.subagents import list_agents
from roder_core.ir import ApprovalDecision, ToolResultItem, UserMessageItem
from roder_core.kernel.services import ContextQuery
from roder_core.settings.paths import RoderPaths
from roder_core.threads.events import ApprovalRequested
from tests.core.harness import call
from tests.ecosystem.harness import host_for, items, runtime_with


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


@pytest.fixture
def project(workspace: Path) -> Path:
    write(
        workspace / ".roder/skills/pdf-tools/SKILL.md",
        """
        ---
        name: pdf-tools
        description: Extract text and tables from PDF files.
        allowed-tools: Read, Bash(pdftotext:*)
        ---
        # PDF tools
        Run `pdftotext file.pdf -` and read the output.
    """,
    )
    write(
        workspace / ".agents/skills/changelog/SKILL.md",
        """
        ---
        description: Write changelog entries in Keep a Changelog style.
        ---
        Add a bullet under [Unreleased].
    """,
    )
    write(workspace / ".roder/skills/broken/SKILL.md", "---\nname: broken\n---\nno description\n")
    write(
        workspace / ".roder/commands/review.md",
        """
        ---
        description: Review a file
        argument-hint: <file> [focus]
        model: mock-large
        ---
        Review $1 with a focus on $2. Everything: $ARGUMENTS
    """,
    )
    write(workspace / ".roder/commands/git/summary.md", "Summarize the git log.\n")
    write(
        workspace / ".roder/agents/reviewer.md",
        """
        ---
        name: reviewer
        description: Reviews diffs for bugs.
        tools: Read, Grep
        model: inherit
        ---
        You review code.
    """,
    )
    return workspace


def test_frontmatter_and_tool_lists() -> None:
    meta, body = parse_frontmatter("---\nname: x\ndescription: >\n  two\n  lines\n---\nbody\n")
    assert meta == {"name": "x", "description": "two lines"}
    assert body == "body\n"
    assert parse_frontmatter("no frontmatter") == ({}, "no frontmatter")
    assert tool_list("Read, Grep Bash(git log:*)") == ["Read", "Grep", "Bash(git log:*)"]
    assert tool_list(["a", "b"]) == ["a", "b"]
    assert tool_list(None) is None


def test_project_definitions_load_only_when_trusted(project: Path) -> None:
    paths = RoderPaths.from_env()
    write(paths.config_dir / "commands/mine.md", "My user command $ARGUMENTS\n")
    untrusted = discover(DefinitionRoots(project, paths, trusted=False))
    assert untrusted.skills == {}
    assert list(untrusted.commands) == ["mine"]
    assert untrusted.agents == {}
    trusted = discover(DefinitionRoots(project, paths, trusted=True))
    assert set(trusted.skills) == {"pdf-tools", "changelog"}
    assert trusted.skills["pdf-tools"].allowed_tools == ["Read", "Bash(pdftotext:*)"]
    assert set(trusted.commands) == {"mine", "review", "git:summary"}
    assert trusted.agents["reviewer"].tools == ["Read", "Grep"]
    assert trusted.agents["reviewer"].model is None
    assert any("broken" in p and "description" in p for p in trusted.problems)
    assert [a.name for a in list_agents(project, paths, False)] == ["explore", "general"]
    assert "reviewer" in [a.name for a in list_agents(project, paths, True)]


async def test_command_registry_lists_expands_and_completes(project: Path) -> None:
    registry = CommandRegistry(project, RoderPaths.from_env(), trusted=True)
    rows = {c.name: c for c in registry.list()}
    assert rows["new"].kind == "builtin"
    assert rows["compact"].kind == "builtin"
    assert rows["review"].kind == "custom"
    assert rows["review"].argument_hint == "<file> [focus]"
    assert rows["pdf-tools"].kind == "skill"
    expanded = await registry.expand("review", "src/app.py security")
    assert expanded.text == "Review src/app.py with a focus on security. Everything: src/app.py security"
    assert expanded.model == "mock-large"
    assert (await registry.expand("git:summary", "last week")).text.endswith("ARGUMENTS: last week")
    assert (await registry.expand("/fork")).action == "fork"
    assert '<skill name="pdf-tools"' in (await registry.expand("pdf-tools", "report.pdf")).text
    assert [c.name for c in registry.complete("/re")] == ["resume", "rewind", "redo", "review"]
    with pytest.raises(CommandError, match="unknown command /nope"):
        await registry.expand("nope")
    untrusted = CommandRegistry(project, RoderPaths.from_env(), trusted=False)
    assert untrusted.get("review") is None
    assert untrusted.get("pdf-tools") is None


def test_template_placeholders() -> None:
    assert expand_template("a $1 b $2 c", '"two words" x') == "a two words b x c"
    assert expand_template("only $1", "") == "only "
    assert parse_invocation("/review  src/x.py now") == ("review", "src/x.py now")


async def test_commands_run_turns_and_builtins(project: Path) -> None:
    host = host_for(project, trusted=True)
    runtime = runtime_with(host, [], [{"text": "reviewed"}], mode="ask")
    registry = CommandRegistry.for_runtime(runtime)
    thread = await runtime.start_thread()
    outcome = await registry.run(runtime, thread.id, "review", "a.py style")
    assert outcome.kind == "turn"
    turn = await runtime.wait_turn(thread.id)
    assert turn.status == "completed"
    assert items(runtime, thread.id, UserMessageItem)[0].text.startswith("Review a.py with a focus on style")
    done = await registry.run(runtime, thread.id, "mode", "plan")
    assert done.kind == "done"
    assert runtime.mode == "plan"
    model = await registry.run(runtime, thread.id, "model", "mock/mock-large")
    assert model.data == {"provider": "mock", "model": "mock-large"}
    action = await registry.run(runtime, thread.id, "fork", "")
    assert action.kind == "action"
    assert action.action == "fork"
    compacted = await registry.run(runtime, thread.id, "compact", "keep the API notes")  # runs on the runtime
    assert compacted.kind == "turn"
    assert compacted.turn is not None
    assert compacted.turn.id != turn.id
    assert compacted.turn.status == "completed"
    assert "/review <file> [focus]" in (await registry.run(runtime, thread.id, "help")).message


async def test_skills_context_tool_and_allowed_tools(project: Path) -> None:
    host = host_for(project, trusted=True)
    extension = roder_ext_skills.create(host)
    runtime = runtime_with(
        host,
        [extension],
        [
            {"tool_calls": [call("sleep", seconds=0, label="before")]},
            {"tool_calls": [{"name": "skill", "arguments": {"name": "pdf-tools"}}]},
            {"tool_calls": [call("sleep", seconds=0, label="after"), call("peek", x="y")]},
            {"text": "done"},
        ],
        mode="ask",
        interactive=True,
    )
    asked: list[str] = []

    def deny(event):
        if isinstance(event, ApprovalRequested):
            asked.append(event.request.arguments.get("label", ""))
            runtime.resolve_approval(event.request.approval_id, ApprovalDecision(decision="deny"))

    runtime.bus.add_listener(deny)
    thread = await runtime.start_thread()
    blocks = await roder_ext_skills.SkillsContext(extension.catalog).load_context(
        ContextQuery(thread_id=thread.id, cwd=project, prompt="")
    )
    assert "- pdf-tools: Extract text and tables from PDF files." in blocks[0].text
    assert "- changelog: Write changelog entries" in blocks[0].text
    await runtime.run_turn(thread.id, "convert the pdf")
    results = items(runtime, thread.id, ToolResultItem)
    loaded = next(r for r in results if r.name == "skill")
    assert "Run `pdftotext file.pdf -`" in loaded.text
    assert str(project) in loaded.text
    # sleep is not in the skill's allowed-tools: it asked (and was denied) both before and after
    assert asked == ["before", "after"]


async def test_skill_allowed_tools_preapprove_matching_calls(project: Path) -> None:
    write(
        project / ".roder/skills/napper/SKILL.md",
        """
        ---
        description: Takes naps.
        allowed-tools: Sleep
        ---
        Nap.
    """,
    )
    host = host_for(project, trusted=True)
    runtime = runtime_with(
        host,
        [roder_ext_skills.create(host)],
        [
            {"tool_calls": [call("sleep", seconds=0, label="nap")]},
            {"text": "rested"},
            {"tool_calls": [call("sleep", seconds=0, label="later")]},
            {"text": "x"},
        ],
        mode="ask",
        interactive=True,
    )
    asked: list[str] = []
    runtime.bus.add_listener(
        lambda ev: (
            (
                asked.append(ev.request.arguments["label"]),
                runtime.resolve_approval(ev.request.approval_id, ApprovalDecision(decision="deny")),
            )
            if isinstance(ev, ApprovalRequested)
            else None
        )
    )
    thread = await runtime.start_thread()
    registry = CommandRegistry.for_runtime(runtime)
    await registry.run(runtime, thread.id, "napper", "now")  # /napper: the skill is active this turn
    await runtime.wait_turn(thread.id)
    assert asked == []
    assert items(runtime, thread.id, ToolResultItem)[0].text == "slept nap"
    await runtime.run_turn(thread.id, "sleep again")  # a new turn: no longer active, so it asks
    assert asked == ["later"]


def test_skills_ignored_while_untrusted(project: Path) -> None:
    extension = roder_ext_skills.create(host_for(project, trusted=False))
    assert extension.catalog.skills == {}
