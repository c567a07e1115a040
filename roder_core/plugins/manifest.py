"""``.claude-plugin/marketplace.json`` and ``.claude-plugin/plugin.json``, read tolerantly.

Real catalogs break the rules (unknown keys, ``description`` under ``metadata``, an author
written as a string, a key written twice). Reading never fails for one bad entry: what cannot
be used is skipped with one line in ``problems`` naming the file and the key, the rest loads.
Only a file that is not JSON, or a catalog without a name, is an error.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from roder_core.brokers.project_reader import ProjectReader

SourceKind = Literal["relative", "github", "url", "git-subdir", "npm", "archive", "command"]

#: Names only Anthropic's own catalogs may use (spec section 1).
RESERVED_MARKETPLACES = frozenset(
    {
        "claude-code-marketplace",
        "claude-code-plugins",
        "claude-plugins-official",
        "claude-plugins-community",
        "claude-community",
        "anthropic-marketplace",
        "anthropic-plugins",
        "agent-skills",
        "anthropic-agent-skills",
        "knowledge-work-plugins",
        "life-sciences",
        "claude-for-legal",
        "claude-for-financial-services",
        "financial-services-plugins",
        "first-party-plugins",
        "healthcare",
    }
)
OFFICIAL_MARKETPLACE = "claude-plugins-official"

#: Manifest keys naming components (everything else is metadata).
COMPONENT_KEYS = (
    "skills",
    "commands",
    "agents",
    "hooks",
    "mcpServers",
    "lspServers",
    "roderExtensions",
    "outputStyles",
    "workflows",
)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_-]")
_COMMAND_TIMEOUT_MAX = 600.0


class ManifestError(ValueError):
    """A catalog or manifest that cannot be used at all; the message names the file."""


def plugin_id(name: str, marketplace: str) -> str:
    return f"{name}@{marketplace}"


def split_id(value: str) -> tuple[str, str | None]:
    """``"name@mkt"`` -> ``("name", "mkt")``; ``"name"`` -> ``("name", None)``."""
    name, at, marketplace = value.rpartition("@")
    return (name, marketplace) if at and name else (value, None)


def data_id(identifier: str) -> str:
    """The folder name of a plugin's data dir: ``name@mkt`` with unsafe characters as ``-``."""
    return _UNSAFE_ID.sub("-", identifier)


def valid_name(name: str) -> bool:
    return bool(_NAME.match(name)) and ":" not in name


