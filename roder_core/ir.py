"""Canonical intermediate representation shared by every part of Roder.

Everything that is persisted to a thread file or sent to a client is one of these pydantic
types. Engines translate wire dialects into ``InferenceEvent`` values; the runtime folds them into
``Item`` values inside ``Turn`` values inside a ``Thread``. Field names are snake_case in Python and
camelCase on the wire (``threadId``), so app-server projection is a dump, not a translation.
"""

# Annotations here are objects, not strings (no ``from __future__ import annotations``): pydantic
# would otherwise compile every field's annotation string again when it builds the models, a
# cost every start-up pays (tests/test_startup_imports.py names the modules kept so).

import time
import uuid
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from roder_core.modes import Mode as Mode  # apart, so the command line names the modes without pydantic

# --------------------------------------------------------------------------- states
# Each state is defined once, here; the values are the wire strings (seed 004), and a StrEnum
# member equals its string, so stored threads and clients' JSON read back unchanged.


class ThreadStatus(StrEnum):
    IDLE = "idle"
    ACTIVE = "active"
    WAITING_APPROVAL = "waitingApproval"
    ERROR = "error"


class TurnStatus(StrEnum):
    IN_PROGRESS = "inProgress"
    COMPLETED = "completed"
    INTERRUPTED = "interrupted"
    FAILED = "failed"


class ItemStatus(StrEnum):
    """The status of an item that runs (a command execution)."""

    IN_PROGRESS = "inProgress"
    COMPLETED = "completed"
    FAILED = "failed"
    DECLINED = "declined"


class StepStatus(StrEnum):
    """The status of one step of a plan or task list."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"


class IRModel(BaseModel):
    """Base for IR types: camelCase aliases on the wire, snake_case in Python, extras ignored.

    Extras are ignored (not forbidden) so that files written by a newer Roder still load.
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", defer_build=True)

    def wire(self) -> dict[str, Any]:
        """The JSON-ready dict used on disk and on the wire (camelCase, no None noise)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


def empty_list() -> list[Any]:
    """The default factory of list fields: ``Field(default_factory=empty_list)``, not
    ``default_factory=list``. Pydantic reads a default factory's signature when it builds a model,
    and a builtin's comes from its text signature, which ``inspect`` tokenizes: the first one
    compiles ``tokenize``'s patterns (about 15 ms), each later one parses again. A function's
    signature is read directly (``tests/test_startup_imports.py`` checks every model)."""
    return []


def new_id(prefix: str) -> str:
    """Short, sortable-enough unique ids; the prefix says what kind of object it names."""
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


def now() -> float:
    return time.time()


# --------------------------------------------------------------------------- usage


class Usage(IRModel):
    """Token accounting as reported by the provider (or estimated when it says nothing).

    ``input_tokens`` is the whole prompt, cached parts included (engines add Anthropic's
    separately reported cache reads and writes); ``reasoning_tokens`` are part of ``output_tokens``.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float = 0.0
    estimated: bool = False

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
            estimated=self.estimated or other.estimated,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


# --------------------------------------------------------------------------- items


class Attachment(IRModel):
    """A file or image attached to a user message or a tool result.

    Binary data (images, audio) is kept in the thread's media store and referenced by
    ``media_id`` (its SHA-256), so the thread file stays small and resume or fork find the same
    bytes; ``data_base64`` is the inline form clients and tools hand in before it is stored."""

    name: str
    mime_type: str = "text/plain"
    text: str | None = None
    data_base64: str | None = None
    path: str | None = None
    media_id: str | None = None
    size: int | None = None
    width: int | None = None
    height: int | None = None

    @property
    def is_image(self) -> bool:
        return self.mime_type.startswith("image/") and (self.data_base64 is not None or self.media_id is not None)


MediaKind = Literal["image", "audio", "video", "file"]


class MediaArtifact(IRModel):
    """One stored media item of a thread (``media/list``): content-addressed by its SHA-256."""

    id: str
    thread_id: str
    name: str
    mime_type: str
    kind: MediaKind = "image"
    size: int
    width: int | None = None
    height: int | None = None
    #: Who produced it: "user" (attached to a prompt), "clipboard", or "tool:<name>".
    source: str = "user"
    created_at: float = Field(default_factory=lambda: time.time())
    #: Waiting for the thread's next turn (``media/attachToTurn``); False once a turn took it.
    pending: bool = False

    def attachment(self) -> Attachment:
        """The reference a message or tool result carries for this item."""
        return Attachment(
            name=self.name, mime_type=self.mime_type, media_id=self.id, size=self.size, width=self.width, height=self.height
        )


