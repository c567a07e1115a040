"""config.toml: typed reading, comment-preserving writing.

The user file lives at ``RoderPaths.config_file``. A trusted project may add ``.roder/config.toml``
on top (merged table by table); an untrusted one is never read. Extensions own a few tables
(``EXTENSION_TABLES``: ``[mcp]``, ``[hooks]``, ...); any other unknown table or key is an error
naming the nearest valid one (``key_problems``), fatal in the security tables.
"""

# Annotations here are objects, not strings (no ``from __future__ import annotations``): pydantic
# would otherwise compile every field's annotation string again when it builds the models, a
# cost every start-up pays (tests/test_startup_imports.py names the modules kept so).

import contextlib
import os
import stat
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from roder_core.ir import Mode, empty_list
from roder_core.settings.paths import RoderPaths
from roder_core.settings.runners import RunnerConfig

if TYPE_CHECKING:
    from roder_core.brokers.project_reader import ProjectReader

#: Every policy mode, strictest first (``Mode`` is defined once, in the IR).
MODES: tuple[Mode, ...] = tuple(Mode)


class ConfigError(ValueError):
    """config.toml could not be read or holds a wrong value; the message names the key."""


class Section(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class ProviderConfig(Section):
    dialect: Literal["chat-completions", "responses", "anthropic-messages", "mock"] = "chat-completions"
    base_url: str | None = None
    api_key_env: str | None = None
    models: list[str] = Field(default_factory=empty_list)
    default_model: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)


class PolicyConfig(Section):
    allow: list[str] = Field(default_factory=empty_list)
    ask: list[str] = Field(default_factory=empty_list)
    deny: list[str] = Field(default_factory=empty_list)


class FsConfig(Section):
    #: Folders besides the workspace that tools may read and write (and the sandbox binds).
    extra_roots: list[str] = Field(default_factory=empty_list)


class NetworkConfig(Section):
    #: Hosts tools may reach: ``docs.python.org``, ``*.python.org`` or ``*``; empty = no network.
    allow: list[str] = Field(default_factory=empty_list)
    #: Let shell commands reach the network inside the sandbox too (bubblewrap then keeps the
    #: host's network namespace; files stay confined). Batch tasks with ``"network": true`` set it.
    commands: bool = False


class SecretsConfig(Section):
    #: Secret environment variables passed to commands anyway (all others are scrubbed).
    pass_env: list[str] = Field(default_factory=empty_list)


class SandboxingConfig(Section):
    """What the command sandbox hides and lets through (the level itself is ``sandbox``)."""

    #: Files and folders commands may not read, besides the built-in list (``~`` is home).
    deny_read: list[str] = Field(default_factory=empty_list)
    #: Let sandboxed commands create unix sockets (host sockets stay masked).
    allow_unix_sockets: bool = False

    @field_validator("deny_read")
    @classmethod
    def _absolute(cls, value: list[str]) -> list[str]:
        for entry in value:
            if not (entry == "~" or entry.startswith(("~/", "/"))):
                raise ValueError(f"{entry!r} must be an absolute path or start with ~/")
        return value


class LimitsConfig(Section):
    """Resource limits for every command, and for each model response (0 = unlimited)."""

    cpu_seconds: int = Field(default=600, ge=0)
    address_space_mb: int = Field(default=16_384, ge=0)
    file_size_mb: int = Field(default=1_024, ge=0)
    processes: int = Field(default=512, ge=0)
    #: Memory of a command and everything it starts, together (needs a writable cgroup).
    memory_mb: int = Field(default=8_192, ge=0)
    bash_timeout: float = Field(default=120.0, gt=0)
    #: One model response's size as received (its text, reasoning and tool calls, framing
    #: included) and duration: past either it is cut off and the turn fails with the reason.
    response_mb: float = Field(default=16.0, ge=0)
    response_seconds: float = Field(default=3600.0, ge=0)


class ContextConfig(Section):
    auto_compact: bool = True
    reserve_tokens: int = 16_384
    keep_recent_tokens: int = 20_000


