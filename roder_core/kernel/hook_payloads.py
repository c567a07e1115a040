"""What a lifecycle hook is given at each ``HookPoint``, and what it may rewrite: typed models.

The runtime builds one of these models at each point; ``HookRunner`` hands every hook the
model's fields as a dict (``Hook.run(point, payload)``: the form command hooks send as JSON, plus
``transcript_path`` when the store keeps a file) and validates each hook's ``replace`` back into
the model. A rewrite of the wrong shape (``text`` that is not a string, ``arguments`` that are
not an object) is refused with the field and the reason: at a gating point the action stops
(fail closed), at an observing point the rewrite is dropped and logged.

Fields a hook may write are marked "hook output" (``permission``, ``continue_with``,
``summary``); the rest are inputs a hook may also rewrite where the point says so.
"""

# Annotations here are objects, not strings (no ``from __future__ import annotations``): pydantic
# would otherwise compile every field's annotation string again when it builds the models, a
# cost every start-up pays (tests/test_startup_imports.py names the modules kept so).

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from roder_core.ir import AgentInferenceRequest


class HookPayload(BaseModel):
    """Base of every payload: the thread it concerns."""

    # Built at first use: a run builds only the payloads of the points it reaches.
    model_config = ConfigDict(extra="ignore", defer_build=True)

    thread_id: str

    def hook_view(self) -> dict[str, Any]:
        """The fields as the hooks see them: values as they are (a request stays a request)."""
        return {name: getattr(self, name) for name in type(self).model_fields}


class BeforeTurnPayload(HookPayload):
    """``before_turn`` (gating): the user's message; a hook may rewrite ``text``."""

    turn_id: str
    text: str
    cwd: str
    mode: str
    #: Set for a child thread (a subagent, a hook's judge): the thread that started it.
    parent_thread_id: str | None = None


class RequestPayload(HookPayload):
    """``context`` and ``before_provider_request`` (gating): the request about to be sent; a hook
    may replace ``request``."""

    turn_id: str
    request: AgentInferenceRequest
    deadline: float | None = None
    mode: str
    task_ledger_required: bool = False
    turn_started_at: float


class ToolCallPayload(HookPayload):
    """``tool_call_before`` (gating): a call policy has not checked yet; a hook may rewrite
    ``arguments`` and set ``permission``."""

    turn_id: str
    tool: str
    arguments: dict[str, Any]
    call_id: str
    cwd: str
    mode: str
    #: Hook output: "ask" makes an allowed call ask; "allow" lets a call through that would only
    #: have asked (never past a deny or a policy floor).
    permission: Literal["ask", "allow"] | None = None


class ToolResultPayload(HookPayload):
    """``tool_result_after`` (observing): a call's result; a hook may rewrite ``text`` and ``is_error``."""

    tool: str
    arguments: dict[str, Any]
    text: str
    is_error: bool


class TurnEndPayload(HookPayload):
    """``turn_end`` (observing): how the turn ended."""

    turn_id: str
    status: str


class StopPayload(HookPayload):
    """``stop`` (observing): the model answered without tool calls; ``continue_with`` sends it
    back to work with that reason."""

    turn_id: str
    cwd: str
    mode: str
    #: True once a stop hook already sent the model back in this turn.
    stop_hook_active: bool = False
    last_message: str = ""
    #: Set for subagent threads (SubagentStop in Claude Code's terms).
    parent_thread_id: str | None = None
    task_ledger_required: bool = False
    deadline: float | None = None
    #: Hook output: the reason given to the model as a message.
    continue_with: str | None = None


class SessionStartPayload(HookPayload):
    """``session_start`` (observing): a thread was started, or forked from ``forked_from``."""

    cwd: str
    forked_from: str | None = None


class SessionEndPayload(HookPayload):
    """``session_end`` (observing): a thread was closed."""


class CompactionPayload(HookPayload):
    """``compaction`` (observing): the items about to be summarized; ``summary`` replaces the model's."""

    turn_id: str
    items: list[dict[str, Any]]
    previous_summary: str = ""
    instructions: str | None = None
    files_read: list[str]
    files_modified: list[str]
    #: Hook output: the summary to record instead of asking the model.
    summary: str | None = None