class ItemBase(IRModel):
    """Base of the thread's items. Unlike the other IR models they build with their class: every
    turn, thread and item event holds the union of them, and a container built before its items
    would generate all of them again (four times in a one-shot: ``Thread``, ``Turn``,
    ``ItemStarted``, ``ItemCompleted``) where a built item's schema is reused."""

    model_config = ConfigDict(defer_build=False)

    id: str = Field(default_factory=lambda: new_id("item"))


class UserMessageItem(ItemBase):
    type: Literal["userMessage"] = "userMessage"
    text: str
    attachments: list[Attachment] = Field(default_factory=empty_list)
    steer: bool = False
    #: Who sent it when the user did not type it (e.g. ``team "x"`` for what an agent team
    #: delivers: the lead's briefing, members' reports). Clients show such a message as what it
    #: is, not as the user's prompt, and it never titles a thread.
    sender: str = ""
    #: What changes between turns (environment, recalled memories), computed when the turn began
    #: and sent to the model before ``text`` in this message, the same bytes on every later request
    #: (see ContextBlock.placement). Clients show ``text``.
    context: str = ""


class AgentMessageItem(ItemBase):
    type: Literal["agentMessage"] = "agentMessage"
    text: str = ""


class ReasoningItem(ItemBase):
    """Model reasoning. ``provider_data`` keeps opaque blobs (signatures, encrypted content) so
    the engine can send the reasoning back faithfully on the next request."""

    type: Literal["reasoning"] = "reasoning"
    text: str = ""
    summary: str = ""
    provider_data: dict[str, Any] | None = None


class ToolCallItem(ItemBase):
    type: Literal["toolCall"] = "toolCall"
    call_id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    provider_data: dict[str, Any] | None = None


class ToolResultItem(ItemBase):
    type: Literal["toolResult"] = "toolResult"
    call_id: str
    name: str
    text: str
    data: Any = None
    is_error: bool = False
    attachments: list[Attachment] = Field(default_factory=empty_list)
    duration_ms: int | None = None


class CommandExecutionItem(ItemBase):
    """Rich view of shell work, for clients; the model sees the matching toolResult."""

    type: Literal["commandExecution"] = "commandExecution"
    call_id: str | None = None
    command: str
    cwd: str
    exit_code: int | None = None
    output: str = ""
    duration_ms: int | None = None
    timed_out: bool = False
    status: ItemStatus = ItemStatus.COMPLETED


class FileChange(IRModel):
    path: str
    kind: Literal["add", "delete", "update", "move"]
    diff: str = ""
    move_path: str | None = None


class FileChangeItem(ItemBase):
    type: Literal["fileChange"] = "fileChange"
    call_id: str | None = None
    changes: list[FileChange] = Field(default_factory=empty_list)


class PlanStep(IRModel):
    text: str
    status: StepStatus = StepStatus.PENDING


class PlanItem(ItemBase):
    type: Literal["plan"] = "plan"
    text: str = ""
    steps: list[PlanStep] = Field(default_factory=empty_list)


class CompactionItem(ItemBase):
    """A summary that stands in for older turns when the context is assembled. The turns it
    replaces stay on disk and visible; only the model's view is shortened."""

    type: Literal["compaction"] = "compaction"
    summary: str
    first_kept_item_id: str | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    #: Files the summarized part of the conversation read or changed (cumulative over compactions).
    files_read: list[str] = Field(default_factory=empty_list)
    files_modified: list[str] = Field(default_factory=empty_list)


class ApprovalOption(IRModel):
    id: Literal["allow_once", "allow_session", "allow_always", "deny", "deny_interrupt"]
    label: str
    rule: str | None = None


class ApprovalRequest(IRModel):
    approval_id: str = Field(default_factory=lambda: new_id("appr"))
    thread_id: str
    turn_id: str
    call_id: str
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    reason: str = ""
    command: str | None = None
    cwd: str | None = None
    diff: str | None = None
    options: list[ApprovalOption] = Field(default_factory=empty_list)
    #: Who asks, when it is not the thread's own user-driven agent: a team member's name.
    agent: str | None = None


#: The plan-mode tool whose approval request is a plan review (``policy.plan_review``).
PLAN_TOOL = "exit_plan"

ApprovalDecisionKind = Literal["allow_once", "allow_session", "allow_always", "deny", "deny_interrupt"]


class ApprovalDecision(IRModel):
    decision: ApprovalDecisionKind
    rule: str | None = None
    reason: str = ""

    @property
    def allowed(self) -> bool:
        return self.decision.startswith("allow")


class ApprovalItem(ItemBase):
    type: Literal["approval"] = "approval"
    request: ApprovalRequest
    decision: ApprovalDecision | None = None


class ErrorItem(ItemBase):
    type: Literal["error"] = "error"
    message: str
    kind: str = "runtime"
    retryable: bool = False


#: ``ErrorItem.kind`` of the item that ends an interrupted turn.
INTERRUPTED_KIND = "interrupted"


