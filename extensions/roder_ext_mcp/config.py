"""MCP server definitions: ``[mcp.servers.NAME]`` in config.toml and a trusted project's ``.mcp.json``.

config.toml::

    [mcp.servers.github]
    command = "npx"
    args = ["-y", "@modelcontextprotocol/server-github"]
    env = { GITHUB_TOKEN = "${GITHUB_TOKEN}" }

    [mcp.servers.docs]
    url = "https://example.com/mcp"
    headers = { Authorization = "Bearer ${DOCS_TOKEN}" }

``.mcp.json`` uses the format other agents share: ``{"mcpServers": {"NAME": {...}}}`` with the
same keys (``type`` is optional: ``stdio``, ``http``/``streamable-http`` or ``sse``). Strings may
use ``${VAR}`` and ``${VAR:-default}``; a variable that is unset and has no default makes that one
server fail with a message naming the variable, never the whole config. A project server with
the same name as a user server replaces it (the project is trusted, or it is not read at all).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from roder_core.brokers.data_paths import component
from roder_core.brokers.project_reader import ProjectFileRefused, project_reader
from roder_core.errors import UnsafePathError
from roder_core.policy.shell_argv import script_index

Transport = Literal["stdio", "http", "sse"]
SamplingPolicy = Literal["ask", "allow", "deny"]
SAMPLING_POLICIES: tuple[SamplingPolicy, ...] = ("ask", "allow", "deny")
#: ``logging/setLevel`` levels (RFC 5424, as the spec names them).
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

#: Longest the first turn waits for connecting servers (kept under the default hook timeout).
MAX_STARTUP_WAIT = 25.0

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*?))?\}")
_SAFE_NAME = re.compile(r"[^A-Za-z0-9_-]")
_SAFE_TOOL = re.compile(r"[^A-Za-z0-9_.-]")
#: The longest tool name providers take.
MAX_TOOL_NAME = 64


def _hashed(name: str, original: str) -> str:
    """``name`` cut to fit with a hash of ``original``, so distinct originals stay distinct."""
    digest = hashlib.sha256(original.encode()).hexdigest()[:8]
    return f"{name[: MAX_TOOL_NAME - 9]}_{digest}"


def tool_names(prefix: str, mcp_names: list[str]) -> dict[str, str]:
    """Each of a server's tool names as Roder offers it: ``prefix`` + the name with characters
    providers refuse turned into ``_``. Names that would come out the same (``café`` and ``cafè``,
    ``a b`` and ``a_b``) get a hash of the server's own name, and names longer than 64
    characters are cut and get a hash, so every tool of the server stays callable, whatever
    order the server lists them in."""
    plain = {name: prefix + _SAFE_TOOL.sub("_", name) for name in mcp_names}
    counts = Counter(plain.values())
    names: dict[str, str] = {}
    for name, safe in plain.items():
        if counts[safe] > 1:
            names[name] = _hashed(safe, prefix + name)
        elif len(safe) > MAX_TOOL_NAME:
            names[name] = _hashed(safe, safe)
        else:
            names[name] = safe
    return names


class McpConfigError(ValueError):
    """A server definition is wrong; the message names the server and the key."""


def expand_vars(value: str, env: Mapping[str, str], where: str) -> str:
    """``${VAR}`` and ``${VAR:-default}`` from ``env``; an unset VAR without default is an error."""

    def sub(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        found = env.get(name)
        if found is not None and (found != "" or default is None):
            return found
        if default is not None:
            return default
        raise McpConfigError(f"{where}: environment variable {name} is not set (use ${{{name}:-default}})")

    return _VAR.sub(sub, value)


def script_variables(script: str, env: Mapping[str, str], where: str) -> tuple[tuple[str, str], ...]:
    """The variables a shell's ``-c`` script names, for its environment: the script keeps
    ``${VAR}`` and ``${VAR:-default}`` for the shell to expand (pasted in, a value holding
    ``$(...)`` or ``;`` would be code); an unset VAR without default is an error, as elsewhere."""
    exported: dict[str, str] = {}
    for match in _VAR.finditer(script):
        name, default = match.group(1), match.group(2)
        if name in env:
            exported[name] = env[name]
        elif default is None:
            raise McpConfigError(f"{where}: environment variable {name} is not set (use ${{{name}:-default}})")
    return tuple(exported.items())


@dataclass(frozen=True)
class ServerConfig:
    name: str
    transport: Transport
    origin: str  # "config" or the path of the .mcp.json
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    enabled: bool = True
    startup_timeout: float = 30.0
    tool_timeout: float = 600.0
    #: Tools of this server the user declares read-only (run in plan mode, no approval in ask).
    read_only_tools: frozenset[str] = frozenset()
    #: What a ``sampling/createMessage`` request from this server gets: ``ask`` (an approval that
    #: shows the request), ``allow`` (run on the user's model without asking) or ``deny``.
    sampling: SamplingPolicy = "ask"
    #: The most tokens a sampling request may ask for; larger requests are refused.
    sampling_max_tokens: int = 4096
    #: The level sent with ``logging/setLevel`` when the server offers logging.
    log_level: str = "warning"
    #: An HTTP server's OAuth client id (``oauth.client_id``); without one Roder registers
    #: itself (RFC 7591) when the server asks for a sign-in.
    oauth_client_id: str | None = None
    #: Scopes to ask for (``oauth.scopes``); by default those the server's 401 or metadata names.
    oauth_scopes: tuple[str, ...] = ()
    #: Why the definition cannot be used (unset variable, bad key); shown as the server's error.
    error: str | None = None

    @property
    def tool_prefix(self) -> str:
        return f"mcp__{_SAFE_NAME.sub('_', self.name)}__"

    def identity(self) -> str:
        """What the user approves on first use: the name plus what actually runs or is reached."""
        target = self.url if self.transport != "stdio" else " ".join([self.command, *self.args])
        return hashlib.sha256(f"{self.name}\0{self.transport}\0{target}".encode()).hexdigest()[:32]

    def describe(self) -> str:
        if self.transport == "stdio":
            return " ".join([self.command, *self.args])
        return f"{self.transport} {self.url}"


@dataclass
class McpSettings:
    servers: dict[str, ServerConfig] = field(default_factory=dict)
    #: Seconds the first turn waits for servers still connecting.
    startup_wait: float = 5.0
    #: Folders offered to every server as roots besides the workspace (``[mcp] roots``).
    roots: tuple[Path, ...] = ()
    problems: list[str] = field(default_factory=list)


def _str_map(value: Any, where: str, env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise McpConfigError(f"{where}: must be a table of strings")
    return tuple((str(k), expand_vars(str(v), env, f"{where}.{k}")) for k, v in value.items())


def _seconds(raw: dict[str, Any], key: str, default: float) -> float:
    """A timeout under its Roder name or Codex's ``<key>_sec`` spelling."""
    value: Any = raw.get(key, raw.get(f"{key}_sec", default))
    return float(value)


