"""Tool contracts: calls, results, the execution context and the per-turn tool registry.

A tool never touches the host directly: everything it may do arrives in its
``ToolExecutionContext``: scoped brokers for the machine, and a ``ToolHost`` for the runtime
(emit an item, ask for an approval or the user's input, run a child thread, read or set the
mode). The runtime owns policy, approvals, cancellation and how results reach the transcript.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, runtime_checkable

from roder_core.ir import Attachment, Item, ModelProfile, ToolSpec
from roder_core.kernel.file_ledger import FileLedger
from roder_core.kernel.tool_args import ToolArgumentError, ToolArguments, arguments_schema, checked_arguments, defer_schema

if TYPE_CHECKING:
    from roder_core.brokers import Brokers
    from roder_core.customization.subagents import TraceRecord
    from roder_core.ir import ApprovalDecision, ApprovalRequest, Turn
    from roder_core.kernel.tasks import TaskBoard
    from roder_core.kernel.teams import TeamChannel
    from roder_core.policy.plan_review import PlanVerdict
    from roder_core.threads.events import RuntimeEvent

ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"]

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


#: Key in ``ToolExecutionContext.extra`` for the client's text reader (a ``ClientTextReader``),
#: present when the front end (``roder acp``) can read files as its editor sees them, unsaved
#: buffers included. Call it only with a path the fs broker's ``resolve`` returned: the broker
#: decides what may be read, the client only supplies the text.
CLIENT_TEXT_READER = "client_text_reader"
#: ``await reader(real_path)`` -> the text, or None when the client cannot supply it (read the disk).
ClientTextReader = Callable[[Path], Awaitable[str | None]]


class ToolSpecError(ValueError):
    """A tool spec the registry refuses (bad name, bad schema, duplicate)."""


@dataclass(slots=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    #: Arguments the tool's model does not know, which the call ran without (``argument_problem``
    #: fills it; the result says so, see ``with_ignored_note``).
    ignored: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ToolResult:
    """What a tool returns. ``views`` are rich items for clients (commandExecution, fileChange)
    emitted alongside the toolResult item that the model sees."""

    id: str
    name: str
    text: str
    data: Any = None
    is_error: bool = False
    attachments: list[Attachment] = field(default_factory=list)
    views: list[Item] = field(default_factory=list)

    @classmethod
    def error(cls, call: ToolCall, message: str) -> ToolResult:
        return cls(id=call.id, name=call.name, text=message, is_error=True)


#: The most text a tool from outside Roder (an MCP server, a process extension) hands the model
#: in one result; the rest is cut, and the result says so.
MAX_FOREIGN_RESULT_CHARS = 100_000


def bounded_result_text(text: str, limit: int = MAX_FOREIGN_RESULT_CHARS) -> str:
    """``text`` cut to its first ``limit`` characters, ending with a line that says how much
    there was and how much was cut: the one bound of every foreign tool's result, so an MCP
    server or extension that prints megabytes never overflows the model's window unseen. Its
    control bytes and runs of binary are read first as command output's are (``shown_text``):
    a NUL breaks some providers' requests."""
    from roder_core.brokers.terminal_text import FOREIGN_BINARY_NOTE, shown_text

    text = shown_text(text, FOREIGN_BINARY_NOTE)
    if len(text) <= limit:
        return text
    return (
        text[:limit] + f"\n[output truncated: {len(text)} characters in all; the first {limit} are shown, "
        f"the last {len(text) - limit} were cut]"
    )


@dataclass(frozen=True, slots=True)
class PolicySubject:
    """What a policy rule matches for one call: ``bash(git status*)`` has tool ``bash`` and
    subject ``git status``; ``edit(src/**)`` has a path subject; ``web_fetch(domain:x)`` a domain."""

    tool: str
    value: str = ""
    kind: Literal["command", "path", "domain", "other"] = "other"
    writes: bool = False
    #: Why a shell command is not a plain literal command (substitutions, control flow, ...).
    #: Such a subject is never allowed by a rule, only by the mode or by the user; deny and ask
    #: rules still apply to it.
    opaque: str = ""