def load_json(path: Path, problems: list[str]) -> Any:
    """A JSON file, keeping a duplicated key: the last value wins and the repeat is reported,
    except ``hooks``, whose values are all kept (community manifests write it twice)."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in items:
            if key in result:
                if key == "hooks":
                    previous = result[key]
                    result[key] = [*(previous if isinstance(previous, list) else [previous]), value]
                    problems.append(f"{path}: key 'hooks' appears twice; both are loaded")
                    continue
                problems.append(f"{path}: key {key!r} appears twice; the last one is used")
            result[key] = value
        return result

    try:
        text = ProjectReader(path.parent).read_text(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path}: cannot read: {exc}") from exc
    try:
        return json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path}: not valid JSON: {exc}") from exc


# --------------------------------------------------------------------------- sources


@dataclass(frozen=True)
class PluginSource:
    """Where a plugin's files come from (the marketplace entry's ``source``)."""

    kind: SourceKind
    #: relative: the path inside the marketplace; git-subdir/url: the subdirectory.
    path: str = ""
    repo: str = ""
    url: str = ""
    ref: str | None = None
    sha: str | None = None
    package: str = ""
    version: str | None = None
    registry: str | None = None
    sha256: str | None = None
    command: str = ""
    timeout: float = 60.0
    mode: Literal["copy", "link"] = "copy"

    @property
    def external(self) -> bool:
        return self.kind != "relative"

    def describe(self) -> str:
        """One line for people: what is fetched, from where."""
        pin = f"@{self.sha or self.ref}" if (self.sha or self.ref) else ""
        if self.kind == "relative":
            return f"relative path {self.path}"
        if self.kind == "github":
            return f"github {self.repo}{pin}" + (f" ({self.path})" if self.path else "")
        if self.kind in ("url", "git-subdir"):
            return f"git {self.url}{pin}" + (f" path {self.path}" if self.path else "")
        if self.kind == "npm":
            return (
                f"npm {self.package}"
                + (f"@{self.version}" if self.version else "")
                + (f" from {self.registry}" if self.registry else "")
            )
        if self.kind == "archive":
            return f"archive {self.url}" + (f" sha256 {self.sha256[:12]}" if self.sha256 else "")
        return f"command `{self.command}` ({self.mode})"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"source": self.kind}
        for key, value in (
            ("path", self.path),
            ("repo", self.repo),
            ("url", self.url),
            ("ref", self.ref),
            ("sha", self.sha),
            ("package", self.package),
            ("version", self.version),
            ("registry", self.registry),
            ("sha256", self.sha256),
            ("command", self.command),
        ):
            if value:
                data[key] = value
        if self.kind == "command":
            data.update(timeout=self.timeout, mode=self.mode)
        return data


def _string(raw: dict[str, Any], key: str) -> str:
    value = raw.get(key)
    return value.strip() if isinstance(value, str) else ""


def _optional(raw: dict[str, Any], key: str) -> str | None:
    return _string(raw, key) or None


def parse_source(raw: Any, plugin_root: str | None = None) -> PluginSource:
    """A marketplace entry's ``source``; raises ``ManifestError`` for an unusable one."""
    if isinstance(raw, str):
        text = raw.strip()
        if not text:
            raise ManifestError("empty source")
        if text.startswith("./") or text in (".", "./"):
            return _relative(text)
        if "/" not in text and plugin_root:  # a bare name under metadata.pluginRoot
            return _relative(f"{plugin_root.rstrip('/')}/{text}")
        if text.startswith(("https://", "http://", "git@", "file://")):
            return PluginSource("url", url=text)
        if re.fullmatch(r"[A-Za-z0-9-]+/[A-Za-z0-9_.-]+", text):
            return PluginSource("github", repo=text)
        raise ManifestError(f"source {text!r}: relative sources start with ./")
    if not isinstance(raw, dict):
        raise ManifestError("source must be a string or an object")
    kind = _string(raw, "source") or _string(raw, "type")
    ref, sha = _optional(raw, "ref"), _optional(raw, "sha")
    if kind in ("github",):
        repo = _string(raw, "repo")
        if not repo:
            raise ManifestError("github source needs 'repo'")
        return PluginSource("github", repo=repo, ref=ref, sha=sha, path=_string(raw, "path"))
    if kind in ("url", "git"):
        url = _string(raw, "url")
        if not url:
            raise ManifestError(f"{kind} source needs 'url'")
        return PluginSource("url", url=url, ref=ref, sha=sha, path=_string(raw, "path"))
    if kind == "git-subdir":
        url, path = _string(raw, "url"), _string(raw, "path")
        if not url or not path:
            raise ManifestError("git-subdir source needs 'url' and 'path'")
        return PluginSource("git-subdir", url=url, path=path, ref=ref, sha=sha)
    if kind == "npm":
        package = _string(raw, "package")
        if not package:
            raise ManifestError("npm source needs 'package'")
        return PluginSource("npm", package=package, version=_optional(raw, "version"), registry=_optional(raw, "registry"))
    if kind == "archive":
        url = _string(raw, "url")
        if not url:
            raise ManifestError("archive source needs 'url'")
        return PluginSource("archive", url=url, sha256=_optional(raw, "sha256"))
    if kind == "command":
        command = _string(raw, "command")
        if not command:
            raise ManifestError("command source needs 'command'")
        try:
            timeout = min(max(float(raw.get("timeout", 60)), 1.0), _COMMAND_TIMEOUT_MAX)
        except (TypeError, ValueError):
            timeout = 60.0
        mode: Literal["copy", "link"] = "link" if raw.get("mode") == "link" else "copy"
        return PluginSource("command", command=command, timeout=timeout, mode=mode)
    if kind in ("local", "directory", "relative"):
        return _relative(_string(raw, "path") or ".")
    raise ManifestError(f"source type {kind or '(none)'!r} not supported")


def _relative(text: str) -> PluginSource:
    parts = Path(text).parts
    if ".." in parts or text.startswith("/"):
        raise ManifestError(f"source {text!r} leaves the marketplace")
    return PluginSource("relative", path=text)


# --------------------------------------------------------------------------- marketplace


