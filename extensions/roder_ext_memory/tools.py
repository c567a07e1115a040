"""The memory tools the agent calls: ``memory_save`` and ``memory_search``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from roder_core.errors import RoderError
from roder_core.ir import empty_list
from roder_core.kernel.tool_args import NonBlank, ToolArguments, parse_arguments
from roder_core.kernel.tools import PolicySubject, Tool, ToolCall, ToolExecutionContext, ToolRegistry, ToolResult

from .store import MAX_TEXT_CHARS, SqliteMemoryStore


def _redact(ctx: ToolExecutionContext, text: str) -> str:
    """Secrets the runtime knows never reach the memory file."""
    return ctx.host.redact(text) if ctx.host is not None else text


class MemorySaveArguments(ToolArguments):
    text: NonBlank = Field(description=f"the note (at most {MAX_TEXT_CHARS} characters)")
    scope: Literal["project", "global"] = Field("project", description="default: project")
    tags: list[str] = Field(default_factory=empty_list, description="optional keywords")


class MemorySearchArguments(ToolArguments):
    query: str = Field(description="keywords to look for")
    limit: int = Field(5, ge=1, le=50, description="default: 5")


class MemorySave(Tool):
    name = "memory_save"
    description = (
        "Remember a fact for future sessions: a user preference, a project convention, a command "
        "that works, a decision and its reason. Keep it short and self-contained. scope 'project' "
        "(default) keeps it for this project, 'global' for every project."
    )
    arguments_model = MemorySaveArguments
    kind = "edit"

    def __init__(self, store: SqliteMemoryStore) -> None:
        self.store = store

    def policy_subjects(self, arguments: dict[str, Any], workspace: Path) -> list[PolicySubject]:
        """Rules name the scope: ``memory_save(global)``, ``memory_save(project)``."""
        return [PolicySubject(tool=self.name, value=str(arguments.get("scope") or "project"), writes=True)]

    def beyond_workspace(self, arguments: dict[str, Any]) -> str | None:
        """A global note is recalled in every project, so auto-edit asks before saving one
        (planted instructions must not travel to unrelated repositories unseen)."""
        if (arguments.get("scope") or "project") == "global":
            return "memory_save with scope 'global' stores a note every project will recall"
        return None

    async def execute(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        args = parse_arguments(MemorySaveArguments, call)
        scope = args.scope
        try:
            memory_id = await self.store.save(_redact(ctx, args.text), scope, args.tags, project=str(ctx.workspace))
        except RoderError as exc:
            return ToolResult.error(call, str(exc))
        return ToolResult(
            id=call.id, name=call.name, text=f"saved memory {memory_id} ({scope} scope)", data={"id": memory_id, "scope": scope}
        )


class MemorySearch(Tool):
    name = "memory_search"
    description = "Search the notes saved with memory_save (this project's and the global ones) by keywords; best matches first."
    arguments_model = MemorySearchArguments
    kind = "search"
    read_only = True

    def __init__(self, store: SqliteMemoryStore) -> None:
        self.store = store

    async def execute(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        args = parse_arguments(MemorySearchArguments, call)
        found = await self.store.search(args.query, args.limit, project=str(ctx.workspace))
        if not found:
            return ToolResult(id=call.id, name=call.name, text="no matching memories", data={"memories": []})
        lines = [f"- [{m.id}, {m.scope}{', ' + ' '.join(m.tags) if m.tags else ''}] {m.text}" for m in found]
        return ToolResult(id=call.id, name=call.name, text="\n".join(lines), data={"memories": [m.to_json() for m in found]})

    def mutated_paths(self, arguments: dict[str, Any], workspace: Path) -> list[str]:
        return []


class MemoryToolContributor:
    def __init__(self, store: SqliteMemoryStore) -> None:
        self.store = store

    def id(self) -> str:
        return "memory-tools"

    def contribute(self, registry: ToolRegistry) -> None:
        registry.register(MemorySave(self.store))
        registry.register(MemorySearch(self.store))