@dataclass(frozen=True)
class ChildThreadRun:
    """How a child thread's turn ended, and everything the child recorded."""

    turn: Turn
    items: list[Item]


class ToolHost(Protocol):
    """The runtime as one tool call sees it: scoped to the call's thread and turn.

    Tools (and so extensions) reach the runtime only through this; they never hold ``Runtime``.
    """

    @property
    def mode(self) -> str:
        """The thread's policy mode now (``ToolExecutionContext.mode`` is the one at call start)."""
        ...

    @property
    def interactive(self) -> bool:
        """False in headless runs: nobody answers approvals or questions."""
        ...

    @property
    def provider(self) -> str: ...

    @property
    def model(self) -> str: ...

    def redact(self, text: str) -> str:
        """``text`` with every secret value the runtime knows removed."""
        ...

    async def emit_item(self, item: Item) -> None:
        """Record an item (a plan, a task list) in the call's turn: started, then completed."""
        ...

    async def request_approval(self, request: ApprovalRequest) -> ApprovalDecision:
        """Ask the person at a client, like any approval; a timeout is a deny."""
        ...

    async def request_user_input(self, questions: list[dict[str, Any]]) -> dict[str, Any]:
        """Ask the person questions (``userInput/requested``); raises in headless runs."""
        ...

    async def set_mode(self, mode: str, reason: str) -> None: ...

    def tool_names(self) -> list[str]:
        """Every tool the runtime could offer (a child thread's tools are chosen from these)."""
        ...

    async def start_child_thread(self, *, title: str, provider: str, model: str, tools: frozenset[str], mode: str) -> str:
        """A new ephemeral thread whose parent is this call's turn; returns its id."""
        ...

    async def run_child_thread(self, thread_id: str, text: str, on_event: Callable[[RuntimeEvent], None]) -> ChildThreadRun:
        """Run one turn of a child thread to its end (``on_event`` sees the child's events), then
        close it. Cancelling the call interrupts the child."""
        ...

    def register_subagent(self, record: TraceRecord) -> None:
        """Make a running subagent's trace visible to ``turn/subagentTrace/read``."""
        ...

    @property
    def tasks(self) -> TaskBoard:
        """This thread's background tasks: start one, read its output, stop it."""
        ...

    async def review_plan(self, call_id: str, plan: str) -> PlanVerdict:
        """Put a plan up for review (``plan/review/*``) and wait for the verdict: approved into
        a next mode, rejected with a reason, or sent back for a rewrite with the user's comments."""
        ...

    def team(self) -> TeamChannel | None:
        """The team this call's thread belongs to (as a member or as the lead), else None."""
        ...


@runtime_checkable
class HostedHook(Protocol):
    """A hook that runs model calls or child threads (prompt and agent hooks) at its events.
    The runtime hands it ``host_for``: the ToolHost of a thread's running turn, or None when
    the thread has no turn running."""

    def bind_hosts(self, host_for: Callable[[str], ToolHost | None]) -> None: ...


@dataclass
class ToolExecutionContext:
    """Everything a tool may use for one call: ids, limits and the scoped brokers."""

    thread_id: str
    turn_id: str
    call_id: str
    workspace: Path
    mode: str
    brokers: Brokers
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    #: ``time.time()`` instant at which the turn's finalization reserve begins; commands clamp
    #: their timeouts to end by then so the model keeps the reserve to finish (seed 004).
    deadline: float | None = None
    model: ModelProfile | None = None
    capabilities: frozenset[str] = frozenset()
    emit_output: Callable[[str], None] = lambda _text: None
    #: The runtime, scoped to this call; None when a tool runs outside a runtime (unit tests).
    host: ToolHost | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: What this thread last read or wrote of each file; None outside a thread (no check).
    files: FileLedger | None = None


