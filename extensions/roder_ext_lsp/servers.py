"""Which language server serves which file: config first, then plugins' ``.lsp.json``, then a
small built-in table of well-known servers (used only when their command is on PATH; nothing is
ever downloaded). When two servers claim an extension, the first one wins."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from typing import Any

from roder_core.settings.config import LspConfig, LspServerConfig


@dataclass(frozen=True)
class ServerSpec:
    name: str
    command: str
    args: tuple[str, ...]
    extension_to_language: dict[str, str]
    source: str
    env: dict[str, str] = field(default_factory=dict)
    initialization_options: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    startup_timeout: float = 30.0
    install_hint: str = ""


#: Well-known servers: (name, command, args, extensions, how to install it).
BUILTIN: tuple[tuple[str, str, tuple[str, ...], dict[str, str], str], ...] = (
    ("pyright", "pyright-langserver", ("--stdio",), {".py": "python", ".pyi": "python"}, "npm install -g pyright"),
    (
        "basedpyright",
        "basedpyright-langserver",
        ("--stdio",),
        {".py": "python", ".pyi": "python"},
        "pip install basedpyright",
    ),
    ("pylsp", "pylsp", (), {".py": "python"}, "pip install python-lsp-server"),
    (
        "typescript",
        "typescript-language-server",
        ("--stdio",),
        {
            ".ts": "typescript",
            ".tsx": "typescriptreact",
            ".js": "javascript",
            ".jsx": "javascriptreact",
            ".mts": "typescript",
            ".cts": "typescript",
            ".mjs": "javascript",
            ".cjs": "javascript",
        },
        "npm install -g typescript typescript-language-server",
    ),
    ("gopls", "gopls", (), {".go": "go"}, "go install golang.org/x/tools/gopls@latest"),
    ("rust-analyzer", "rust-analyzer", (), {".rs": "rust"}, "rustup component add rust-analyzer"),
    ("clangd", "clangd", (), {".c": "c", ".h": "c", ".cpp": "cpp", ".cc": "cpp", ".hpp": "cpp"}, "apt install clangd"),
)


def from_config(name: str, table: LspServerConfig, source: str) -> ServerSpec:
    return ServerSpec(
        name=name,
        command=table.command,
        args=tuple(table.args),
        extension_to_language=dict(table.extension_to_language),
        source=source,
        env=dict(table.env),
        initialization_options=dict(table.initialization_options),
        settings=dict(table.settings),
        startup_timeout=table.startup_timeout,
    )


#: The ``.lsp.json`` keys Roder uses (the others are Claude Code's own lifecycle settings).
PLUGIN_KEYS = frozenset({"command", "args", "extensionToLanguage", "env", "initializationOptions", "settings"})


def from_plugin(plugin: str, name: str, raw: dict[str, Any]) -> ServerSpec | None:
    """A plugin's ``.lsp.json`` / ``lspServers`` entry (startupTimeout in milliseconds there)."""
    try:
        table = LspServerConfig.model_validate(
            {
                k: v
                for k, v in raw.items()
                if k in {"command", "args", "extensionToLanguage", "env", "initializationOptions", "settings"}
            }
        )
    except ValueError:
        return None
    spec = from_config(name, table, f"plugin {plugin}")
    timeout = raw.get("startupTimeout")
    if isinstance(timeout, int | float) and timeout > 0:
        spec = ServerSpec(**{**spec.__dict__, "startup_timeout": float(timeout) / 1000})
    return spec


def available(config: LspConfig, plugin_specs: list[ServerSpec], path: str | None) -> tuple[list[ServerSpec], list[str]]:
    """The servers to use, in order, and a hint per built-in server that is not installed."""
    chosen = [from_config(name, table, "config.toml") for name, table in config.servers.items()]
    chosen += plugin_specs
    hints = []
    if config.builtin:
        for name, command, args, extensions, hint in BUILTIN:
            if shutil.which(command, path=path):
                chosen.append(ServerSpec(name, command, args, dict(extensions), "built-in", install_hint=hint))
            else:
                hints.append(f"{name}: {hint}")
    return chosen, hints


def server_for(specs: list[ServerSpec], suffix: str) -> ServerSpec | None:
    """The first server that claims ``suffix``."""
    return next((spec for spec in specs if suffix in spec.extension_to_language), None)