def interrupted_item(turn_id: str) -> ErrorItem:
    """The item an interrupted turn ends with. It is stored, so the model's next call learns the
    answer before it was cut off (as the peers tell theirs), and its id is the turn's, so a client
    that draws the same marker from the turn's status (threads stored before it existed) shows one."""
    return ErrorItem(id=f"{INTERRUPTED_KIND}-{turn_id}", kind=INTERRUPTED_KIND, message="interrupted by the user")


class CustomItem(ItemBase):
    """Extension state kept in the thread and never sent to the model."""

    type: Literal["custom"] = "custom"
    namespace: str
    version: int = 1
    data: Any = None


Item = Annotated[
    UserMessageItem
    | AgentMessageItem
    | ReasoningItem
    | ToolCallItem
    | ToolResultItem
    | CommandExecutionItem
    | FileChangeItem
    | PlanItem
    | CompactionItem
    | ApprovalItem
    | ErrorItem
    | CustomItem,
    Field(discriminator="type"),
]


# --------------------------------------------------------------------------- turns, threads


class TurnError(IRModel):
    message: str
    kind: str = "runtime"


class Turn(IRModel):
    id: str = Field(default_factory=lambda: new_id("turn"))
    status: TurnStatus = TurnStatus.IN_PROGRESS
    items: list[Item] = Field(default_factory=empty_list)
    usage: Usage = Field(default_factory=Usage)
    error: TurnError | None = None
    started_at: float = Field(default_factory=now)
    completed_at: float | None = None
    stop_reason: str | None = None
    model_calls: int = 0


class ParentRef(IRModel):
    thread_id: str
    turn_id: str | None = None


class ThreadHeader(IRModel):
    """What identifies a thread; the first line of its JSONL file."""

    id: str = Field(default_factory=lambda: new_id("thr"))
    cwd: str
    created_at: float = Field(default_factory=now)
    title: str = ""
    provider: str = ""
    model: str = ""
    parent: ParentRef | None = None
    format_version: int = 1


class Thread(ThreadHeader):
    updated_at: float = Field(default_factory=now)
    status: ThreadStatus = ThreadStatus.IDLE
    mode: Mode = Mode.ASK
    turns: list[Turn] = Field(default_factory=empty_list)
    usage: Usage = Field(default_factory=Usage)
    #: Extension state by namespace (latest entry wins); see ``Runtime.save_custom``.
    custom: dict[str, CustomItem] = Field(default_factory=dict)

    def header(self) -> ThreadHeader:
        return ThreadHeader.model_validate(self.model_dump(include=set(ThreadHeader.model_fields)))

    def items(self) -> list[Item]:
        return [item for turn in self.turns for item in turn.items]


class ThreadSummary(IRModel):
    """Listing row: enough to show a thread without loading it."""

    id: str
    cwd: str
    title: str = ""
    created_at: float
    updated_at: float
    provider: str = ""
    model: str = ""
    parent: ParentRef | None = None
    turn_count: int = 0
    status: str = "idle"


# --------------------------------------------------------------------------- inference IR


class TextPart(IRModel):
    type: Literal["text"] = "text"
    text: str


class ImagePart(IRModel):
    type: Literal["image"] = "image"
    mime_type: str
    data_base64: str


class ReasoningPart(IRModel):
    type: Literal["reasoning"] = "reasoning"
    text: str = ""
    summary: str = ""
    provider_data: dict[str, Any] | None = None


class ToolCallPart(IRModel):
    type: Literal["tool_call"] = "tool_call"
    call_id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    provider_data: dict[str, Any] | None = None


class ToolResultPart(IRModel):
    type: Literal["tool_result"] = "tool_result"
    call_id: str
    name: str
    text: str
    is_error: bool = False
    images: list[ImagePart] = Field(default_factory=empty_list)


Part = Annotated[TextPart | ImagePart | ReasoningPart | ToolCallPart | ToolResultPart, Field(discriminator="type")]


class Message(IRModel):
    """A provider-neutral chat message. Tool results travel in ``role="tool"`` messages; each
    engine re-encodes them in its own dialect (function_call_output, tool role, tool_result)."""

    role: Literal["user", "assistant", "tool"]
    parts: list[Part] = Field(default_factory=empty_list)

    def text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))


