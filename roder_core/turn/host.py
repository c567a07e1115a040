"""What a turn needs from the runtime that runs it: the narrow ``TurnHost`` protocol.

The turn runner and compaction depend on this protocol, never on the ``Runtime`` class, so the
runtime can build and drive turns without the two importing each other. ``Runtime`` provides it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from roder_core.brokers import Brokers
    from roder_core.customization.subagents import TraceRecord
    from roder_core.errors import InferenceError
    from roder_core.ir import ApprovalDecision, ApprovalRequest, ModelProfile, ParentRef, Thread, ThreadStatus, Turn
    from roder_core.kernel.registry import ExtensionRegistry
    from roder_core.kernel.services import InferenceEngine, ThreadStore
    from roder_core.kernel.teams import TeamChannel
    from roder_core.policy.engine import PolicyEngine
    from roder_core.policy.plan_review_book import PlanReviewBook
    from roder_core.runtime.options import RuntimeOptions
    from roder_core.threads.events import EventBus, RuntimeEvent
    from roder_core.threads.state import ThreadState
    from roder_core.turn.context import ContextAssembler
    from roder_core.turn.hooks import HookRunner
    from roder_core.turn.mutation import MutationQueue


class TurnHost(Protocol):
    """The services, event pipeline and approval table a running turn uses, and the thread
    operations its tools reach through their ``ToolHost`` (child threads, mode, questions)."""

    @property
    def options(self) -> RuntimeOptions: ...

    @property
    def registry(self) -> ExtensionRegistry: ...

    @property
    def hooks(self) -> HookRunner: ...

    @property
    def policy(self) -> PolicyEngine: ...

    @property
    def context(self) -> ContextAssembler: ...

    @property
    def mutations(self) -> MutationQueue: ...

    @property
    def store(self) -> ThreadStore | None: ...

    @property
    def redact(self) -> Callable[[str], str]: ...

    @property
    def mode(self) -> str: ...

    def engine(self, provider: str) -> InferenceEngine: ...

    def model_profile(self, provider: str, model: str) -> ModelProfile: ...

    def learn_context_limit(self, provider: str, model: str, error: InferenceError, prompt_tokens: int) -> bool: ...

    def brokers_for(self, workspace: Path, extension_id: str, capabilities: frozenset[str] | None = None) -> Brokers: ...

    async def emit(self, event: RuntimeEvent) -> None: ...

    def publish_live(self, event: RuntimeEvent) -> None: ...

    async def set_status(self, state: ThreadState, status: ThreadStatus) -> None: ...

    def register_approval(self, request: ApprovalRequest) -> asyncio.Future[ApprovalDecision]: ...

    def forget_approval(self, approval_id: str) -> None: ...

    def pending_approvals(self, thread_id: str | None = None) -> list[ApprovalRequest]: ...

    def resolve_approval(self, approval_id: str, decision: ApprovalDecision) -> bool: ...

    def persist_rule(self, rule: str, verdict: str = "allow") -> None: ...

    @property
    def bus(self) -> EventBus: ...

    @property
    def subagent_traces(self) -> dict[str, TraceRecord]: ...

    async def set_mode(self, mode: str, reason: str = "") -> None: ...

    def thread_mode(self, thread_id: str) -> str: ...

    async def ask_user(self, thread_id: str, turn_id: str, questions: list[dict[str, Any]]) -> dict[str, Any]: ...

    async def start_thread(
        self,
        cwd: Path | None = None,
        provider: str | None = None,
        model: str | None = None,
        *,
        title: str = "",
        ephemeral: bool = False,
        parent: ParentRef | None = None,
    ) -> Thread: ...

    def restrict_thread(
        self, thread_id: str, *, tools: frozenset[str] | None = None, mode: str | None = None, agent: str | None = None
    ) -> None: ...

    def tool_names(self) -> list[str]: ...

    @property
    def plan_reviews(self) -> PlanReviewBook: ...

    def team_channel(self, thread_id: str) -> TeamChannel | None: ...

    async def run_turn(self, thread_id: str, text: str) -> Turn: ...

    async def interrupt(self, thread_id: str, turn_id: str | None = None) -> bool: ...

    def thread(self, thread_id: str) -> Thread: ...

    async def close_thread(self, thread_id: str) -> None: ...