class AuthLoginConfig(BaseModel):
    """One ``[auth.NAME]`` table: an OAuth 2.1 sign-in whose token a provider uses as its key.

    Roder ships no client ids: a vendor publishes values for third-party applications or the
    user registers their own, and both go here. Unknown keys are errors (a typo is never ignored).
    """

    model_config = ConfigDict(extra="forbid")

    #: The authorization server; its endpoints are discovered (RFC 8414, then OpenID) unless
    #: ``token_endpoint`` is given.
    issuer: str | None = None
    client_id: str | None = None
    scopes: list[str] = Field(default_factory=empty_list)
    #: "device" (a code typed on another device) or "browser" (PKCE with a loopback redirect);
    #: unset: the device flow where the server offers it, else the browser.
    flow: Literal["device", "browser"] | None = None
    #: The provider whose requests carry the token (``[providers.NAME]`` or a built-in).
    provider: str | None = None
    authorization_endpoint: str | None = None
    token_endpoint: str | None = None
    device_authorization_endpoint: str | None = None
    revocation_endpoint: str | None = None


class ProcessExtensionConfig(BaseModel):
    """One ``[extensions.process.NAME]`` table: an extension in any language, run as a process
    that speaks the extension protocol (docs/extension-protocol.md) on its stdin and stdout."""

    model_config = ConfigDict(extra="forbid")

    #: The program and its arguments (no shell); relative paths are taken from the config's folder.
    command: list[str] = Field(min_length=1)
    #: Capabilities the user grants it: the only ones its process gets (fs.read.workspace,
    #: fs.write.workspace, network.loopback, network.api.HOST, network.web, secret.read.VAR).
    #: A manifest that requires more is refused: the host decides, never the manifest.
    capabilities: list[str] = Field(default_factory=empty_list)
    #: Extra environment variables for the process (secrets still need ``secret.read.VAR``).
    env: dict[str, str] = Field(default_factory=dict)
    #: Seconds one call may take before it fails (the process is then restarted).
    timeout: float = Field(default=60.0, gt=0)
    #: Seconds the process has to announce its manifest.
    startup_timeout: float = Field(default=10.0, gt=0)
    enabled: bool = True


class WasmToolConfig(BaseModel):
    """One ``[extensions.wasm.NAME]`` table: a tool implemented as a WebAssembly module."""

    model_config = ConfigDict(extra="forbid")

    #: The ``.wasm`` (or ``.wat``) file.
    module: str
    #: What the user grants it: ``fs.read.workspace`` (the workspace preopened read-only),
    #: ``fs.write.workspace`` (read-write), ``clock`` (wall-clock time). Nothing else exists for
    #: a module: no network, no environment, no other files.
    capabilities: list[str] = Field(default_factory=empty_list)
    #: Fuel (about one unit per instruction) one call may burn before it is stopped.
    fuel: int = Field(default=2_000_000_000, gt=0)
    #: Memory the module may grow to, in MiB.
    memory_mb: int = Field(default=256, gt=0)
    #: Seconds of wall time one call may take.
    timeout: float = Field(default=30.0, gt=0)
    enabled: bool = True


class ExtensionsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    process: dict[str, ProcessExtensionConfig] = Field(default_factory=dict)
    #: ``[extensions.wasm.NAME]``: WebAssembly tools (``roder_ext_wasm``).
    wasm: dict[str, WasmToolConfig] = Field(default_factory=dict)


class LspServerConfig(BaseModel):
    """One ``[lsp.servers.NAME]`` table (the shape of a plugin's ``.lsp.json`` entry)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    command: str
    args: list[str] = Field(default_factory=empty_list)
    #: File extension -> LSP language id, e.g. ``{".py" = "python"}``.
    extension_to_language: dict[str, str] = Field(alias="extensionToLanguage")
    env: dict[str, str] = Field(default_factory=dict)
    initialization_options: dict[str, Any] = Field(default_factory=dict, alias="initializationOptions")
    settings: dict[str, Any] = Field(default_factory=dict)
    #: Seconds the server has to answer ``initialize``.
    startup_timeout: float = Field(default=30.0, gt=0)


class LspConfig(BaseModel):
    """``[lsp]``: language servers that tell the model what its edits broke."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    #: Seconds to wait for a server's diagnostics after an edit before answering without them.
    diagnostics_timeout: float = Field(default=10.0, gt=0)
    #: After a server's first diagnostics for an edit, wait this long for more (a later pass).
    settle_seconds: float = Field(default=1.0, ge=0)
    #: A server with no request for this many seconds is stopped (started again on next use).
    idle_seconds: float = Field(default=600.0, gt=0)
    #: Use the built-in table of servers found on PATH (pyright, typescript-language-server, ...).
    builtin: bool = True
    servers: dict[str, LspServerConfig] = Field(default_factory=dict)


