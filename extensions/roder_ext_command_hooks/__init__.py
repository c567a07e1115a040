"""Command hooks: external programs run at lifecycle events, the way Claude Code hooks work.

Configured in config.toml (and a trusted project's ``.roder/config.toml``)::

    [[hooks.PreToolUse]]
    matcher = "bash|write"          # regex over the tool name (case-insensitive); empty = all
    hooks = [{ type = "command", command = "~/.roder/hooks/guard.sh", timeout = 20 }]

    [[hooks.Stop]]
    command = "./scripts/check-done.sh"   # shorthand for a single command hook

    [[hooks.Stop]]
    hooks = [{ type = "prompt", prompt = "Did the assistant finish every task? $ARGUMENTS" }]

Handler types: ``command``, ``http`` (``url``, ``headers``, ``allowedEnvVars``), ``prompt`` and
``agent`` (``prompt``, ``model``): see ``typed_hooks``.

Events: PreToolUse, PostToolUse, UserPromptSubmit, Stop, SubagentStop (a ``task`` subagent
finished), PreCompact, SessionStart, SessionEnd. The command gets one JSON object on stdin
(``hook_event_name``, ``session_id``, ``transcript_path``, ``cwd``, ``permission_mode``, and
``tool_name``/``tool_input``/``tool_response``, ``prompt``, ``stop_hook_active`` as the event has
them). Tool names and inputs use Claude Code's spellings (``Bash`` with ``command``, ``Edit`` with
``file_path``/``old_string``/``new_string``; see claude_names.py); matchers accept either name.
It answers with:

- exit 0: success; stdout may be a JSON decision (``hookSpecificOutput.permissionDecision``
  allow|deny|ask, ``updatedInput``, ``additionalContext``; ``decision: "block"`` + ``reason``;
  ``continue: false`` + ``stopReason``). Plain stdout of UserPromptSubmit/SessionStart is context.
- exit 2: block. PreToolUse: the call is refused and stderr goes to the model. UserPromptSubmit:
  the prompt is refused. Stop: the model is sent back to work with stderr as the reason.
  PostToolUse: stderr is added to the tool result for the model.
- any other exit, a crash or a timeout: at gating events (PreToolUse, UserPromptSubmit) the action
  is denied (fail closed, unlike Claude Code); elsewhere it is logged and the turn goes on.

Children get a scrubbed environment (no *_KEY/*_TOKEN/*SECRET* variables) plus
``RODER_PROJECT_DIR`` and ``CLAUDE_PROJECT_DIR`` so existing scripts port over.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from roder_core import (
    EXTENSION_API_VERSION,
    CapabilityRequest,
    ContextBlock,
    ContextQuery,
    ExtensionManifest,
    HookOutcome,
    HookPoint,
    ProvidedService,
    RoderExtension,
    __version__,
    bounded_json,
)
from roder_core.brokers.network import AllowlistNetworkBroker
from roder_core.brokers.secrets import SecretRedactor, scrubbed_env
from roder_core.kernel.distribution import HostContext
from roder_core.kernel.services import ServiceRegistrar
from roder_core.kernel.tools import ToolHost
from roder_core.plugins.components import PluginMonitor, plugin_hooks, plugin_monitors
from roder_core.plugins.enabled import ActivePlugins, active_plugins

from .claude_names import claude_tool_name, from_claude_input, to_claude_input
from .monitors import MonitorOutput, PluginMonitors
from .typed_hooks import TypedHookFailed, run_http, run_model_hook

log = logging.getLogger(__name__)

#: Claude Code event names -> the runtime's hook points.
EVENTS: dict[str, HookPoint] = {
    "PreToolUse": HookPoint.TOOL_CALL_BEFORE,
    "PostToolUse": HookPoint.TOOL_RESULT_AFTER,
    "UserPromptSubmit": HookPoint.BEFORE_TURN,
    "Stop": HookPoint.STOP,
    "SubagentStop": HookPoint.STOP,
    "PreCompact": HookPoint.COMPACTION,
    "SessionStart": HookPoint.SESSION_START,
    "SessionEnd": HookPoint.SESSION_END,
}
_EVENT_OF = {point: name for name, point in EVENTS.items() if name != "SubagentStop"}
_PERMISSION_MODES = {"ask": "default", "auto-edit": "acceptEdits", "plan": "plan", "bypass": "bypassPermissions"}
DEFAULT_TIMEOUT = 30.0
#: Each handler type and the field it cannot go without.
HANDLER_FIELDS = {"command": "command", "http": "url", "prompt": "prompt", "agent": "prompt"}
#: Claude Code's defaults: an agent hook gets longer (it may read files first).
DEFAULT_TIMEOUTS = {"command": DEFAULT_TIMEOUT, "http": DEFAULT_TIMEOUT, "prompt": DEFAULT_TIMEOUT, "agent": 60.0}
_MAX_CONTEXT_CHARS = 10_000


class HookConfigError(ValueError):
    pass


class HookFailed(Exception):
    """The command crashed, timed out or exited with an unexpected code."""


@dataclass(frozen=True)
class CommandHook:
    event: str
    command: str
    matcher: re.Pattern[str] | None
    timeout: float
    #: Variables added to the (scrubbed) environment: a plugin's ``CLAUDE_PLUGIN_ROOT``, ...
    env: tuple[tuple[str, str], ...] = ()
    #: ``command``, or ``http`` / ``prompt`` / ``agent`` (``typed_hooks``) with their settings.
    kind: str = "command"
    config: Mapping[str, Any] = field(default_factory=dict)

    def matches(self, tool: str | None) -> bool:
        """Roder's tool name or Claude Code's (``bash`` or ``Bash``, ``web_fetch`` or ``WebFetch``)."""
        if self.matcher is None or tool is None:
            return True
        return any(self.matcher.fullmatch(name) is not None for name in {tool, claude_tool_name(tool)})


@dataclass
class HookRun:
    exit_code: int
    stdout: str
    stderr: str

    def decision(self) -> dict[str, Any]:
        """stdout as a JSON object, or {} when it is not one (then it is plain text)."""
        text = self.stdout.strip()
        if not text.startswith("{"):
            return {}
        try:
            data = bounded_json.loads(text)
        except json.JSONDecodeError:
            return {}
        return data if isinstance(data, dict) else {}


def parse_hooks(section: Any) -> list[CommandHook]:
    """The ``[hooks]`` table: event name -> list of {matcher, hooks=[{type, command, timeout}]}."""
    if not section:
        return []
    if not isinstance(section, Mapping):
        raise HookConfigError("[hooks] must be a table of events")
    found: list[CommandHook] = []
    for event, groups in section.items():
        if event not in EVENTS:
            raise HookConfigError(f"[hooks] unknown event {event!r}; use one of {', '.join(EVENTS)}")
        for group in groups if isinstance(groups, list) else [groups]:
            if not isinstance(group, Mapping):
                raise HookConfigError(f"[[hooks.{event}]] entries must be tables")
            pattern = str(group.get("matcher") or "")
            try:
                matcher = None if pattern in ("", "*") else re.compile(pattern, re.IGNORECASE)
            except re.error as exc:
                raise HookConfigError(f"[[hooks.{event}]] matcher {pattern!r}: {exc}") from exc
            commands = group.get("hooks") or ([{"command": group["command"]}] if group.get("command") else [])
            if not commands:
                raise HookConfigError(f"[[hooks.{event}]] needs 'command' or 'hooks'")
            for spec in commands:
                kind = str(spec.get("type", "command")) if isinstance(spec, Mapping) else "command"
                if kind not in HANDLER_FIELDS:
                    raise HookConfigError(f"[[hooks.{event}]] type {kind!r}: use one of {', '.join(HANDLER_FIELDS)}")
                needed = HANDLER_FIELDS[kind]
                if not isinstance(spec, Mapping) or not spec.get(needed):
                    raise HookConfigError(f"[[hooks.{event}]] each {kind} hook needs a {needed!r}")
                timeout = float(spec.get("timeout", group.get("timeout", DEFAULT_TIMEOUTS[kind])))
                found.append(CommandHook(event, str(spec[needed]), matcher, timeout, kind=kind, config=dict(spec)))
    return found


async def run_command(hook: CommandHook, payload: dict[str, Any], cwd: Path, env: dict[str, str]) -> HookRun:
    """Run one hook command in its own process group; killed with its children on timeout."""
    proc = await asyncio.create_subprocess_shell(
        hook.command,
        cwd=str(cwd),
        env=env,
        start_new_session=True,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    data = json.dumps(payload, ensure_ascii=False, default=str).encode()
    try:
        async with asyncio.timeout(hook.timeout):
            stdout, stderr = await proc.communicate(data)
    except (TimeoutError, asyncio.CancelledError) as exc:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        if isinstance(exc, asyncio.CancelledError):
            raise
        raise HookFailed(f"{hook.event} hook `{hook.command}` timed out after {hook.timeout:g}s") from None
    return HookRun(proc.returncode or 0, stdout.decode(errors="replace"), stderr.decode(errors="replace"))


class CommandHooks:
    """One Hook service running every configured command at its event."""

    def __init__(
        self,
        hooks: list[CommandHook],
        project: Path,
        env: Mapping[str, str],
        known: SecretRedactor,
        config_error: str | None = None,
        network: AllowlistNetworkBroker | None = None,
        service_id: str = "command-hooks",
    ) -> None:
        self.hooks = hooks
        self._id = service_id
        self.project = project
        self.config_error = config_error
        # the run's secrets leave by name and by value (a provider key in CORP_LLM_AUTH, the
        # app server's token), as from a command's environment
        child_env, _ = scrubbed_env(env, known)
        self.env = {**child_env, "RODER_PROJECT_DIR": str(project), "CLAUDE_PROJECT_DIR": str(project)}
        self.context = HookContext("hook-context" if service_id == "command-hooks" else f"{service_id}:context")
        #: http hooks reach the network only through this (the ``[network] allow`` list).
        self.network = network or AllowlistNetworkBroker([])
        self.host_for: Callable[[str], ToolHost | None] | None = None
        #: Child threads prompt and agent hooks started: their own events run no model hooks,
        #: or a hook judging every tool call would judge its own judge's calls forever.
        self.hook_threads: set[str] = set()

    def bind_hosts(self, host_for: Callable[[str], ToolHost | None]) -> None:
        """The runtime's ToolHost per thread, for prompt and agent hooks."""
        self.host_for = host_for

    async def _execute(self, hook: CommandHook, event: str, stdin: dict[str, Any], env: dict[str, str]) -> HookRun:
        """Run one handler of any type; the answer is read as a command's would be."""
        try:
            if hook.kind == "http":
                code, out, err = await run_http(hook.config, stdin, env, self.network, hook.timeout)
            elif hook.kind in ("prompt", "agent"):
                async with asyncio.timeout(hook.timeout):
                    code, out, err = await run_model_hook(
                        hook.kind, hook.config, event, stdin, self.host_for, self.hook_threads.add
                    )
            else:
                return await run_command(hook, stdin, self.project, env)
        except TimeoutError:
            raise HookFailed(f"{event} {hook.kind} hook timed out after {hook.timeout:g}s") from None
        except TypedHookFailed as exc:
            raise HookFailed(f"{event} {exc}") from None
        return HookRun(code, out, err)

    def id(self) -> str:
        return self._id

    def points(self) -> frozenset[HookPoint]:
        if self.config_error:
            return frozenset({HookPoint.BEFORE_TURN, HookPoint.TOOL_CALL_BEFORE})
        return frozenset(EVENTS[h.event] for h in self.hooks)

    def _stdin(self, event: str, payload: dict[str, Any]) -> dict[str, Any]:
        data: dict[str, Any] = {
            "session_id": payload.get("thread_id", ""),
            "transcript_path": payload.get("transcript_path") or "",
            "cwd": payload.get("cwd") or str(self.project),
            "hook_event_name": event,
            "permission_mode": _PERMISSION_MODES.get(str(payload.get("mode", "")), payload.get("mode", "")),
        }
        if "tool" in payload:
            tool = str(payload["tool"])
            data.update(
                tool_name=claude_tool_name(tool),
                tool_use_id=payload.get("call_id", ""),
                tool_input=to_claude_input(tool, payload.get("arguments", {}), Path(data["cwd"])),
            )
        if event == "PostToolUse":
            data["tool_response"] = {"text": payload.get("text", ""), "is_error": payload.get("is_error", False)}
        if event == "UserPromptSubmit":
            data["prompt"] = payload.get("text", "")
        if event == "SubagentStop":
            # Claude Code's session_id is the main session's; the subagent is the agent.
            data.update(
                session_id=payload["parent_thread_id"],
                agent_id=payload.get("thread_id", ""),
                agent_transcript_path=data["transcript_path"],
            )
        if event in ("Stop", "SubagentStop"):
            data["stop_hook_active"] = bool(payload.get("stop_hook_active"))
            data["last_assistant_message"] = payload.get("last_message", "")
        if event == "SessionStart":
            data["source"] = payload.get("source", "startup")
        if event == "SessionEnd":
            data["reason"] = payload.get("reason", "other")
        if event == "PreCompact":
            data["trigger"] = payload.get("trigger", "auto")
            data["custom_instructions"] = payload.get("instructions", "")
        return data

    async def run(self, point: HookPoint, payload: dict[str, Any]) -> HookOutcome | None:
        if self.config_error:
            raise HookFailed(f"the [hooks] configuration is invalid, so nothing runs until it is fixed: {self.config_error}")
        event = _EVENT_OF[point]
        if event == "Stop" and payload.get("parent_thread_id"):
            event = "SubagentStop"
        tool = payload.get("tool") if event in ("PreToolUse", "PostToolUse") else None
        thread_id = str(payload.get("thread_id", ""))
        replace: dict[str, Any] = {}
        for hook in self.hooks:
            if hook.event != event or not hook.matches(tool):
                continue
            if hook.kind in ("prompt", "agent") and thread_id in self.hook_threads:
                continue
            current = {**payload, **replace}
            try:
                env = {**self.env, **dict(hook.env)} if hook.env else self.env
                result = await self._execute(hook, event, self._stdin(event, current), env)
            except OSError as exc:
                raise HookFailed(f"{event} hook `{hook.command}` could not start: {exc}") from exc
            outcome = self._interpret(event, hook, result, current, thread_id)
            if outcome.block:
                return outcome
            replace.update(outcome.replace)
        return HookOutcome(replace=replace) if replace else None

    def _interpret(self, event: str, hook: CommandHook, result: HookRun, payload: dict[str, Any], thread_id: str) -> HookOutcome:
        stderr = result.stderr.strip()
        if result.exit_code == 2:
            return self._blocked(event, stderr or f"blocked by hook `{hook.command}`", payload)
        if result.exit_code != 0:
            raise HookFailed(f"{event} hook `{hook.command}` exited with {result.exit_code}: {stderr[-500:]}")
        decision = result.decision()
        specific = decision.get("hookSpecificOutput") or {}
        if decision.get("continue") is False:
            return self._blocked(event, str(decision.get("stopReason") or "stopped by hook"), payload)
        permission = specific.get("permissionDecision") or {"approve": "allow", "block": "deny"}.get(
            str(decision.get("decision", ""))
        )
        # hookify and others put the explanation only in systemMessage (shown to the user)
        reason = str(specific.get("permissionDecisionReason") or decision.get("reason") or decision.get("systemMessage") or "")
        context = str(specific.get("additionalContext") or "")
        if not decision and event in ("UserPromptSubmit", "SessionStart") and not result.stdout.strip().startswith("{"):
            context = result.stdout.strip()  # plain text is context; a JSON object (even {}) is a decision
        replace: dict[str, Any] = {}
        if event == "PreToolUse":
            if permission == "deny":
                return HookOutcome(block=True, reason=reason or f"denied by hook `{hook.command}`")
            if permission in ("allow", "ask"):
                replace["permission"] = permission
            if isinstance(specific.get("updatedInput"), dict):
                replace["arguments"] = from_claude_input(str(payload.get("tool", "")), specific["updatedInput"])
        elif event == "UserPromptSubmit" and decision.get("decision") == "block":
            return HookOutcome(block=True, reason=reason or "prompt blocked by hook")
        elif event in ("Stop", "SubagentStop", "PostToolUse") and decision.get("decision") == "block":
            return self._blocked(event, reason or "blocked by hook", payload)
        if context:
            if event == "PostToolUse":
                replace["text"] = f"{payload.get('text', '')}\n\n[hook context] {context}"
            elif event in ("UserPromptSubmit", "SessionStart"):
                self.context.add(thread_id, event, context)
        return HookOutcome(replace=replace)

    @staticmethod
    def _blocked(event: str, reason: str, payload: dict[str, Any]) -> HookOutcome:
        """What "block" means at each event (Claude Code's exit-code-2 semantics)."""
        if event in ("Stop", "SubagentStop"):
            return HookOutcome(replace={"continue_with": reason})
        if event == "PostToolUse":
            return HookOutcome(replace={"text": f"{payload.get('text', '')}\n\n[hook feedback] {reason}"})
        if event in ("PreToolUse", "UserPromptSubmit"):
            return HookOutcome(block=True, reason=reason)
        log.info("%s hook asked to block, which this event cannot: %s", event, reason)
        return HookOutcome()


