"""A plugin's ``userConfig``: the options it declares, the values the user gave, and where they go.

``plugin.json`` declares ``userConfig: {KEY: {type, title, description, sensitive?, required?,
default?, multiple?, min?, max?}}``. The user answers at install (the TUI asks in a dialog, the
CLI with ``--option KEY=VALUE`` or a prompt, the app server in ``plugins/install``'s ``options``).
Non-sensitive values are kept in ``<data dir>/plugins/options.json`` (Claude Code keeps them in
``pluginConfigs``); sensitive ones in the same private ``credentials.json`` that holds provider
keys (``roder_core.settings.credentials``), so they are redacted from transcripts and logs like
a key. The values reach only the plugin's own processes: ``${user_config.KEY}`` is substituted
in its MCP server and hook configurations and each value is exported as
``CLAUDE_PLUGIN_OPTION_<KEY>`` to its hooks and MCP servers; command and skill bodies (which the
model reads) get only non-sensitive values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from roder_core.plugins.records import PluginDirs, read_json, write_json

OptionType = Literal["string", "number", "boolean", "directory", "file"]
OPTION_TYPES: tuple[OptionType, ...] = ("string", "number", "boolean", "directory", "file")
_BY_NAME: dict[str, OptionType] = {name: name for name in OPTION_TYPES}
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PLACEHOLDER = re.compile(r"\$\{user_config\.([A-Za-z_][A-Za-z0-9_]*)\}")
OPTIONS_FILE = "options.json"


class OptionError(ValueError):
    """A value the option cannot take; the message names the plugin option, never a secret value."""


@dataclass(frozen=True)
class OptionSpec:
    key: str
    type: OptionType = "string"
    title: str = ""
    description: str = ""
    sensitive: bool = False
    required: bool = False
    default: Any = None
    multiple: bool = False
    min: float | None = None
    max: float | None = None

    @property
    def label(self) -> str:
        return self.title or self.key

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "key": self.key,
            "type": self.type,
            "title": self.label,
            "description": self.description,
            "sensitive": self.sensitive,
            "required": self.required,
            "multiple": self.multiple,
        }
        if self.default is not None and not self.sensitive:
            data["default"] = self.default
        if self.min is not None:
            data["min"] = self.min
        if self.max is not None:
            data["max"] = self.max
        return data


def parse_user_config(raw: Any, where: str, problems: list[str]) -> dict[str, OptionSpec]:
    """``userConfig`` of a manifest or catalog entry; a bad option is skipped with one line."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        problems.append(f"{where}: 'userConfig' must be an object of options; ignored")
        return {}
    found: dict[str, OptionSpec] = {}
    for key, spec in raw.items():
        if not _KEY.match(str(key)):
            problems.append(f"{where}: userConfig key {key!r} is not a name (letters, digits, _); skipped")
            continue
        if not isinstance(spec, dict):
            problems.append(f"{where}: userConfig {key!r} must be an object; skipped")
            continue
        written = str(spec.get("type") or "string")
        kind = _BY_NAME.get(written)
        if kind is None:
            problems.append(f"{where}: userConfig {key!r} has type {written!r} (use {', '.join(OPTION_TYPES)}); skipped")
            continue
        found[str(key)] = OptionSpec(
            key=str(key),
            type=kind,
            title=str(spec.get("title") or ""),
            description=str(spec.get("description") or ""),
            sensitive=spec.get("sensitive") is True,
            required=spec.get("required") is True,
            default=spec.get("default"),
            multiple=spec.get("multiple") is True,
            min=_number_or_none(spec.get("min")),
            max=_number_or_none(spec.get("max")),
        )
    return found


def _number_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def env_name(key: str) -> str:
    """``CLAUDE_PLUGIN_OPTION_<KEY>`` (upper case)."""
    return "CLAUDE_PLUGIN_OPTION_" + key.upper()


def _one(spec: OptionSpec, plugin: str, value: Any) -> str | float | bool:
    what = f"plugin {plugin}: option {spec.label}"
    if spec.type == "boolean":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "yes", "on", "1"):
            return True
        if text in ("false", "no", "off", "0"):
            return False
        raise OptionError(f"{what} takes true or false")
    if spec.type == "number":
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise OptionError(f"{what} takes a number") from None
        if spec.min is not None and number < spec.min:
            raise OptionError(f"{what} must be at least {spec.min:g}")
        if spec.max is not None and number > spec.max:
            raise OptionError(f"{what} must be at most {spec.max:g}")
        return int(number) if number.is_integer() else number
    if isinstance(value, dict | list):
        raise OptionError(f"{what} takes text")
    text = str(value)
    if spec.type in ("directory", "file"):
        path = Path(text).expanduser()
        if not path.is_absolute():
            raise OptionError(f"{what} takes an absolute path")
        if spec.type == "directory" and not path.is_dir():
            raise OptionError(f"{what}: {path} is not a folder")
        if spec.type == "file" and not path.is_file():
            raise OptionError(f"{what}: {path} is not a file")
        return str(path)
    if spec.min is not None and len(text) < spec.min:
        raise OptionError(f"{what} must be at least {spec.min:g} characters")
    if spec.max is not None and len(text) > spec.max:
        raise OptionError(f"{what} must be at most {spec.max:g} characters")
    return text


