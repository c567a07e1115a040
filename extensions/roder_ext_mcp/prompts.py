"""MCP prompts as slash commands and MCP resources as ``@server:uri`` mentions (as Claude Code does).

A prompt ``review`` of server ``github`` is the command ``/mcp__github__review``; the words after
it fill the prompt's declared arguments in order (the last takes the rest), and the messages the
server returns become the turn's text. A resource is mentioned as ``@github:repo://readme`` and is
attached to the turn as a file.
"""

from __future__ import annotations

import re
from typing import Any

from roder_core.customization.mentions import MentionError
from roder_core.customization.slash_commands import CommandError, CommandInfo, split_arguments
from roder_core.ir import Attachment
from roder_ext_mcp.manager import McpManager, ServerConnection, describe_error

_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def command_name(connection: ServerConnection, prompt: str) -> str:
    return connection.config.tool_prefix + _SAFE.sub("_", prompt)


def _connected(manager: McpManager) -> list[ServerConnection]:
    return [c for c in manager.connections.values() if c.status == "connected"]


def argument_hint(prompt: Any) -> str:
    return " ".join(f"<{a.name}>" if a.required else f"[{a.name}]" for a in (prompt.arguments or []))


def prompt_commands(manager: McpManager) -> list[CommandInfo]:
    return [
        CommandInfo(
            command_name(c, p.name),
            " ".join((p.description or f"MCP prompt {p.name}").split()),
            "prompt",
            argument_hint(p),
            scope=f"mcp:{c.name}",
        )
        for c in _connected(manager)
        for p in c.prompts
    ]


def _find_prompt(manager: McpManager, name: str) -> tuple[ServerConnection, Any]:
    for connection in _connected(manager):
        for prompt in connection.prompts:
            if command_name(connection, prompt.name) == name:
                return connection, prompt
    raise CommandError(f"no MCP prompt /{name} (its server may have disconnected)")


def prompt_arguments(prompt: Any, arguments: str) -> dict[str, str]:
    """Words in declared order; the last declared argument takes the remaining words."""
    declared = list(prompt.arguments or [])
    words = split_arguments(arguments)
    values: dict[str, str] = {}
    for index, argument in enumerate(declared):
        if index >= len(words):
            break
        last = index == len(declared) - 1
        values[argument.name] = " ".join(words[index:]) if last else words[index]
    missing = [a.name for a in declared if a.required and a.name not in values]
    if missing:
        raise CommandError(f"missing argument(s) {', '.join(missing)}; usage: {argument_hint(prompt)}")
    return values


def render_messages(result: Any) -> str:
    """The text of a prompt's messages; embedded resources inline, media noted."""
    parts: list[str] = []
    for message in result.messages:
        content = message.content
        kind = getattr(content, "type", "")
        if kind == "text":
            parts.append(content.text)
        elif kind == "resource":
            text = getattr(content.resource, "text", None)
            parts.append(text if text is not None else f"[binary resource {content.resource.uri}]")
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} from the prompt omitted]")
    return "\n\n".join(p for p in parts if p)


async def expand_prompt(manager: McpManager, name: str, arguments: str) -> str:
    connection, prompt = _find_prompt(manager, name)
    values = prompt_arguments(prompt, arguments)
    try:
        result = await connection.get_prompt(prompt.name, values)
    except Exception as exc:
        raise CommandError(f"/{name}: MCP server {connection.name!r} refused the prompt: {describe_error(exc)}") from exc
    return render_messages(result)


def mention_servers(manager: McpManager) -> set[str]:
    return {c.name for c in manager.connections.values() if c.startable}


def mentions(manager: McpManager) -> list[str]:
    """Resources, then resource templates (``{variable}`` parts for the user to fill in)."""
    resources = [f"{c.name}:{r.uri}" for c in _connected(manager) for r in c.resources]
    return resources + [f"{c.name}:{t.uri_template}" for c in _connected(manager) for t in c.resource_templates]


async def read_mention(manager: McpManager, server: str, uri: str) -> Attachment:
    connection = manager.connections[server]
    try:
        result = await connection.read_resource(uri)
    except Exception as exc:
        raise MentionError(f"@{server}:{uri}: {exc}") from exc
    texts: list[str] = []
    for content in result.contents:
        text = getattr(content, "text", None)
        mime = getattr(content, "mime_type", None) or "text/plain"
        if text is None and mime.startswith("image/"):
            return Attachment(name=f"{server}:{uri}", mime_type=mime, data_base64=content.blob)
        texts.append(text if text is not None else f"[binary content {mime}]")
    mime = next((getattr(c, "mime_type", None) for c in result.contents if getattr(c, "mime_type", None)), None)
    return Attachment(name=f"{server}:{uri}", mime_type=mime or "text/plain", text="\n".join(texts))