class HookContext:
    """additionalContext from SessionStart (kept) and UserPromptSubmit (latest prompt only)."""

    def __init__(self, service_id: str = "hook-context") -> None:
        self._id = service_id
        self._session: dict[str, list[str]] = {}
        self._prompt: dict[str, str] = {}

    def add(self, thread_id: str, event: str, text: str) -> None:
        text = text[:_MAX_CONTEXT_CHARS]
        if event == "SessionStart":
            self._session.setdefault(thread_id, []).append(text)
        else:
            self._prompt[thread_id] = text

    def id(self) -> str:
        return self._id

    async def load_context(self, query: ContextQuery) -> list[ContextBlock]:
        """Session-start context is stable (system prompt); a prompt hook's context belongs to its
        turn (recorded with the turn's message)."""
        blocks = []
        placed: tuple[tuple[list[str], Literal["system", "turn"]], ...] = (
            (self._session.get(query.thread_id, []), "system"),
            (list(filter(None, [self._prompt.get(query.thread_id)])), "turn"),
        )
        for texts, placement in placed:
            if texts:
                blocks.append(
                    ContextBlock(
                        source="hooks",
                        kind="hook-context",
                        priority=70,
                        placement=placement,
                        text="Context added by the user's hooks:\n" + "\n\n".join(texts),
                    )
                )
        return blocks


