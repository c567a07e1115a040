"""What a turn needs from the runtime that runs it: the narrow ``TurnHost`` protocol.

The turn runner depends on this protocol, never on the ``Runtime`` class, so the runtime can
build and drive turns without the two importing each other. It names services and the event
pipeline, not thread management: the tools of a call reach threads (children, questions, mode)
through the ``ToolHost`` that ``tool_host`` builds. ``Runtime`` provides it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from roder_core.kernel.services import PolicyVerdict

if TYPE_CHECKING:
    from roder_core.brokers import Brokers
    from roder_core.brokers.command_conditions import CommandConditions
    from roder_core.errors import InferenceError
    from roder_core.ir import ApprovalDecision, ApprovalRequest, Attachment, ModelProfile, ThreadStatus
    from roder_core.kernel.registry import ExtensionRegistry
    from roder_core.kernel.services import InferenceEngine, ThreadStore
    from roder_core.kernel.tasks import TaskBoards
    from roder_core.kernel.teams import TeamChannel
    from roder_core.kernel.tools import ToolHost
    from roder_core.policy.engine import PolicyEngine
    from roder_core.runtime.options import RuntimeOptions
    from roder_core.runtime.pending import PendingRequests
    from roder_core.threads.events import RuntimeEvent
    from roder_core.threads.state import ThreadState
    from roder_core.turn.context import ContextAssembler
    from roder_core.turn.hooks import HookRunner
    from roder_core.turn.mutation import MutationQueue
    from roder_core.turn.service_set import ServiceSet

#: Shows an approval request to a person and returns the answer (``TurnRunner.await_decision``).
Approver = Callable[["ApprovalRequest"], Awaitable["ApprovalDecision"]]


class TurnHost(Protocol):
    """The services, event pipeline and approval table a running turn uses."""

    @property
    def options(self) -> RuntimeOptions: ...

    @property
    def registry(self) -> ExtensionRegistry: ...

    @property
    def hooks(self) -> HookRunner: ...

    @property
    def services(self) -> ServiceSet: ...

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

    @property
    def approvals(self) -> PendingRequests[ApprovalRequest, ApprovalDecision]: ...

    def engine(self, provider: str) -> InferenceEngine: ...

    def model_profile(self, provider: str, model: str) -> ModelProfile: ...

    def learn_context_limit(self, provider: str, model: str, error: InferenceError, prompt_tokens: int) -> bool: ...

    def brokers_for(
        self, workspace: Path, extension_id: str, capabilities: frozenset[str] | None = None, *, thread_id: str | None = None
    ) -> Brokers: ...

    def thread_brokers(self, thread_id: str | None, workspace: Path, extension_id: str) -> Brokers:
        """``brokers_for``, with commands in the thread's loopback network."""
        ...

    @property
    def tasks(self) -> TaskBoards: ...

    async def emit(self, event: RuntimeEvent) -> None: ...

    async def store_media(
        self, thread_id: str, attachments: list[Attachment], *, source: str, turn_id: str | None = None
    ) -> list[Attachment]: ...

    def publish_live(self, event: RuntimeEvent) -> None: ...

    async def set_status(self, state: ThreadState, status: ThreadStatus) -> None: ...

    def persist_rule(self, rule: str, verdict: PolicyVerdict = PolicyVerdict.ALLOW) -> str | None: ...

    def tool_host(self, thread_id: str, turn_id: str, workspace: Path, provider: str, model: str, approve: Approver) -> ToolHost:
        """The ``ToolHost`` for one call of this turn (approvals go through ``approve``)."""
        ...

    def thread_interactive(self, thread_id: str) -> bool: ...

    def command_conditions(self) -> CommandConditions:
        """The sandbox level in effect and whether commands reach the network."""
        ...

    def team_channel(self, thread_id: str) -> TeamChannel | None:
        """The team the thread belongs to: its team-only tools are offered only then."""
        ...
