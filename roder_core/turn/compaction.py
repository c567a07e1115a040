"""Compaction: older turns summarized by the thread's own model, recent ones kept verbatim.

Three ways in: automatically before a model call whose planned request is still over budget
(``[context] auto_compact``), once after a provider's context-overflow error (then the call is
retried), and on demand (``/compact [instructions]`` -> ``Runtime.compact``, a turn of its own).
The cut keeps the most recent ``keep_recent_tokens`` verbatim, never separates a tool call from
its result and never splits an assistant message. The summary has the sections Goal,
Constraints, Progress, Decisions and Next steps, followed by the files read and modified (from
the tool calls themselves, not from the model's memory). A ``compaction`` hook may write the
summary instead of the model. The raw items stay in the thread; a ``compaction`` item records the
summary and where the kept part begins, which is all the context assembler needs.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from roder_core.errors import RoderError
from roder_core.ir import (
    AgentInferenceRequest,
    AgentMessageItem,
    CompactionItem,
    ErrorItem,
    FileChangeItem,
    Item,
    Message,
    ModelProfile,
    ReasoningItem,
    TextPart,
    ToolCallItem,
    ToolResultItem,
    Turn,
    Usage,
    UserMessageItem,
)
from roder_core.kernel.hook_payloads import CompactionPayload
from roder_core.kernel.services import HookPoint
from roder_core.turn.context import visible_items
from roder_core.turn.planner import prompt_budget
from roder_core.turn.tokens import CHARS_PER_TOKEN, item_tokens, request_tokens

if TYPE_CHECKING:
    from roder_core.ir import Thread
    from roder_core.settings.config import ContextConfig
    from roder_core.turn.hooks import HookRunner

log = logging.getLogger(__name__)

#: Automatic compactions allowed in one turn (a summary that does not shrink enough must not loop).
MAX_AUTO_PER_TURN = 2
#: An automatic compaction keeps at most this fraction (1/N) of the prompt budget verbatim.
KEEP_SHARE = 8
#: Room left in the summarizer's own window for its instructions and its answer.
SUMMARY_OUTPUT_TOKENS = 4_096

SUMMARY_SYSTEM = """You compact the history of a coding session between a user and an AI coding agent. \
The agent will continue the work with only your summary plus the most recent messages, so \
anything you leave out is forgotten.

Write a concise, complete handoff in Markdown with exactly these sections:

## Goal
What the user wants overall. Quote exact requirements, names and numbers.
## Constraints
Requirements, preferences and limits the user stated or the work revealed (tests, style, things not to do).
## Progress
What has been done and the state it is in: what works, what fails and why.
## Decisions
Choices made and their reasons, including approaches tried and rejected.
## Next steps
What remains, most urgent first.