def _client_features(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """The sampling policy and limit, the log level and the OAuth client, checked."""
    sampling = str(raw.get("sampling", "ask")).lower()
    if sampling not in SAMPLING_POLICIES:
        raise McpConfigError(f"{where}: sampling must be one of {', '.join(SAMPLING_POLICIES)}, not {sampling!r}")
    limit = raw.get("sampling_max_tokens", 4096)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise McpConfigError(f"{where}: sampling_max_tokens must be a positive whole number")
    level = str(raw.get("log_level", "warning")).lower()
    if level not in LOG_LEVELS:
        raise McpConfigError(f"{where}: log_level must be one of {', '.join(LOG_LEVELS)}, not {level!r}")
    oauth = raw.get("oauth") or {}
    if not isinstance(oauth, dict):
        raise McpConfigError(f"{where}: oauth must be a table (client_id, scopes)")
    client_id = oauth.get("client_id", oauth.get("clientId"))
    scopes = oauth.get("scopes", [])
    if client_id is not None and (not isinstance(client_id, str) or not client_id.strip()):
        raise McpConfigError(f"{where}: oauth.client_id must be a non-empty string")
    if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
        raise McpConfigError(f"{where}: oauth.scopes must be a list of strings")
    return {
        "sampling": sampling,
        "sampling_max_tokens": limit,
        "log_level": level,
        "oauth_client_id": client_id.strip() if client_id else None,
        "oauth_scopes": tuple(scopes),
    }


def parse_server(name: str, raw: Any, origin: str, env: Mapping[str, str]) -> ServerConfig:
    """One server definition; an unusable one comes back with ``error`` set."""
    where = f"mcp server {name!r} ({origin})"
    if not isinstance(raw, dict):
        return ServerConfig(name, "stdio", origin, error=f"{where}: must be a table")
    try:  # it names the server's log file in Roder's cache: one plain name, never a path
        component(name, "MCP server name")
    except UnsafePathError as exc:
        return ServerConfig(name, "stdio", origin, error=f"{where}: {exc}")
    kind = str(raw.get("type") or raw.get("transport") or "").lower()
    transport: Transport = "stdio"
    if kind in ("http", "streamable-http", "streamable_http", "streamablehttp"):
        transport = "http"
    elif kind == "sse":
        transport = "sse"
    elif kind in ("", "stdio"):
        transport = "http" if raw.get("url") and not raw.get("command") else "stdio"
    else:
        return ServerConfig(name, "stdio", origin, error=f"{where}: unknown type {kind!r} (stdio, http or sse)")
    common: dict[str, Any] = {
        "enabled": bool(raw.get("enabled", not raw.get("disabled", False))),
        "startup_timeout": _seconds(raw, "startup_timeout", 30.0),
        "tool_timeout": _seconds(raw, "tool_timeout", 600.0),
        "read_only_tools": frozenset(str(t) for t in raw.get("read_only_tools", [])),
    }
    try:
        common.update(_client_features(raw, where))
        if transport == "stdio":
            command = raw.get("command")
            if not command or not isinstance(command, str):
                raise McpConfigError(f"{where}: needs 'command' (stdio) or 'url' (http)")
            args = raw.get("args", [])
            if not isinstance(args, list):
                raise McpConfigError(f"{where}: 'args' must be a list of strings")
            program = expand_vars(command, env, f"{where}.command")
            script = script_index([program, *map(str, args)])
            filled = [str(a) if n + 1 == script else expand_vars(str(a), env, f"{where}.args") for n, a in enumerate(args)]
            exported = script_variables(filled[script - 1], env, f"{where}.args") if script is not None else ()
            return ServerConfig(
                name,
                "stdio",
                origin,
                command=program,
                args=tuple(filled),
                env=(*exported, *_str_map(raw.get("env"), f"{where}.env", env)),
                cwd=expand_vars(str(raw["cwd"]), env, f"{where}.cwd") if raw.get("cwd") else None,
                **common,
            )
        url = raw.get("url")
        if not url or not isinstance(url, str):
            raise McpConfigError(f"{where}: needs 'url'")
        return ServerConfig(
            name,
            transport,
            origin,
            url=expand_vars(url, env, f"{where}.url"),
            headers=_str_map(raw.get("headers"), f"{where}.headers", env),
            **common,
        )
    except (McpConfigError, TypeError, ValueError) as exc:
        return ServerConfig(
            name,
            transport,
            origin,
            command=str(raw.get("command") or ""),
            url=str(raw.get("url") or ""),
            error=str(exc),
            **common,
        )


def add_plugin_server(
    settings: McpSettings, server_id: str, raw: dict[str, Any], origin: str, env: Mapping[str, str], variables: Mapping[str, str]
) -> None:
    """A plugin's server, named ``plugin:<plugin>:<server>`` (its tools are then
    ``mcp__plugin_<plugin>_<server>__<tool>``). ``${CLAUDE_PLUGIN_ROOT}`` and the other plugin
    variables expand like environment variables and are exported to the server. It never
    replaces a user's server of the same short name (the ids differ). An empty ``url`` means
    "not configured": the server is listed as disabled."""
    if "url" in raw and not str(raw.get("url") or "").strip() and not raw.get("command"):
        settings.servers[server_id] = ServerConfig(server_id, "http", origin, enabled=False, error=None)
        settings.problems.append(f"mcp server {server_id!r} ({origin}): no url configured; not started")
        return
    config = parse_server(server_id, raw, origin, {**env, **variables})
    if config.transport == "stdio" and config.error is None:
        config = dataclasses.replace(config, env=(*tuple(variables.items()), *config.env))
    settings.servers[server_id] = config


def load_settings(config_extra: Mapping[str, Any] | None, project: Path, trusted: bool, env: Mapping[str, str]) -> McpSettings:
    """User servers from config.toml (already merged with a trusted project's .roder/config.toml),
    then a trusted project's ``.mcp.json``."""
    settings = McpSettings()
    section = (config_extra or {}).get("mcp") or {}
    if not isinstance(section, dict):
        settings.problems.append("config.toml: [mcp] must be a table")
        section = {}
    if "startup_wait" in section:
        # capped below the hook timeout: the wait runs in a gating hook, which must never time out
        settings.startup_wait = min(max(float(section["startup_wait"]), 0.0), MAX_STARTUP_WAIT)
    roots = section.get("roots") or []
    try:
        if not isinstance(roots, list) or not all(isinstance(r, str) for r in roots):
            raise McpConfigError("config.toml: [mcp] roots must be a list of folders")
        settings.roots = tuple(Path(expand_vars(r, env, "[mcp] roots")).expanduser() for r in roots)
    except McpConfigError as exc:
        settings.problems.append(str(exc))
    servers = section.get("servers") or {}
    if not isinstance(servers, dict):
        settings.problems.append("config.toml: [mcp.servers] must be a table of servers")
        servers = {}
    for name, raw in servers.items():
        settings.servers[name] = parse_server(name, raw, "config.toml", env)
    if trusted:
        _load_project_file(project / ".mcp.json", settings, env)
    return settings


def _load_project_file(path: Path, settings: McpSettings, env: Mapping[str, str]) -> None:
    """A trusted project's ``.mcp.json``, through the project reader (a link out of the project,
    a secret or a FIFO is a problem naming it, never read)."""
    try:
        data = json.loads(project_reader(path.parent, env=env).read_text(path))
    except FileNotFoundError:
        return
    except (ProjectFileRefused, OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        settings.problems.append(f"{path}: cannot read: {exc}")
        return
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        settings.problems.append(f'{path}: expected {{"mcpServers": {{...}}}}')
        return
    for name, raw in servers.items():
        settings.servers[name] = parse_server(name, raw, str(path), env)