#: Tables where an ignored mistake weakens a protection: an unknown key in one, or an unknown
#: table whose nearest valid name is one of them (``[polcy]``), stops Roder before it starts.
#: There is no ``[trust]`` table (folders are trusted with ``roder trust``); writing one is
#: such a mistake too.
SECURITY_TABLES = frozenset({"policy", "sandboxing", "network", "limits", "trust"})
#: Top-level tables owned and checked by extensions and the terminal client.
EXTENSION_TABLES = frozenset({"mcp", "hooks", "plugins", "keys"})


class RoderConfig(Section):
    provider: str | None = None
    model: str | None = None
    mode: Mode = Mode.ASK
    sandbox: Literal["workspace-write", "read-only", "off"] | None = None
    theme: str = "roder-dark"
    #: Inline image previews in the TUI: "auto" (told from the terminal), "kitty", "sixel" or "off".
    image_preview: Literal["auto", "kitty", "sixel", "off"] = "auto"
    max_iterations: int = 200
    hook_timeout: float = 30.0
    approval_timeout: float = 600.0
    web_search: str = "off"
    #: Reasoning effort sent to models that support it (low, medium, high, ...); None: the engine's default.
    reasoning_effort: str | None = None
    #: Ask the model for its output tokens' log probabilities, with this many alternatives each
    #: (0: the sampled token only). Chat Completions and Responses providers return them; they
    #: are kept per model call in the thread (``thread/tokenUsage/updated``) and in trajectories.
    logprobs: int | None = Field(default=None, ge=0, le=20)
    #: Ask the server for the token ids of each call's prompt and answer (vLLM's
    #: ``return_token_ids``); kept per model call like ``logprobs``.
    token_ids: bool = False
    providers: dict[str, ProviderConfig] = Field(default_factory=dict)
    models_override: dict[str, dict[str, Any]] = Field(default_factory=dict, alias="models")
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    fs: FsConfig = Field(default_factory=FsConfig)
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    secrets: SecretsConfig = Field(default_factory=SecretsConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    sandboxing: SandboxingConfig = Field(default_factory=SandboxingConfig)
    context: ContextConfig = Field(default_factory=ContextConfig)
    #: ``[runners.NAME]``: where threads' tools may execute (``roder_core.settings.runners``).
    runners: dict[str, RunnerConfig] = Field(default_factory=dict)
    #: ``[auth.NAME]``: OAuth sign-ins (``auth/codex/*``, ``auth/supergrok/*``, ``roder providers login NAME``).
    auth: dict[str, AuthLoginConfig] = Field(default_factory=dict)
    #: ``[extensions.process.NAME]`` and ``[extensions.wasm.NAME]``: extensions in other languages.
    extensions: ExtensionsConfig = Field(default_factory=ExtensionsConfig)
    #: ``[lsp]``: language servers (``roder_ext_lsp``).
    lsp: LspConfig = Field(default_factory=LspConfig)
    #: Unknown tables and keys outside the security tables (``key_problems``): shown as warnings.
    _problems: list[str] = PrivateAttr(default_factory=list)

    @property
    def problems(self) -> list[str]:
        return self._problems

    @problems.setter
    def problems(self, lines: list[str]) -> None:
        self._problems = list(lines)


def nearest(name: str, valid: Iterable[str]) -> str | None:
    """The valid name closest to a misspelt one, if any is close."""
    import difflib

    found = difflib.get_close_matches(name, sorted(valid), n=1, cutoff=0.6)
    return found[0] if found else None


def did_you_mean(near: str | None) -> str:
    return f"; did you mean {near!r}?" if near else ""


def key_problems(data: Mapping[str, Any]) -> list[tuple[str, bool]]:
    """Unknown tables and keys of a config.toml as (one-line message, in a security table).
    Provider, runner and model tables are checked by their own models (a broken provider table
    disables that provider alone); extension tables by their extensions."""
    fields = {(info.alias or name): info for name, info in RoderConfig.model_fields.items()}
    top = set(fields) | EXTENSION_TABLES
    found: list[tuple[str, bool]] = []
    for key, value in data.items():
        if key in EXTENSION_TABLES:
            continue
        info = fields.get(key)
        if info is None:
            near = nearest(key, top)
            kind = "table" if isinstance(value, dict) else "key"
            found.append((f"unknown {kind} [{key}]{did_you_mean(near)}", key in SECURITY_TABLES or near in SECURITY_TABLES))
            continue
        model = info.annotation
        if isinstance(model, type) and issubclass(model, Section) and isinstance(value, dict):
            known = {(f.alias or n) for n, f in model.model_fields.items()}
            for inner in value:
                if inner not in known:
                    line = f"unknown key {inner!r} in [{key}]{did_you_mean(nearest(inner, known))}"
                    if inner in top:
                        line += " (TOML puts every key written after a [table] header into that table: move it above)"
                    found.append((line, key in SECURITY_TABLES))
    return found


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        elif isinstance(value, list) and isinstance(merged.get(key), list):
            merged[key] = [*merged[key], *[v for v in value if v not in merged[key]]]
        else:
            merged[key] = value
    return merged


def read_toml(path: Path) -> dict[str, Any]:
    """Parse the user's config file into plain Python data; a missing file is an empty table.

    The one reader of that file: whatever stands in its place (a folder, a file this user may not
    read, text that is not UTF-8, broken TOML) is a ``ConfigError`` naming the file and what is
    wrong with it, one line, never a traceback. Reading uses the standard library's parser;
    tomlkit (kept for editing, where comments and layout must survive) costs far more to import
    and is only loaded to write.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"{path}: not read: {os_reason(exc)}") from exc
    return parse_toml(path, data)


def os_reason(exc: OSError) -> str:
    """What went wrong, in words (``[Errno 13] Permission denied: 'x'`` becomes ``permission denied``)."""
    if isinstance(exc, IsADirectoryError):
        return "it is a folder, not a file"
    return (exc.strerror or str(exc)).lower()


def parse_toml(path: Path, data: bytes) -> dict[str, Any]:
    """A config file's bytes as TOML data (a leading byte-order mark is dropped); text that is
    not UTF-8 or not TOML is a ``ConfigError`` naming the file and the place."""
    import tomllib

    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); save it as UTF-8"
        ) from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def config_reader(
    root: Path, config: RoderConfig, paths: RoderPaths | None = None, env: Mapping[str, str] | None = None
) -> "ProjectReader":
    """The project reader (``brokers.project_reader``) for ``root`` with ``config``'s secret masks
    (``[sandboxing] deny_read``) and read rules (``[policy]``)."""
    from roder_core.brokers.path_rules import ConfigReadRules
    from roder_core.brokers.project_reader import project_reader

    rules = ConfigReadRules(config.policy.ask, config.policy.deny)
    return project_reader(root, paths=paths, env=env, deny_read=config.sandboxing.deny_read, rules=rules)


def project_config_file(project: Path) -> Path:
    """A project's own config file (read only when the folder is trusted)."""
    return project / ".roder" / "config.toml"


def read_project_toml(project: Path, user: RoderConfig, paths: RoderPaths) -> dict[str, Any]:
    """A trusted project's ``.roder/config.toml``, read through the project reader (a link out
    of the project, a secret or a withheld file is an error naming it, never read)."""
    from roder_core.brokers.project_reader import ProjectFileRefused

    path = project_config_file(project)
    try:
        data = config_reader(project, user, paths).read_bytes(path)
    except FileNotFoundError:
        return {}
    except ProjectFileRefused as exc:
        raise ConfigError(f"{path}: not read: {str(exc).removeprefix(f'{path}: ')}") from exc
    return parse_toml(path, data)


def load_config(paths: RoderPaths, project: Path | None = None, trusted: bool = False) -> RoderConfig:
    """The effective config: user file, then the project's ``.roder/config.toml`` if trusted.

    The user's file is checked on its own first; the merge is then checked naming the project's
    file (the user's alone was valid, so what is wrong now came with the project), and the
    project's unknown keys are listed against it. The project's file is never validated alone:
    it may change one key of a table the user's file declares in full (``enabled = false`` for
    a process extension whose ``command`` is the user's)."""
    data = read_toml(paths.config_file)
    config = _validated(data, paths.config_file)
    if project is None or not trusted:
        return config
    project_data = read_project_toml(project, config, paths)
    if not project_data:
        return config
    source = project_config_file(project)
    merged = _validated(_merge(data, project_data), source)
    merged.problems = [*config.problems, *(f"{source}: {line}" for line, _security in key_problems(project_data))]
    return merged


def _validated(data: dict[str, Any], source: Path) -> RoderConfig:
    """The config of ``data``; unknown tables and keys are errors naming the nearest valid one:
    in a security table Roder refuses to start (``ConfigError``), elsewhere the line is kept in
    ``RoderConfig.problems`` and shown as a warning."""
    problems = key_problems(data)
    fatal = [line for line, security in problems if security]
    if fatal:
        raise ConfigError(f"{source}: {fatal[0]} (Roder will not start with a security setting it would ignore)")
    try:
        config = RoderConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"{source}: {where}: {first['msg']}") from exc
    config.problems = [f"{source}: {line}" for line, _security in problems]
    return config