class CommandHooksExtension(RoderExtension):
    """The ``[hooks]`` of config.toml (a project's only in a trusted folder)."""

    def __init__(self, hooks: CommandHooks) -> None:
        self.hooks = hooks

    def manifest(self) -> ExtensionManifest:
        return ExtensionManifest(
            id="roder-ext-command-hooks",
            name="Command hooks",
            version=__version__,
            api_version=EXTENSION_API_VERSION,
            description="External commands at PreToolUse, PostToolUse, UserPromptSubmit, Stop, ... (Claude Code style)",
            provides=[ProvidedService.Hook("command-hooks"), ProvidedService.ContextProvider("hook-context")],
            required_capabilities=[CapabilityRequest("process.spawn.hooks")],
        )

    def install(self, registry: ServiceRegistrar) -> None:
        registry.hook(self.hooks)
        registry.context_provider(self.hooks.context)


class PluginHooksExtension(RoderExtension):
    """One enabled plugin's hooks and monitors, an extension of their own (``plugin:NAME:hooks``)
    so a plugin change replaces only what changed."""

    def __init__(self, plugin: str, hooks: CommandHooks, monitors: PluginMonitors | None) -> None:
        self.plugin = plugin
        self.hooks = hooks
        self.monitors = monitors

    def manifest(self) -> ExtensionManifest:
        monitors = self.monitors
        return ExtensionManifest(
            id=f"plugin:{self.plugin}:hooks",
            name=f"Hooks of plugin {self.plugin}",
            version=__version__,
            api_version=EXTENSION_API_VERSION,
            description="The hooks and monitors a plugin brings",
            provides=[
                ProvidedService.Hook(self.hooks.id()),
                ProvidedService.ContextProvider(self.hooks.context.id()),
                *(
                    [ProvidedService.Hook(monitors.id()), ProvidedService.ContextProvider(MonitorOutput(monitors).id())]
                    if monitors is not None
                    else []
                ),
            ],
            required_capabilities=[CapabilityRequest("process.spawn.hooks")],
        )

    def install(self, registry: ServiceRegistrar) -> None:
        registry.hook(self.hooks)
        registry.context_provider(self.hooks.context)
        if self.monitors is not None:
            registry.hook(self.monitors)
            registry.context_provider(MonitorOutput(self.monitors))

    def same(self, hooks: list[CommandHook], monitors: list[PluginMonitor]) -> bool:
        return self.hooks.hooks == hooks and (self.monitors.monitors if self.monitors else []) == monitors


