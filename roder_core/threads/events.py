"""Runtime events (core -> clients, persisted) and the in-process event bus.

Event ``method`` names are the app-server notification names of seed 004, so projecting an event
to a JSON-RPC notification is ``{"method": ev.method, "params": ev.params()}``. Deltas are
delivered live but never persisted one by one: the completed item carries the full text.
"""

# Annotations here are objects, not strings (no ``from __future__ import annotations``): pydantic
# would otherwise compile every field's annotation string again when it builds the models, a
# cost every start-up pays (tests/test_startup_imports.py names the modules kept so).

import asyncio
import contextlib
import functools
import logging
import re
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast, get_args

from pydantic import BaseModel, Field, GetCoreSchemaHandler, TypeAdapter, model_validator
from pydantic_core import CoreSchema

from roder_core.errors import retry_notice
from roder_core.ir import (
    PLAN_TOOL,
    ApprovalDecision,
    ApprovalRequest,
    CustomItem,
    IRModel,
    Item,
    MediaArtifact,
    Mode,
    ThreadHeader,
    ThreadStatus,
    Turn,
    Usage,
    UserMessageItem,
    empty_list,
    now,
)

log = logging.getLogger(__name__)


class LateModel:
    """A field's model, imported when the field's schema is first built rather than with this module.

    Plan-review and team events carry models of packages a run that never reviews a plan or forms a
    team does not otherwise load (``roder -p`` among them). The events build at first use
    (``defer_build``), so a field annotated ``Annotated[Any, LateModel(load)]`` costs nothing until
    such an event is validated, built or described: then ``load`` imports the model and the field
    validates, serializes and appears in JSON schemas exactly as the model named directly would.
    """

    def __init__(self, load: Callable[[], type[BaseModel]]) -> None:
        self._load = load

    def __get_pydantic_core_schema__(self, _source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return handler.generate_schema(self._load())


def _plan_review() -> type[BaseModel]:
    from roder_core.policy.plan_review import PlanReview

    return PlanReview


def _team() -> type[BaseModel]:
    from roder_core.teams.model import Team

    return Team


if TYPE_CHECKING:
    from roder_core.policy.plan_review import PlanReview
    from roder_core.teams.model import Team
else:  # the same types for pydantic, imported at first use (see LateModel)
    PlanReview = Annotated[Any, LateModel(_plan_review)]
    Team = Annotated[Any, LateModel(_team)]


class EventBase(IRModel):
    thread_id: str
    ts: float = Field(default_factory=now)

    #: False for high-frequency events the store must not write line by line.
    persisted: bool = Field(default=True, exclude=True)

    def params(self) -> dict[str, Any]:
        data = self.wire()
        data.pop("method", None)
        return data


class ThreadStarted(EventBase):
    method: Literal["thread/started"] = "thread/started"
    thread: ThreadHeader


class ThreadStatusChanged(EventBase):
    method: Literal["thread/status/changed"] = "thread/status/changed"
    status: ThreadStatus


class ThreadTitleChanged(EventBase):
    method: Literal["thread/title/changed"] = "thread/title/changed"
    title: str


class ThreadModelChanged(EventBase):
    """The thread continues with another provider/model (resume with --model, a model picker)."""

    method: Literal["thread/model/changed"] = "thread/model/changed"
    provider: str
    model: str
    #: The new model's context window as the host knows it (profile, config, learned limits), so
    #: a client shows it at once instead of waiting for the next turn's usage; None if unknown.
    context_window: int | None = None


class CustomEntrySaved(EventBase):
    """An extension saved its own typed state in the thread (never sent to the model)."""

    method: Literal["thread/custom/saved"] = "thread/custom/saved"
    entry: CustomItem


class TurnStarted(EventBase):
    method: Literal["turn/started"] = "turn/started"
    turn_id: str
    started_at: float = Field(default_factory=now)


class ItemStarted(EventBase):
    method: Literal["item/started"] = "item/started"
    turn_id: str
    item: Item


class AgentMessageDelta(EventBase):
    """Streamed model text or reasoning for an item in progress (never persisted)."""

    method: Literal["item/agentMessage/delta"] = "item/agentMessage/delta"
    turn_id: str
    item_id: str
    delta: str
    kind: Literal["text", "reasoning"] = "text"
    persisted: bool = Field(default=False, exclude=True)


class ToolOutputDelta(EventBase):
    """Live output of a running tool (bash), shown in its card; never persisted."""

    method: Literal["item/toolOutput/delta"] = "item/toolOutput/delta"
    turn_id: str
    call_id: str
    delta: str
    persisted: bool = Field(default=False, exclude=True)


class ToolCallStarted(EventBase):
    """A tool call passed policy (and approval) and its tool starts running; never persisted.
    Editors show the call as running from here (ACP ``in_progress``)."""

    method: Literal["item/toolCall/started"] = "item/toolCall/started"
    turn_id: str
    call_id: str
    name: str
    persisted: bool = Field(default=False, exclude=True)


class ItemUpdated(EventBase):
    """A snapshot of an item still streaming, saved now and then so that a crash keeps most of
    it. Clients that render deltas can ignore it; the reducer replaces the item with it."""

    method: Literal["item/updated"] = "item/updated"
    turn_id: str
    item: Item


class ItemCompleted(EventBase):
    method: Literal["item/completed"] = "item/completed"
    turn_id: str
    item: Item


class ApprovalRequested(EventBase):
    method: Literal["approval/requested"] = "approval/requested"
    turn_id: str
    request: ApprovalRequest
    #: Set on a plan review (tool ``exit_plan``): the ``requestId`` to pass to ``session/exit_plan``.
    request_id: str | None = None

    @model_validator(mode="after")
    def _name_plan_request(self) -> "ApprovalRequested":
        if self.request.tool == PLAN_TOOL and self.request_id is None:
            self.request_id = self.request.approval_id
        return self


class ApprovalResolved(EventBase):
    method: Literal["approval/resolved"] = "approval/resolved"
    turn_id: str
    approval_id: str
    decision: ApprovalDecision


class UserInputRequested(EventBase):
    method: Literal["userInput/requested"] = "userInput/requested"
    turn_id: str
    request_id: str
    questions: list[dict[str, Any]] = Field(default_factory=empty_list)


class TurnCompleted(EventBase):
    method: Literal["turn/completed"] = "turn/completed"
    turn: Turn
    #: Steer messages queued for this turn that it never delivered (it was interrupted, failed,
    #: or had already made its last model call): handed back to the client, never carried into
    #: the next turn.
    unsent_steers: list[UserMessageItem] = Field(default_factory=empty_list)


class TokenUsageUpdated(EventBase):
    method: Literal["thread/tokenUsage/updated"] = "thread/tokenUsage/updated"
    turn_id: str
    usage: Usage
    total: Usage
    context_tokens: int = 0
    context_window: int = 0
    #: The sampled tokens' log probabilities of this model call, when they were asked for
    #: (``logprobs`` in config.toml or a batch task) and the provider returned them.
    logprobs: list[dict[str, Any]] | None = None
    #: ``{"prompt": [...], "completion": [...]}``: the call's token ids, when they were asked for
    #: (``token_ids`` in config.toml or a batch task) and the server returned them.
    token_ids: dict[str, list[int]] | None = None


class ModelRetrying(EventBase):
    """A model call failed transiently and will be sent again after ``wait`` seconds, so a long
    backoff is never a silent stall. ``reason`` is the provider's error, one line, key-free."""

    method: Literal["turn/retrying"] = "turn/retrying"
    turn_id: str
    attempt: int
    max_attempts: int
    wait: float
    reason: str
    kind: str = "server"
    persisted: bool = Field(default=False, exclude=True)

    def notice(self) -> str:
        """One line for people: what failed and when the call goes out again."""
        return retry_notice(self.reason, self.attempt, self.max_attempts, self.wait)


class ModeChanged(EventBase):
    method: Literal["session/mode/changed"] = "session/mode/changed"
    mode: Mode
    reason: str = ""


class PlanReviewUpdated(EventBase):
    """A plan review changed (opened, revised, commented on, approved, rejected, abandoned).

    Live only: the review itself is kept in the thread (``thread/custom/saved``), so a client
    that reconnects reads it with ``plan/review/read``."""

    method: Literal["plan/review/updated"] = "plan/review/updated"
    change: Literal["opened", "revised", "commented", "rewriting", "approved", "rejected", "abandoned"]
    review: PlanReview
    persisted: bool = Field(default=False, exclude=True)


class TeamUpdated(EventBase):
    """A team changed: a member started, worked, finished or stopped, a task or a message moved.
    ``threadId`` is the lead's. Live only: the team is kept in its own file (``team/read``)."""

    method: Literal["team/updated"] = "team/updated"
    change: str
    team: Team
    #: The member the change is about, when there is one.
    member: str | None = None
    persisted: bool = Field(default=False, exclude=True)


class ErrorEvent(EventBase):
    method: Literal["error"] = "error"
    turn_id: str | None = None
    message: str
    kind: str = "runtime"


class MediaAdded(EventBase):
    """A media item was stored for the thread (an attached image, a tool's screenshot). Live only:
    the media store's index and the messages' references are what persists."""

    method: Literal["media/artifactAdded"] = "media/artifactAdded"
    turn_id: str | None = None
    media: MediaArtifact
    persisted: bool = Field(default=False, exclude=True)


class MediaDeleted(EventBase):
    """A media item was deleted (``media/delete``); messages keep their card without the bytes."""

    method: Literal["media/artifactDeleted"] = "media/artifactDeleted"
    media_id: str
    persisted: bool = Field(default=False, exclude=True)


RuntimeEvent = Annotated[
    ThreadStarted
    | ThreadStatusChanged
    | ThreadTitleChanged
    | ThreadModelChanged
    | CustomEntrySaved
    | TurnStarted
    | ItemStarted
    | AgentMessageDelta
    | ToolOutputDelta
    | ToolCallStarted
    | ItemUpdated
    | ItemCompleted
    | ApprovalRequested
    | ApprovalResolved
    | UserInputRequested
    | TurnCompleted
    | TokenUsageUpdated
    | ModelRetrying
    | ModeChanged
    | MediaAdded
    | MediaDeleted
    | PlanReviewUpdated
    | TeamUpdated
    | ErrorEvent,
    Field(discriminator="method"),
]


@functools.cache
def _event_adapter() -> TypeAdapter[RuntimeEvent]:
    # Built on first use: building the union's schema costs tens of ms that `roder -p` never needs.
    return TypeAdapter(RuntimeEvent)


def parse_event(data: dict[str, Any]) -> RuntimeEvent:
    """Rebuild a typed event from its persisted or wire form (raises on unknown shapes)."""
    return _event_adapter().validate_python(data)


#: How a stored line starts (``threadId``, ``ts`` and ``method`` come first in an event's wire
#: form): enough to pick the event's class without the union adapter.
_STORED_PREFIX = re.compile(rb'\{"threadId":"[^"\\]*","ts":[-+0-9.eE]+,"method":"([^"\\]+)"')


@functools.cache
def _event_classes() -> dict[bytes, type[EventBase]]:
    members = get_args(get_args(RuntimeEvent)[0])
    return {str(cls.model_fields["method"].default).encode(): cls for cls in members}


def parse_event_json(data: str | bytes) -> RuntimeEvent:
    """``parse_event`` for one JSON document (a stored line), parsed and validated in one pass
    (about twice as fast as ``json.loads`` then ``parse_event``); raises ValueError when bad.

    A stored line names its method at its start, so its own class validates it: building the
    union's adapter costs tens of ms, which resuming a thread from its snapshot (a few lines
    appended since) would otherwise pay for a handful of lines.
    """
    if isinstance(data, bytes) and (match := _STORED_PREFIX.match(data)) is not None:
        cls = _event_classes().get(match[1])
        if cls is not None:
            return cast("RuntimeEvent", cls.model_validate_json(data))
    return _event_adapter().validate_json(data)


class Subscription:
    """A bounded queue of events for one consumer.

    A consumer that falls more than ``maxsize`` events behind is marked ``overflowed`` and
    receives no more events, so one slow client can never block the runtime or other clients.
    """

    def __init__(self, bus: "EventBus", maxsize: int, thread_id: str | None) -> None:
        self._bus = bus
        self.thread_id = thread_id
        self.queue: asyncio.Queue[RuntimeEvent | None] = asyncio.Queue(maxsize=maxsize)
        self.overflowed = False

    def offer(self, event: RuntimeEvent) -> None:
        if self.overflowed or (self.thread_id and event.thread_id != self.thread_id):
            return
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.overflowed = True
            log.warning("event subscriber fell behind; it was disconnected")
            with contextlib.suppress(asyncio.QueueFull):
                self.queue.get_nowait()
                self.queue.put_nowait(None)

    def close(self) -> None:
        self._bus.unsubscribe(self)
        with contextlib.suppress(asyncio.QueueFull):
            self.queue.put_nowait(None)

    async def __aiter__(self) -> AsyncIterator[RuntimeEvent]:
        while True:
            event = await self.queue.get()
            if event is None:
                return
            yield event


class EventBus:
    """Fan-out of runtime events to subscribers and synchronous listeners, in emission order."""

    def __init__(self) -> None:
        self._subscriptions: list[Subscription] = []
        self._listeners: list[Callable[[RuntimeEvent], None]] = []

    def subscribe(self, maxsize: int = 10_000, thread_id: str | None = None) -> Subscription:
        sub = Subscription(self, maxsize, thread_id)
        self._subscriptions.append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with contextlib.suppress(ValueError):
            self._subscriptions.remove(sub)

    def add_listener(self, listener: Callable[[RuntimeEvent], None]) -> Callable[[], None]:
        """Register a callback run synchronously for every event; returns its remover."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def publish(self, event: RuntimeEvent) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # a faulty listener must not break the turn
                log.exception("event listener failed")
        for sub in list(self._subscriptions):
            sub.offer(event)