@dataclass
class MarketplaceEntry:
    """One plugin offered by a catalog. ``raw`` keeps every key (component keys included)."""

    name: str
    source: PluginSource
    description: str = ""
    version: str | None = None
    strict: bool = True
    default_enabled: bool | None = None
    category: str = ""
    keywords: list[str] = field(default_factory=list)
    author: str = ""
    homepage: str = ""
    raw: dict[str, Any] = field(default_factory=dict)

    def components(self) -> dict[str, Any]:
        return {key: self.raw[key] for key in COMPONENT_KEYS if key in self.raw}


def entry_of(name: str, recorded: dict[str, Any]) -> MarketplaceEntry:
    """The catalog entry an install record kept (its strict flag, component keys, options and
    dependencies), for reading the installed copy as it was installed."""
    return MarketplaceEntry(
        name=name, source=PluginSource("relative", path="."), strict=bool(recorded.get("strict", True)), raw=recorded
    )


@dataclass
class Marketplace:
    name: str
    root: Path
    owner: str = ""
    description: str = ""
    version: str | None = None
    entries: list[MarketplaceEntry] = field(default_factory=list)
    renames: dict[str, str | None] = field(default_factory=dict)
    #: Marketplaces this catalog's plugins may take dependencies from.
    allow_cross_dependencies: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def entry(self, name: str) -> MarketplaceEntry | None:
        return next((e for e in self.entries if e.name == name), None)

    def resolve_rename(self, name: str) -> str | None:
        """Follow ``renames`` from ``name``: the current name, None when removed; a cycle stops."""
        seen = {name}
        current: str | None = name
        while current is not None and current in self.renames:
            current = self.renames[current]
            if current in seen:
                return name
            if current is not None:
                seen.add(current)
        return current


def boolean(value: Any) -> bool | None:
    """Plugin booleans accept yes/no/on/off/1/0 as well as JSON booleans."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    return None


def author_name(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("name") or "")
    return str(value) if isinstance(value, str) else ""


def _keywords(raw: dict[str, Any]) -> list[str]:
    words: list[str] = []
    for key in ("keywords", "tags"):
        value = raw.get(key)
        if isinstance(value, list):
            words.extend(str(v) for v in value if isinstance(v, str | int))
    return words


def marketplace_file(root: Path) -> Path:
    """The catalog file of a marketplace folder (Claude's place, then Codex's)."""
    for candidate in (".claude-plugin/marketplace.json", ".agents/plugins/marketplace.json", "marketplace.json"):
        if (root / candidate).is_file():
            return root / candidate
    return root / ".claude-plugin" / "marketplace.json"


def load_marketplace(root: Path) -> Marketplace:
    """Read a marketplace folder; raises ``ManifestError`` when it has no usable catalog."""
    path = marketplace_file(root)
    problems: list[str] = []
    if not path.is_file():
        raise ManifestError(f"{root}: no .claude-plugin/marketplace.json")
    return parse_marketplace(load_json(path, problems), root, str(path), problems)


def parse_marketplace(data: Any, root: Path, where: str, problems: list[str] | None = None) -> Marketplace:
    problems = problems if problems is not None else []
    if not isinstance(data, dict):
        raise ManifestError(f"{where}: a marketplace file is a JSON object")
    name = _string(data, "name")
    if not name:
        raise ManifestError(f"{where}: the marketplace has no 'name'")
    if not valid_name(name):
        problems.append(f"{where}: marketplace name {name!r} should be kebab-case")
    raw_metadata = data.get("metadata")
    metadata: dict[str, Any] = raw_metadata if isinstance(raw_metadata, dict) else {}
    market = Marketplace(
        name=name,
        root=root,
        owner=author_name(data.get("owner")),
        description=_string(data, "description") or _string(metadata, "description"),
        version=_optional(data, "version") or _optional(metadata, "version"),
        problems=problems,
    )
    renames = data.get("renames")
    if isinstance(renames, dict):
        market.renames = {str(k): (str(v) if isinstance(v, str) else None) for k, v in renames.items()}
    elif renames is not None:
        problems.append(f"{where}: 'renames' must be an object; ignored")
    cross = data.get("allowCrossMarketplaceDependenciesOn")
    if isinstance(cross, list):
        market.allow_cross_dependencies = [str(c) for c in cross if isinstance(c, str)]
    plugin_root = _optional(metadata, "pluginRoot") or _optional(data, "pluginRoot")
    entries = data.get("plugins")
    if not isinstance(entries, list):
        problems.append(f"{where}: 'plugins' must be a list; the catalog offers nothing")
        entries = []
    seen: set[str] = set()
    for index, raw in enumerate(entries):
        entry = _entry(raw, index, where, plugin_root, problems)
        if entry is None:
            continue
        if entry.name in seen:
            problems.append(f"{where}: plugin {entry.name!r} is listed twice; the first entry is used")
            continue
        seen.add(entry.name)
        market.entries.append(entry)
    return market


def _entry(raw: Any, index: int, where: str, plugin_root: str | None, problems: list[str]) -> MarketplaceEntry | None:
    if not isinstance(raw, dict):
        problems.append(f"{where}: plugins[{index}] is not an object; skipped")
        return None
    name = _string(raw, "name")
    if not name:
        problems.append(f"{where}: plugins[{index}] has no name; skipped")
        return None
    if ":" in name or "/" in name or name in (".", ".."):
        problems.append(f"{where}: plugin name {name!r} has a reserved character; skipped")
        return None
    try:
        source = parse_source(raw.get("source"), plugin_root)
    except ManifestError as exc:
        problems.append(f"{where}: plugin {name!r}: {exc}; skipped")
        return None
    strict = boolean(raw.get("strict", True))
    return MarketplaceEntry(
        name=name,
        source=source,
        description=_string(raw, "description"),
        version=_optional(raw, "version"),
        strict=True if strict is None else strict,
        default_enabled=boolean(raw["defaultEnabled"]) if "defaultEnabled" in raw else None,
        category=_string(raw, "category"),
        keywords=_keywords(raw),
        author=author_name(raw.get("author")),
        homepage=_string(raw, "homepage"),
        raw=raw,
    )


# --------------------------------------------------------------------------- plugin.json


@dataclass
class PluginManifest:
    """A plugin's own ``plugin.json`` (``present`` is False when the plugin has none)."""

    present: bool = False
    name: str = ""
    version: str | None = None
    description: str = ""
    author: str = ""
    keywords: list[str] = field(default_factory=list)
    default_enabled: bool | None = None
    components: dict[str, Any] = field(default_factory=dict)
    #: ``userConfig`` and ``dependencies`` as written (read by ``options`` and ``dependencies``).
    user_config: Any = None
    dependencies: Any = None
    problems: list[str] = field(default_factory=list)