def check_values(specs: Mapping[str, OptionSpec], plugin: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The values to store: ``given`` checked against ``specs``, defaults filled in. Raises
    ``OptionError`` naming every missing required option or the first bad value."""
    unknown = sorted(set(given) - set(specs))
    if unknown:
        raise OptionError(f"plugin {plugin} has no option {', '.join(unknown)} (it has: {', '.join(specs) or 'none'})")
    values: dict[str, Any] = {}
    missing = []
    for key, spec in specs.items():
        value = given.get(key, spec.default)
        if value is None or value == "" or value == []:
            if spec.required:
                missing.append(f"{key} ({spec.label})" if spec.title else key)
            continue
        if spec.multiple:
            items = value if isinstance(value, list) else [v for v in str(value).split(",") if v.strip()]
            values[key] = [_one(spec, plugin, item.strip() if isinstance(item, str) else item) for item in items]
        else:
            values[key] = _one(spec, plugin, value)
    if missing:
        raise OptionError(
            f"plugin {plugin} needs its option{'s' if len(missing) > 1 else ''} {', '.join(missing)}: "
            "pass them (--option KEY=VALUE, or options in plugins/install)"
        )
    return values


def text_of(value: Any) -> str:
    """How a value is written into a configuration or an environment variable."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(text_of(v) for v in value)
    return str(value)


def substitute_options(text: str, values: Mapping[str, Any], *, allowed: frozenset[str] | None = None) -> str:
    """Replace ``${user_config.KEY}`` with the stored value; keys outside ``allowed`` (when given)
    and unknown keys are left as written."""

    def replace(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values or (allowed is not None and key not in allowed):
            return match.group(0)
        return text_of(values[key])

    return _PLACEHOLDER.sub(replace, text)


def options_as_variables(text: str, values: Mapping[str, Any]) -> str:
    """``${user_config.KEY}`` turned into ``${CLAUDE_PLUGIN_OPTION_KEY}`` for each option with a
    value: for a shell script, which must read the value from its environment (``option_env``)
    rather than have it pasted in as code."""

    def replace(match: re.Match[str]) -> str:
        key = match.group(1)
        return "${" + env_name(key) + "}" if key in values else match.group(0)

    return _PLACEHOLDER.sub(replace, text)


class OptionStore:
    """Where option values live: plain ones in ``options.json``, sensitive ones in the private
    credentials file (never in the plain file, never in an install record)."""

    def __init__(self, dirs: PluginDirs, env: Mapping[str, str] | None = None) -> None:
        from roder_core.settings.credentials import CredentialStore

        self.file = dirs.root / OPTIONS_FILE
        self.secrets = CredentialStore.for_env(env)

    def plain(self, plugin: str) -> dict[str, Any]:
        data = read_json(self.file, {})
        values = data.get(plugin) if isinstance(data, dict) else None
        return dict(values) if isinstance(values, dict) else {}

    def values(self, plugin: str) -> dict[str, Any]:
        """Every stored value of ``plugin`` (sensitive ones included: only for its own processes)."""
        return {**self.plain(plugin), **self.secrets.plugin_options(plugin)}

    def save(self, plugin: str, specs: Mapping[str, OptionSpec], values: Mapping[str, Any]) -> None:
        plain = {k: v for k, v in values.items() if not specs[k].sensitive}
        secret = {k: text_of(v) for k, v in values.items() if specs[k].sensitive}
        # The secrets first: a running session watches the plain file (``plugin_state_files``), so
        # by the time it sees that change the sensitive values it reloads are already the new ones.
        self.secrets.set_plugin_options(plugin, secret)
        data = read_json(self.file, {})
        data = data if isinstance(data, dict) else {}
        if plain:
            data[plugin] = plain
        else:
            data.pop(plugin, None)
        write_json(self.file, data)

    def forget(self, plugin: str) -> None:
        self.secrets.set_plugin_options(plugin, {})
        data = read_json(self.file, {})
        if isinstance(data, dict) and plugin in data:
            del data[plugin]
            write_json(self.file, data)


def option_env(specs: Mapping[str, OptionSpec], values: Mapping[str, Any]) -> dict[str, str]:
    """``CLAUDE_PLUGIN_OPTION_<KEY>`` for each option with a value (the plugin's processes only)."""
    return {env_name(key): text_of(values[key]) for key in specs if key in values}
