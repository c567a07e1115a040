"""Hook handlers that are not commands: ``http``, ``prompt`` and ``agent`` (Claude Code's types).

Each answers in a command hook's terms (an exit code, stdout, stderr) so one interpreter reads
every handler's decision:

- ``http`` POSTs the event's JSON to ``url`` through the network broker (the ``[network] allow``
  list applies; no redirect is followed). Header values may use ``$VAR`` / ``${VAR}`` only for
  the variables named in ``allowedEnvVars`` (others become empty). A 2xx answer with an empty
  body is success, with a JSON object it is a decision like a command's stdout; any other
  answer, a refused host or a connection failure is a failed hook (denied at gating events).
- ``prompt`` asks the thread's model once (a child thread with no tools) to judge the event:
  ``$ARGUMENTS`` in the prompt is replaced by the event's JSON (appended when absent), and the
  model answers ``{"ok": true}`` or ``{"ok": false, "reason": "..."}``; ``ok: false`` blocks
  like exit code 2.
- ``agent`` does the same with a child agent that may use the read-only tools (read, grep,
  glob, ls) to check the work before answering.

Prompt and agent hooks run through the thread's ``ToolHost`` (the runtime binds it), under its
running turn; outside a turn they fail.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from roder_core.brokers import BrokerDenied
from roder_core.brokers.network import AllowlistNetworkBroker
from roder_core.ir import AgentMessageItem
from roder_core.kernel.tools import ToolHost
from roder_core.plugins.components import CLAUDE_MODEL_ALIASES

#: Tools an agent hook may use: it checks, it never changes anything.
READ_ONLY_TOOLS = frozenset({"read", "grep", "glob", "ls"})
_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_ANSWER_RULES = (
    'Answer with only a JSON object: {"ok": true} when it may go on, or {"ok": false, "reason": "why"} '
    "when it must not. No other text."
)


class TypedHookFailed(Exception):
    """The handler could not give an answer; the message says why."""


def header_values(headers: Any, allowed: Any, env: Mapping[str, str]) -> dict[str, str]:
    """Headers with ``$VAR`` filled only from the variables ``allowedEnvVars`` lists."""
    names = {str(n) for n in allowed} if isinstance(allowed, list) else set()

    def fill(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        return env.get(name, "") if name in names else ""

    if not isinstance(headers, dict):
        return {}
    return {str(k): _ENV_REFERENCE.sub(fill, str(v)) for k, v in headers.items()}


async def run_http(
    config: Mapping[str, Any], payload: dict[str, Any], env: Mapping[str, str], network: AllowlistNetworkBroker, timeout: float
) -> tuple[int, str, str]:
    url = str(config.get("url") or "")
    headers = header_values(config.get("headers"), config.get("allowedEnvVars"), env)
    try:
        answer = await network.post_json(url, payload, headers=headers, timeout=timeout)
    except BrokerDenied as exc:
        raise TypedHookFailed(f"http hook refused by the network policy: {exc}") from None
    except Exception as exc:  # connection refused, TLS, timeout: the hook gave no answer
        raise TypedHookFailed(f"http hook {url}: {type(exc).__name__}: {exc}") from None
    if not 200 <= answer.status < 300:
        raise TypedHookFailed(f"http hook {url} answered HTTP {answer.status}")
    body = answer.text.strip()
    if body and not body.startswith("{"):
        raise TypedHookFailed(f"http hook {url} answered something other than a JSON object")
    return 0, body, ""


def judge_prompt(config: Mapping[str, Any], payload: dict[str, Any]) -> str:
    """The hook's prompt with the event filled in, and the answer format."""
    event = json.dumps(payload, ensure_ascii=False, indent=2, default=str)
    prompt = str(config.get("prompt") or "")
    text = prompt.replace("$ARGUMENTS", event) if "$ARGUMENTS" in prompt else f"{prompt}\n\nThe event:\n{event}"
    return f"{text}\n\n{_ANSWER_RULES}"


def verdict(text: str) -> tuple[bool, str]:
    """``{"ok": ..., "reason": ...}`` from the model's answer (the last JSON object in it)."""
    for start in [i for i, ch in enumerate(text) if ch == "{"][::-1]:
        try:
            data, _ = json.JSONDecoder().raw_decode(text[start:])
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict) and isinstance(data.get("ok"), bool):
            return data["ok"], str(data.get("reason") or "")
    raise TypedHookFailed(f"the hook's model did not answer with {{'ok': true|false}}: {text.strip()[:200]!r}")


async def run_model_hook(
    kind: str,
    config: Mapping[str, Any],
    event: str,
    payload: dict[str, Any],
    host_for: Callable[[str], ToolHost | None] | None,
    started: Callable[[str], None],
) -> tuple[int, str, str]:
    """A prompt or agent hook: a child thread of the event's thread judges it. ``started`` learns
    the child's id first, so the hooks leave the child's own events alone (no hook recursion)."""
    thread_id = str(payload.get("session_id") or "")
    if event == "SubagentStop":
        thread_id = str(payload.get("agent_id") or thread_id)
    host = host_for(thread_id) if host_for is not None and thread_id else None
    if host is None:
        raise TypedHookFailed(f"{kind} hook: no turn is running in thread {thread_id or '?'} to ask a model from")
    tools = frozenset(READ_ONLY_TOOLS & set(host.tool_names())) if kind == "agent" else frozenset()
    wanted = str(config.get("model") or "").strip()
    # Claude Code's aliases (haiku, sonnet...) mean nothing to other providers: the thread's model
    model = host.model if not wanted or wanted.lower() in CLAUDE_MODEL_ALIASES else wanted
    title = f"{event} {kind} hook"
    child = await host.start_child_thread(title=title, provider=host.provider, model=model, tools=tools, mode="plan")
    started(child)
    run = await host.run_child_thread(child, judge_prompt(config, payload), lambda _event: None)
    answer = "".join(item.text for item in run.items if isinstance(item, AgentMessageItem))
    ok, reason = verdict(answer)
    return (0, "", "") if ok else (2, "", reason or f"refused by the {kind} hook")