Keep file paths, function names, commands, error messages and numbers exact. Never invent \
anything that is not in the transcript. Add no other sections."""

READ_TOOLS = frozenset({"read", "read_file", "view"})
WRITE_TOOLS = frozenset({"write", "edit", "multi_edit", "multiedit", "write_file", "edit_file", "str_replace"})
PATCH_TOOLS = frozenset({"apply_patch", "patch"})
PATH_KEYS = ("path", "file_path", "file", "filename")
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$|^\*\*\* Move to: (.+)$", re.MULTILINE)


# --------------------------------------------------------------------------- where to cut


@dataclass
class CompactionPlan:
    previous: CompactionItem | None
    summarize: list[Item]
    keep: list[Item]
    tokens_before: int


def _assistant(item: Item) -> bool:
    return isinstance(item, AgentMessageItem | ReasoningItem | ToolCallItem)


def safe_cut_points(items: Sequence[Item]) -> list[int]:
    """Indexes where the kept part may begin: no tool call before it waits for a result after
    it, and it starts a message (a user message, or assistant output right after a non-assistant
    item) so one assistant message is never split from its reasoning."""
    points: list[int] = []
    open_calls: set[str] = set()
    previous_visible: Item | None = None
    for index, item in enumerate(items):
        if isinstance(item, UserMessageItem) and not item.steer:
            open_calls.clear()  # calls a past turn never answered are closed by the assistant
        starts_message = isinstance(item, UserMessageItem) or (
            _assistant(item) and (previous_visible is None or not _assistant(previous_visible))
        )
        if index > 0 and not open_calls and starts_message:
            points.append(index)
        if isinstance(item, ToolCallItem):
            open_calls.add(item.call_id)
        elif isinstance(item, ToolResultItem):
            open_calls.discard(item.call_id)
        if item_tokens(item):
            previous_visible = item
    return points


def choose_cut(items: Sequence[Item], keep_tokens: int) -> int | None:
    """The safe cut keeping at least ``keep_tokens`` of recent items (fewer only when no
    earlier cut exists); None when nothing can be summarized."""
    points = safe_cut_points(items)
    if not points:
        return None
    kept = 0
    target = 0
    for index in range(len(items) - 1, -1, -1):
        kept += item_tokens(items[index])
        if kept >= keep_tokens:
            target = index
            break
    earlier = [p for p in points if p <= target]
    if earlier:
        return earlier[-1]
    later = [p for p in points if p > target]
    return later[0] if later else None


def plan_compaction(items: Sequence[Item], keep_tokens: int) -> CompactionPlan | None:
    visible = visible_items(items)
    previous = visible[0] if visible and isinstance(visible[0], CompactionItem) else None
    body = visible[1:] if previous is not None else visible
    cut = choose_cut(body, keep_tokens)
    if cut is None or not any(item_tokens(i) for i in body[:cut]):
        return None
    return CompactionPlan(previous, list(body[:cut]), list(body[cut:]), sum(item_tokens(i) for i in visible))


# --------------------------------------------------------------------------- what to say


def _path_of(arguments: dict[str, Any]) -> str | None:
    for key in PATH_KEYS:
        value = arguments.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def files_touched(items: Sequence[Item]) -> tuple[list[str], list[str]]:
    """Files read and files modified, in first-seen order, from the tool calls and file changes."""
    read: dict[str, None] = {}
    modified: dict[str, None] = {}
    for item in items:
        if isinstance(item, ToolCallItem):
            name = item.name.lower()
            path = _path_of(item.arguments)
            if name in READ_TOOLS and path:
                read[path] = None
            elif name in WRITE_TOOLS and path:
                modified[path] = None
            elif name in PATCH_TOOLS:
                patch = next((v for v in item.arguments.values() if isinstance(v, str) and "*** " in v), "")
                for match in _PATCH_FILE.finditer(patch):
                    modified[(match.group(1) or match.group(2)).strip()] = None
        elif isinstance(item, FileChangeItem):
            for change in item.changes:
                modified[change.path] = None
                if change.move_path:
                    modified[change.move_path] = None
    return list(read), list(modified)


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = max(limit // 2, 1)
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters omitted ...]\n{text[-half:]}"


def _render(item: Item, cap: int) -> str | None:
    if isinstance(item, UserMessageItem):
        names = ", ".join(a.name for a in item.attachments)
        extra = f" (attached: {names})" if names else ""
        return f"[user{' (while the agent worked)' if item.steer else ''}]{extra}: {_clip(item.text, cap * 4)}"
    if isinstance(item, AgentMessageItem):
        return f"[assistant]: {_clip(item.text, cap * 4)}" if item.text else None
    if isinstance(item, ReasoningItem):
        thought = item.summary or item.text
        return f"[assistant thinking]: {_clip(thought, cap)}" if thought else None
    if isinstance(item, ToolCallItem):
        arguments = json.dumps(item.arguments, ensure_ascii=False)
        return f"[tool call {item.name}]: {_clip(arguments, cap)}"
    if isinstance(item, ToolResultItem):
        return f"[tool result {item.name}{' (error)' if item.is_error else ''}]: {_clip(item.text, cap)}"
    if isinstance(item, ErrorItem):
        return f"[error]: {item.message}"
    return None


def render_transcript(items: Sequence[Item], limit_chars: int) -> str:
    """The items as plain text within ``limit_chars``: tool outputs are clipped harder until it
    fits, and as a last resort the oldest part is left out (recent work matters most)."""
    text = ""
    for cap in (2_000, 600, 200):
        text = "\n\n".join(line for item in items if (line := _render(item, cap)) is not None)
        if len(text) <= limit_chars:
            return text
    return "[... the oldest part of the conversation is omitted ...]\n" + text[-limit_chars:]


def compose_summary(body: str, read: list[str], modified: list[str], current_request: str | None) -> str:
    parts = [body.strip() or "(the model returned an empty summary)"]
    if read:
        parts.append("## Files read\n" + "\n".join(f"- {p}" for p in read))
    if modified:
        parts.append("## Files modified\n" + "\n".join(f"- {p}" for p in modified))
    if current_request:
        parts.append("## Current request (verbatim)\n" + current_request)
    return "\n\n".join(parts)


def _merge(first: list[str], second: list[str]) -> list[str]:
    return list(dict.fromkeys([*first, *second]))


# --------------------------------------------------------------------------- who writes it


class ModelCaller(Protocol):
    """One way to ask the thread's model (``TurnRunner`` provides it): all compaction needs of
    the inference side, so it never needs the runtime, an engine or the turn loop."""

    def model_profile(self) -> ModelProfile: ...

    async def ask_model(self, request: AgentInferenceRequest, profile: ModelProfile, *, finish: bool = False) -> str:
        """The answer's text, with its usage accounted to the turn; ``finish``: the request gets
        the defaults and hooks the turn's own requests get (so it extends the cached prefix)."""
        ...