class ToolSpec(IRModel):
    name: str
    description: str
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ModelProfile(IRModel):
    """What the runtime needs to know about a model: budget, features and price per Mtok."""

    id: str
    provider: str = ""
    context_window: int = 128_000
    max_output_tokens: int = 16_384
    reasoning: bool = False
    parallel_tools: bool = True
    images: bool = False
    input_price: float = 0.0
    output_price: float = 0.0
    cache_read_price: float = 0.0
    cache_write_price: float = 0.0
    #: How the model is asked to think (Anthropic): "adaptive" (the model decides, effort sent as
    #: ``output_config.effort``), "budget" (``budget_tokens``), or "" (budget when ``reasoning``).
    thinking: Literal["", "adaptive", "budget"] = ""
    #: The budget form thinks between tool calls only with the interleaved-thinking beta header.
    interleaved_thinking: bool = False

    def cost(self, usage: Usage) -> float:
        # input_tokens counts the whole prompt; cache reads and writes have their own prices.
        fresh_input = max(usage.input_tokens - usage.cached_input_tokens - usage.cache_write_tokens, 0)
        return (
            fresh_input * self.input_price
            + usage.cached_input_tokens * self.cache_read_price
            + usage.cache_write_tokens * self.cache_write_price
            + usage.output_tokens * self.output_price
        ) / 1_000_000


class AgentInferenceRequest(IRModel):
    """The canonical request an engine receives for one model call."""

    model: str
    system: str = ""
    messages: list[Message] = Field(default_factory=empty_list)
    tools: list[ToolSpec] = Field(default_factory=empty_list)
    max_output_tokens: int | None = None
    reasoning_effort: str | None = None
    temperature: float | None = None
    parallel_tool_calls: bool = True
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: Index of the first message of the running turn: planners keep it and what follows verbatim
    #: (0 when the whole conversation is to be kept: automatic compaction will make room).
    turn_start: int = 0
    #: Stable per thread: lets a provider route requests sharing a prefix to the same cache
    #: (Responses ``prompt_cache_key``).
    cache_key: str | None = None
    #: Ask for the sampled tokens' log probabilities with this many alternatives each (0: the
    #: sampled token only; None: do not ask). Dialects that cannot return them ignore it.
    logprobs: int | None = None
    #: Ask for the prompt's and the answer's token ids (vLLM's ``return_token_ids``); servers
    #: and dialects without them ignore it.
    token_ids: bool = False


class MessageDelta(IRModel):
    type: Literal["message_delta"] = "message_delta"
    text: str


class ReasoningDelta(IRModel):
    """A reasoning fragment. ``summary`` marks summary text (Responses API) rather than raw
    thinking; ``provider_data`` is merged into the reasoning item for faithful re-encoding."""

    type: Literal["reasoning_delta"] = "reasoning_delta"
    text: str = ""
    summary: bool = False
    provider_data: dict[str, Any] | None = None


class ToolCallEvent(IRModel):
    """A complete tool call. ``arguments_error`` is set when the model sent unparsable JSON; the
    runtime then answers the call with an error result instead of running it."""

    type: Literal["tool_call"] = "tool_call"
    call_id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    arguments_error: str | None = None
    #: The response hit its output limit while this call was being written: never run it.
    truncated: bool = False
    provider_data: dict[str, Any] | None = None


class UsageEvent(IRModel):
    type: Literal["usage"] = "usage"
    usage: Usage


class LogprobsEvent(IRModel):
    """Log probabilities of sampled output tokens, in order: ``{"token", "logprob", "bytes"?,
    "top_logprobs"?: [{"token", "logprob"}]}`` each (and ``"id"`` where the server gives ids)."""

    type: Literal["logprobs"] = "logprobs"
    tokens: list[dict[str, Any]] = Field(default_factory=empty_list)


class TokenIdsEvent(IRModel):
    """Token ids the server returned: the whole prompt's (once per call) and the answer's, in
    order, as they arrive."""

    type: Literal["token_ids"] = "token_ids"
    prompt: list[int] | None = None
    completion: list[int] = Field(default_factory=empty_list)


class ProviderMetadataEvent(IRModel):
    type: Literal["provider_metadata"] = "provider_metadata"
    data: dict[str, Any] = Field(default_factory=dict)


StopReason = Literal["end_turn", "tool_use", "max_tokens", "refusal", "cancelled", "error", "other"]


class CompletedEvent(IRModel):
    type: Literal["completed"] = "completed"
    stop_reason: StopReason = "end_turn"


class InferenceErrorEvent(IRModel):
    type: Literal["error"] = "error"
    message: str
    kind: str = "provider"
    retryable: bool = False


class StreamRestartEvent(IRModel):
    """The engine re-sent this model call after its stream broke, and the new answer differs
    from what was already streamed: everything this model call produced so far is void."""

    type: Literal["restart"] = "restart"
    reason: str = ""


InferenceEvent = Annotated[
    MessageDelta
    | ReasoningDelta
    | ToolCallEvent
    | UsageEvent
    | LogprobsEvent
    | TokenIdsEvent
    | ProviderMetadataEvent
    | CompletedEvent
    | InferenceErrorEvent
    | StreamRestartEvent,
    Field(discriminator="type"),
]