class PluginHooksSource(RoderExtension):
    """Makes the ``PluginHooksExtension`` of each enabled plugin with hooks or monitors, at start
    and again after each plugin change (``plugins.sources.PluginExtensionSource``): a plugin
    installed while Roder runs has its hooks at the next event of the next turn."""

    plugin_parts = frozenset({"hooks", "monitors"})

    def __init__(self, host: HostContext, network: AllowlistNetworkBroker) -> None:
        self.host = host
        self.network = network
        self.current: list[RoderExtension] = []

    def manifest(self) -> ExtensionManifest:
        return ExtensionManifest(
            id="roder-ext-plugin-hooks",
            name="Plugins' hooks",
            version=__version__,
            api_version=EXTENSION_API_VERSION,
            description="Loads the hooks and monitors of the enabled plugins, again after each plugin change",
        )

    def install(self, registry: ServiceRegistrar) -> None:
        """Its extensions are installed beside it (``plugin_extensions``)."""

    def refused(self, extension: RoderExtension, reason: str) -> None:
        """Nothing runs until a hook's event: nothing to stop (made again at the next change)."""
        self.current = [e for e in self.current if e is not extension]

    def plugin_extensions(self, active: ActivePlugins) -> list[RoderExtension]:
        before = {e.plugin: e for e in self.current if isinstance(e, PluginHooksExtension)}
        made: list[RoderExtension] = []
        for plugin in active.plugins:
            one = ActivePlugins(plugins=[plugin])
            hooks = plugin_command_hooks(self.host, one)
            monitors = plugin_monitors(one, self.host.cwd)
            if not hooks and not monitors:
                continue
            old = before.get(plugin.name)
            if old is not None and old.same(hooks, monitors):
                made.append(old)
                continue
            service = CommandHooks(
                hooks, self.host.cwd, self.host.env, self.host.secrets, network=self.network, service_id=f"plugin:{plugin.name}"
            )
            made.append(PluginHooksExtension(plugin.name, service, PluginMonitors(monitors, plugin.name) if monitors else None))
        self.current = made
        return made