class CompactionTurn(Protocol):
    """The running turn as compaction sees it (``TurnRunner`` provides it): where the item goes,
    the hooks that may write the summary, and the settings."""

    @property
    def thread(self) -> Thread: ...

    @property
    def turn(self) -> Turn: ...

    @property
    def tid(self) -> str: ...

    @property
    def hooks(self) -> HookRunner: ...

    @property
    def context_settings(self) -> ContextConfig: ...

    async def record(self, item: Item) -> None: ...

    async def complete_history(self) -> None:
        """Load the thread's older turns if it was resumed from its recent ones only."""
        ...


async def summarize(
    runner: CompactionTurn,
    model: ModelCaller,
    plan: CompactionPlan,
    instructions: str | None,
    files: tuple[list[str], list[str]],
    cached: AgentInferenceRequest | None = None,
) -> str:
    """The summary body: a compaction hook's, else the thread's own model's. ``cached``: the
    request the turn was about to send; when the summary request fits the window as that
    request plus one more user message, it is sent that way, so the provider serves the whole
    conversation from its prompt cache instead of reading a fresh transcript."""
    previous = plan.previous.summary if plan.previous is not None else ""
    if runner.hooks.has(HookPoint.COMPACTION):
        payload = await runner.hooks.run(
            HookPoint.COMPACTION,
            CompactionPayload(
                thread_id=runner.tid,
                turn_id=runner.turn.id,
                items=[i.wire() for i in plan.summarize],
                previous_summary=previous,
                instructions=instructions,
                files_read=files[0],
                files_modified=files[1],
            ),
        )
        if payload.summary is not None and payload.summary.strip():
            return payload.summary
    profile = model.model_profile()
    if cached is not None:
        body = await _summarize_in_place(model, profile, cached, previous, instructions)
        if body.strip():
            return body
    room = prompt_budget(profile, SUMMARY_OUTPUT_TOKENS) - 1_000
    transcript = render_transcript(plan.summarize, max(room, 1_000) * CHARS_PER_TOKEN - len(previous))
    prompt = []
    if previous:
        prompt.append(f"Summary of the conversation before this part:\n\n{previous}")
    prompt.append(f"The conversation to summarize:\n\n<transcript>\n{transcript}\n</transcript>")
    if instructions:
        prompt.append(f"Additional instructions from the user for this summary: {instructions}")
    prompt.append("Write the summary now.")
    request = AgentInferenceRequest(
        model=profile.id,
        system=SUMMARY_SYSTEM,
        messages=[Message(role="user", parts=[TextPart(text="\n\n".join(prompt))])],
        max_output_tokens=min(profile.max_output_tokens, SUMMARY_OUTPUT_TOKENS),
        parallel_tool_calls=False,
    )
    return await model.ask_model(request, profile)


IN_PLACE_PROMPT = (
    "[roder: the conversation has reached the context window and will be compacted. Do not call any "
    "tool and do not continue the task now: reply only with a handoff summary of everything above "
    "(the most recent messages will also be kept verbatim after it).]\n\n"
)


async def _summarize_in_place(
    model: ModelCaller,
    profile: ModelProfile,
    cached: AgentInferenceRequest,
    previous: str,
    instructions: str | None,
) -> str:
    """The summary asked as the next message of the cached conversation; "" when that request
    would not fit the window (the caller then sends the transcript form)."""
    prompt = IN_PLACE_PROMPT + SUMMARY_SYSTEM
    if instructions:
        prompt += f"\n\nAdditional instructions from the user for this summary: {instructions}"
    request = cached.model_copy(
        update={
            "messages": [*cached.messages, Message(role="user", parts=[TextPart(text=prompt)])],
            "max_output_tokens": min(profile.max_output_tokens, SUMMARY_OUTPUT_TOKENS),
        }
    )
    if request_tokens(request) + SUMMARY_OUTPUT_TOKENS > profile.context_window:
        return ""
    return await model.ask_model(request, profile, finish=True)


# --------------------------------------------------------------------------- in the turn loop