class ConfigWriter:
    """Edits the user's config.toml in place with tomlkit, keeping comments and layout.

    Every edit is one chokepoint (``_edit``): under an exclusive lock beside the file, the file is
    read afresh, changed and written back, so two processes editing at once keep both changes.
    A symlinked config.toml (a dotfiles checkout) is written through the link, at its target; the
    file keeps its mode (0600 stays 0600); the new text goes to a temporary file in the target's
    folder, synced, then renamed over the target, so a crash leaves the old file or the new one."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def set(self, dotted_key: str, value: Any) -> None:
        """Set ``a.b.c = value``, creating tables as needed."""
        *tables, leaf = dotted_key.split(".")

        def change(doc: Any) -> bool:
            _table(doc, tables)[leaf] = value
            return True

        self._edit(change)

    def append_unique(self, dotted_key: str, value: str) -> bool:
        """Append to a list (``policy.allow``) unless present; True when it was added."""
        import tomlkit

        *tables, leaf = dotted_key.split(".")

        def change(doc: Any) -> bool:
            node = _table(doc, tables)
            current = node.get(leaf)
            if current is None:
                current = tomlkit.array()
                node[leaf] = current
            if value in current:
                return False
            current.append(value)
            return True

        return self._edit(change)

    def _edit(self, change: Callable[[Any], bool]) -> bool:
        """Apply ``change`` to the current document under the lock; write when it says it changed."""
        import fcntl

        import tomlkit

        target = Path(os.path.realpath(self.path))
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target.with_name(f".{target.name}.lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                text = target.read_text(encoding="utf-8")
                mode = stat.S_IMODE(target.stat().st_mode)
            except FileNotFoundError:
                text, mode = "", 0o600
            doc = tomlkit.parse(text)
            if not change(doc):
                return False
            _replace_atomically(target, tomlkit.dumps(doc), mode)
            return True


def _table(doc: Any, names: list[str]) -> Any:
    """The (nested) table ``names`` of ``doc``, created where missing."""
    import tomlkit

    node = doc
    for name in names:
        if name not in node:
            node[name] = tomlkit.table()
        node = node[name]
    return node


def _replace_atomically(target: Path, text: str, mode: int) -> None:
    """Write ``text`` to a temporary file beside ``target`` with ``mode``, sync it, rename it over."""
    import tempfile

    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            os.fchmod(out.fileno(), mode)
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