_PATH_KEYS = ("skills", "commands", "agents", "outputStyles", "workflows")


def manifest_file(plugin_dir: Path) -> Path | None:
    for candidate in (".claude-plugin/plugin.json", ".codex-plugin/plugin.json", "plugin.json"):
        if (plugin_dir / candidate).is_file():
            return plugin_dir / candidate
    return None


def load_manifest(plugin_dir: Path) -> PluginManifest:
    """Read ``plugin.json`` if there is one. A key of the wrong type is dropped with a problem
    line (Claude Code refuses the whole plugin; Roder keeps what it can use)."""
    path = manifest_file(plugin_dir)
    manifest = PluginManifest()
    if path is None:
        return manifest
    try:
        data = load_json(path, manifest.problems)
    except ManifestError as exc:
        manifest.problems.append(f"{exc}; the plugin's folders are used without it")
        return manifest
    if not isinstance(data, dict):
        manifest.problems.append(f"{path}: plugin.json is not an object; ignored")
        return manifest
    manifest.present = True
    manifest.name = _string(data, "name")
    version = data.get("version")
    manifest.version = str(version).strip() if isinstance(version, str | int | float) and str(version).strip() else None
    manifest.description = _string(data, "description")
    if isinstance(data.get("author"), str):
        manifest.problems.append(f"{path}: 'author' should be an object {{name, email?, url?}}; the string is used as the name")
    manifest.author = author_name(data.get("author"))
    manifest.keywords = _keywords(data)
    if "defaultEnabled" in data:
        manifest.default_enabled = boolean(data["defaultEnabled"])
    for key in COMPONENT_KEYS:
        if key not in data:
            continue
        value = data[key]
        if key in _PATH_KEYS and not isinstance(value, str | list) and not (key == "commands" and isinstance(value, dict)):
            manifest.problems.append(f"{path}: {key!r} must be a path or a list of paths; ignored")
            continue
        manifest.components[key] = value
    manifest.user_config = data.get("userConfig")
    manifest.dependencies = data.get("dependencies")
    experimental = data.get("experimental")
    if isinstance(experimental, dict):
        for key in ("themes", "monitors"):
            if key in experimental:
                manifest.components[key] = experimental[key]
    return manifest