def plugin_command_hooks(host: HostContext, active: ActivePlugins) -> list[CommandHook]:
    """Command hooks of the enabled plugins (``active``: only while enabled; a trusted project's
    settings count only in a trusted folder), with the plugin's variables (``CLAUDE_PLUGIN_ROOT``,
    ...) in their environment for the shell to expand. A hook with a bad matcher is skipped with
    one log line."""
    found = []
    for hook in plugin_hooks(active, host.cwd):
        pattern = hook.spec.matcher
        try:
            matcher = None if pattern in ("", "*") else re.compile(pattern, re.IGNORECASE)
        except re.error as exc:
            log.warning(
                "plugin %s: %s hook matcher %r is not a valid pattern (%s); skipped", hook.plugin, hook.spec.event, pattern, exc
            )
            continue
        kind = hook.spec.kind
        timeout = hook.spec.timeout or DEFAULT_TIMEOUTS.get(kind, DEFAULT_TIMEOUT)
        env = tuple(sorted(hook.env.items()))
        found.append(CommandHook(hook.spec.event, hook.command, matcher, timeout, env, kind=kind, config=hook.spec.config))
    return found


def configured(host: HostContext) -> CommandHooksExtension | None:
    """The ``[hooks]`` of config.toml, when there are some. A bad [hooks] table fails closed:
    prompts and tool calls are refused with the configuration error (the user relies on their
    guard hooks, so running silently without them would be worse)."""
    try:
        hooks = parse_hooks((host.config.model_extra or {}).get("hooks"))
    except (HookConfigError, TypeError, ValueError) as exc:
        return CommandHooksExtension(CommandHooks([], host.cwd, host.env, host.secrets, config_error=str(exc)))
    return CommandHooksExtension(CommandHooks(hooks, host.cwd, host.env, host.secrets, network=_network(host))) if hooks else None


def _network(host: HostContext) -> AllowlistNetworkBroker:
    return AllowlistNetworkBroker(host.config.network.allow, extension_id="roder-ext-command-hooks")


def create(host: HostContext) -> list[RoderExtension]:
    """The configured hooks and the plugins' hooks, through ``PluginHooksSource``, which makes
    them again when plugins change."""
    hooks = configured(host)
    source = PluginHooksSource(host, _network(host))
    active = active_plugins(host.paths, host.cwd, host.trusted, host.config.model_extra)
    return [*([hooks] if hooks is not None else []), source, *source.plugin_extensions(active)]