class Compactor:
    """Compaction for one turn: decides when, runs it and records the item."""

    def __init__(self, runner: CompactionTurn, model: ModelCaller) -> None:
        self.runner = runner
        self.model = model
        self.settings = runner.context_settings
        self.auto_runs = 0
        self.overflow_retried = False
        #: Provider-reported prompt tokens / our estimate for the same request (calibrates the
        #: estimate when the provider counts differently).
        self.ratio = 1.0
        self._last_estimate = 0

    def sending(self, request: AgentInferenceRequest) -> None:
        """``request`` is the one sent next: ``observe`` compares the provider's count with its estimate."""
        self._last_estimate = request_tokens(request)

    def observe(self, usage: Usage) -> None:
        """Learn from the provider's count for the request last sent."""
        if not usage.estimated and usage.input_tokens > 0 and self._last_estimate > 0:
            self.ratio = min(max(usage.input_tokens / self._last_estimate, 0.5), 3.0)

    def can_compact(self) -> bool:
        """Whether automatic compaction may still run in this turn. While it may, it (and not the
        planner's shortening of old tool outputs) makes room when the window fills: the runner
        asks for the request unshortened."""
        return self.settings.auto_compact and self.auto_runs < MAX_AUTO_PER_TURN

    def over_budget(self, request: AgentInferenceRequest, profile: ModelProfile) -> bool:
        """Whether ``request`` exceeds the prompt budget, counted as the provider counts."""
        return request_tokens(request) * self.ratio > prompt_budget(profile, self.settings.reserve_tokens)

    def would_compact(self, request: AgentInferenceRequest, profile: ModelProfile) -> bool:
        """Whether ``maybe_compact`` would compact before sending ``request``."""
        return self.can_compact() and self.over_budget(request, profile)

    async def maybe_compact(self, request: AgentInferenceRequest, profile: ModelProfile) -> bool:
        """Compact when the planned request is still over budget; True when it did."""
        if not self.would_compact(request, profile):
            return False
        self.auto_runs += 1
        try:
            item = await self.compact(keep_tokens=self.keep_tokens(profile), cached=request)
        except (RoderError, ValueError, OSError) as exc:
            log.warning("automatic compaction failed: %s", exc)
            await self.runner.record(ErrorItem(message=f"automatic compaction failed: {exc}", kind="compaction"))
            return False
        return item is not None

    def keep_tokens(self, profile: ModelProfile) -> int:
        """What an automatic compaction keeps verbatim: at most an eighth of the budget. Each
        compaction then frees most of the window, so they come rarely, and the part it rewrites
        (the summary and the kept messages start a new cached prefix) is small."""
        budget = prompt_budget(profile, self.settings.reserve_tokens)
        return min(self.settings.keep_recent_tokens, budget // KEEP_SHARE)

    async def after_overflow(self, profile: ModelProfile, *, smaller_window: bool = False) -> bool:
        """The provider said the prompt is too long: compact harder to fit ``profile``'s window,
        once per turn, and again whenever the window was just learned to be smaller."""
        if self.overflow_retried and not smaller_window:
            return False
        self.overflow_retried = True
        try:
            return await self.compact(keep_tokens=self.keep_tokens(profile)) is not None
        except (RoderError, ValueError, OSError) as exc:
            log.warning("compaction after a context overflow failed: %s", exc)
            return False

    async def compact(
        self, *, keep_tokens: int, instructions: str | None = None, cached: AgentInferenceRequest | None = None
    ) -> CompactionItem | None:
        runner = self.runner
        await runner.complete_history()  # the summary covers every turn since the last one
        plan = plan_compaction(runner.thread.items(), keep_tokens)
        if plan is None:
            return None
        read, modified = files_touched(plan.summarize)
        if plan.previous is not None:
            read = _merge(plan.previous.files_read, read)
            modified = _merge(plan.previous.files_modified, modified)
        body = await summarize(runner, self.model, plan, instructions, (read, modified), cached)
        first = runner.turn.items[0] if runner.turn.items else None
        current = first.text if isinstance(first, UserMessageItem) and any(i is first for i in plan.summarize) else None
        item = CompactionItem(
            summary=compose_summary(body, read, modified, current),
            first_kept_item_id=plan.keep[0].id if plan.keep else None,
            tokens_before=plan.tokens_before,
            files_read=read,
            files_modified=modified,
        )
        item.tokens_after = item_tokens(item) + sum(item_tokens(i) for i in plan.keep)
        await runner.record(item)
        return item


def manual_keep_tokens(items: Sequence[Item], keep_recent_tokens: int) -> int:
    """On demand, keep at most a quarter of what the model sees, so /compact always shrinks it."""
    visible = sum(item_tokens(i) for i in visible_items(items))
    return min(keep_recent_tokens, visible // 4)