@runtime_checkable
class ToolExecutor(Protocol):
    """One tool. ``spec`` describes it to the model; ``execute`` runs it after policy allowed it."""

    def spec(self) -> ToolSpec: ...

    async def execute(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult: ...


class Tool:
    """Convenience base for tools with the optional hooks the runtime looks for.

    Subclasses set ``name``, ``description``, ``arguments_model`` and ``kind`` and implement
    ``execute``. ``arguments_model`` (a ``tool_args.ToolArguments`` subclass) gives the JSON
    schema the model sees, and the turn checks every call against it before policy and before
    ``execute`` (read the values with ``tool_args.parse_arguments``). Tools whose schema comes
    from elsewhere (an MCP server's) set ``parameters`` instead. ``read_only`` tools run in plan
    mode and never need approval in ``ask`` mode.
    """

    name: str = ""
    description: str = ""
    arguments_model: ClassVar[type[ToolArguments] | None] = None
    parameters: dict[str, Any] = {"type": "object", "properties": {}}
    kind: ToolKind = "other"
    read_only: bool = False
    #: Offered only to threads in a team (their ``ToolHost.team()`` is not None).
    team_only: bool = False
    #: Offered only in these policy modes (``exit_plan``: plan mode); None: in every mode.
    modes: ClassVar[frozenset[str] | None] = None

    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, parameters=self.schema())

    def schema(self) -> dict[str, Any]:
        """The arguments' JSON schema: ``arguments_model``'s when set, else ``parameters``."""
        model = self.arguments_model
        return arguments_schema(model) if model is not None else self.parameters

    async def execute(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        raise NotImplementedError  # abstract: every concrete tool overrides this

    def policy_subjects(self, arguments: dict[str, Any], workspace: Path) -> list[PolicySubject]:
        """What policy rules match for these arguments; default: the tool name alone."""
        return [PolicySubject(tool=self.name, writes=not self.read_only)]

    def mutated_paths(self, arguments: dict[str, Any], workspace: Path) -> list[str]:
        """Paths this call writes; calls touching the same path are serialized."""
        return []

    async def preview(self, ctx: ToolExecutionContext, call: ToolCall) -> dict[str, Any]:
        """Extra approval preview fields (``command``, ``cwd``, ``diff``) for the client. A call
        that cannot apply (a refused write, an edit whose text is not in the file) raises
        ``ToolArgumentError`` here with the refusal ``execute`` would give: the turn then fails
        the call at once and nobody is asked to approve it. So a tool's preview runs the same
        checks as its execution."""
        return {}

    def redirect(self, arguments: dict[str, Any]) -> ToolCall | None:
        """Another tool's call that these arguments really are (``bash`` running an
        ``apply_patch`` heredoc), or None. The turn runs the returned call in its place, under
        that tool's own argument checks, policy, approvals and mutation queue; the result keeps
        this call's id."""
        return None


def arguments_model_of(tool: ToolExecutor) -> type[ToolArguments] | None:
    """The tool's argument model, when it declares one (``Tool.arguments_model``)."""
    model = getattr(tool, "arguments_model", None)
    return model if isinstance(model, type) and issubclass(model, ToolArguments) else None


def argument_problem(tool: ToolExecutor, call: ToolCall) -> ToolResult | None:
    """The error result for arguments that do not fit the tool's model (None when they do, or
    when the tool declares no model): checked before policy, so a call the tool would refuse
    never asks a person first. When they fit, ``call.arguments`` becomes what the tool will
    read (``checked_arguments``: a quoted path unquoted, ``null`` dropped for its default), so
    the policy check, the approval and the tool see one and the same call."""
    model = arguments_model_of(tool)
    if model is None:
        return None
    try:
        call.arguments = checked_arguments(model, call)
    except ToolArgumentError as exc:
        return ToolResult.error(call, str(exc))
    call.ignored = [key for key in call.arguments if key not in model.model_fields and key not in QUIET_EXTRAS]
    return None


#: Extra arguments models add that carry no instruction (Claude Code's ``description`` of a
#: command, Cursor's ``explanation``): ignored without a word.
QUIET_EXTRAS = frozenset({"description", "explanation"})


def with_ignored_note(tool: ToolExecutor, call: ToolCall, result: ToolResult) -> ToolResult:
    """``result`` ending with a line naming the arguments the call ran without: a key the tool
    does not take (``cwd`` for ``workdir``) is not silently dropped, and the model learns the
    names the tool takes."""
    model = arguments_model_of(tool)
    if not call.ignored or model is None:
        return result
    names = ", ".join(repr(key) for key in call.ignored)
    takes = ", ".join(model.model_fields)
    plural = "s" if len(call.ignored) > 1 else ""
    result.text = f"{result.text}\n[ignored unknown argument{plural} {names}: {call.name} takes {takes}]"
    return result


def tool_kind(tool: ToolExecutor) -> ToolKind:
    return getattr(tool, "kind", "other")


def is_read_only(tool: ToolExecutor) -> bool:
    return bool(getattr(tool, "read_only", False))


def offered_in(tool: ToolExecutor, mode: str) -> bool:
    modes = getattr(tool, "modes", None)
    return modes is None or mode in modes


def is_team_only(tool: ToolExecutor) -> bool:
    return bool(getattr(tool, "team_only", False))


def validate_spec(spec: ToolSpec) -> None:
    if not _TOOL_NAME.match(spec.name):
        raise ToolSpecError(f"invalid tool name {spec.name!r}: use 1-64 letters, digits, _ . -")
    if not spec.description.strip():
        raise ToolSpecError(f"tool {spec.name!r} has no description")
    params = spec.parameters
    if not isinstance(params, dict) or params.get("type") != "object":
        raise ToolSpecError(f"tool {spec.name!r}: parameters must be a JSON schema of type object")
    props = params.get("properties", {})
    if not isinstance(props, dict):
        raise ToolSpecError(f"tool {spec.name!r}: 'properties' must be an object")
    required = params.get("required", [])
    missing = [name for name in required if name not in props]
    if missing:
        raise ToolSpecError(f"tool {spec.name!r}: required {missing} not in properties")


#: What a deferred schema is checked as when its tool registers (``registration_spec``).
_OBJECT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def registration_spec(tool: ToolExecutor) -> ToolSpec:
    """The spec a registry checks when ``tool`` registers.

    A ``Tool`` whose parameters are its ``arguments_model``'s (neither ``spec`` nor ``schema``
    overridden) is checked with its own name and description and an empty object schema in
    place of the model's: pydantic makes every model's schema an object whose required fields
    are among its properties, so that part cannot fail the check, and generating it (most of
    the runtime's start: twenty models' JSON schemas) waits for the first request that offers
    the tool, or for ``tool_args.build_pending_schemas``. Every other tool builds its spec now.
    """
    if isinstance(tool, Tool) and type(tool).spec is Tool.spec and type(tool).schema is Tool.schema:
        model = tool.arguments_model
        if model is not None:
            defer_schema(model)
            return ToolSpec(name=tool.name, description=tool.description, parameters=_OBJECT_SCHEMA)
    return tool.spec()


class ToolRegistry:
    """The tools available for one turn, filled by every ToolContributor.

    ``on_error``: what ``specs`` does with a tool whose spec cannot be built or is refused (a
    deferred schema pydantic cannot generate, see ``registration_spec``): without it ``specs``
    raises ``ToolSpecError``; with it (a turn's registry) the tool is reported with its source and
    left out, as a contributor that fails to register is.

    A contributor that owns names it cannot offer now (the tools of an MCP server that failed to
    start, is restarting or is disabled) ``withhold``s them with the reason: ``missing`` is the
    one place that words a call to a tool not in the registry, for the turn loop and the app
    server alike, so the model reads why instead of "unknown tool"."""

    def __init__(self, on_error: Callable[[str, Exception], None] | None = None) -> None:
        self._tools: dict[str, ToolExecutor] = {}
        self._sources: dict[str, str] = {}
        self._current_source = ""
        self._on_error = on_error
        #: Names (exact) and name prefixes withheld, with why.
        self._withheld: dict[str, str] = {}
        self._withheld_prefixes: dict[str, str] = {}
        #: Tools a narrowed copy (``restricted``, ``for_mode``) left out: not offered here, which
        #: a withheld prefix's reason (its server "does not list" it) would misstate.
        self._left_out: frozenset[str] = frozenset()

    def register(self, tool: ToolExecutor) -> None:
        spec = registration_spec(tool)
        validate_spec(spec)
        if spec.name in self._tools:
            raise ToolSpecError(
                f"duplicate tool name {spec.name!r} (from {self._current_source!r} and {self._sources[spec.name]!r})"
            )
        self._tools[spec.name] = tool
        self._sources[spec.name] = self._current_source

    def get(self, name: str) -> ToolExecutor | None:
        return self._tools.get(name)

    def withhold(self, name: str, reason: str, *, prefix: bool = False) -> None:
        """``name`` (with ``prefix``, every name starting with it) is a tool of the current
        contributor that is not offered now, because of ``reason`` (a sentence naming the
        source: "MCP server 'x' failed to start: ...")."""
        (self._withheld_prefixes if prefix else self._withheld)[name] = reason

    def missing(self, name: str) -> str:
        """What a call to ``name``, which this registry does not hold, reads: why its source
        withheld it (the longest matching prefix wins), else that no tool has that name (so too
        a tool this narrowed copy left out: it is not offered here, whatever its source holds)."""
        reason = self._withheld.get(name)
        if reason is None and name not in self._left_out:
            owners = [p for p in self._withheld_prefixes if name.startswith(p)]
            reason = self._withheld_prefixes[max(owners, key=len)] if owners else None
        if reason is not None:
            return f"tool {name!r} is unavailable: {reason}"
        return f"unknown tool {name!r}; available: {', '.join(self.names())}"

    def names(self) -> list[str]:
        return list(self._tools)

    def source_of(self, name: str) -> str:
        return self._sources.get(name, "")

    def specs(self) -> list[ToolSpec]:
        """Every tool's spec, checked (``validate_spec``): the one place a deferred schema is
        built and checked before a model sees it."""
        found: list[ToolSpec] = []
        for name, tool in list(self._tools.items()):
            try:
                spec = tool.spec()
                validate_spec(spec)
            except Exception as exc:
                problem = ToolSpecError(f"tool {name!r}: {exc}")
                if self._on_error is None:
                    raise problem from exc
                self._on_error(self._sources[name], problem)
                del self._tools[name], self._sources[name]
                self._withheld[name] = f"it cannot be offered to the model: {exc}"
                continue
            found.append(spec)
        return found

    def restricted(self, allowed: Iterable[str]) -> ToolRegistry:
        """A copy holding only the named tools (subagents, skills with allowed-tools)."""
        keep = set(allowed)
        copy = ToolRegistry(self._on_error)
        copy._left_out = self._left_out | {name for name in self._tools if name not in keep}
        for name, tool in self._tools.items():
            if name in keep:
                copy._tools[name] = tool
                copy._sources[name] = self._sources[name]
        copy._withheld = {name: why for name, why in self._withheld.items() if name in keep}
        copy._withheld_prefixes = {
            prefix: why for prefix, why in self._withheld_prefixes.items() if any(n.startswith(prefix) for n in keep)
        }
        return copy

    def outside_teams(self) -> ToolRegistry:
        """A copy without the tools only team threads are offered."""
        return self._narrowed(name for name, tool in self._tools.items() if not is_team_only(tool))

    def for_mode(self, mode: str) -> ToolRegistry:
        """A copy without the tools not offered in policy mode ``mode`` (``Tool.modes``)."""
        return self._narrowed(name for name, tool in self._tools.items() if offered_in(tool, mode))

    def _narrowed(self, names: Iterable[str]) -> ToolRegistry:
        """``restricted`` to ``names``, keeping every withheld entry: a mode or a team leaves
        some tools out, but a server that failed still failed."""
        copy = self.restricted(names)
        copy._withheld, copy._withheld_prefixes = dict(self._withheld), dict(self._withheld_prefixes)
        return copy

    def contribute_from(self, source: str, contribute: Callable[[ToolRegistry], None]) -> None:
        self._current_source = source
        try:
            contribute(self)
        finally:
            self._current_source = ""

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)


class ToolSet:
    """A ToolContributor that registers a fixed list of tools under one id (the common case)."""

    def __init__(self, contributor_id: str, tools: Iterable[ToolExecutor]) -> None:
        self._id = contributor_id
        self.tools = list(tools)

    def id(self) -> str:
        return self._id

    def contribute(self, registry: ToolRegistry) -> None:
        for tool in self.tools:
            registry.register(tool)


ToolRunner = Callable[[ToolExecutionContext, ToolCall], Awaitable[ToolResult]]
