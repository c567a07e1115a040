"""One way to turn command-line style settings into a running Runtime.

The TUI, one-shot mode, the app server, ACP and batch workers all start here, so a flag means
the same thing everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roder_core.errors import UnknownProviderError
from roder_core.kernel.distribution import Distribution, ExtensionFactory, build_distribution, make_host
from roder_core.runtime.options import RuntimeOptions
from roder_core.runtime.runtime import Runtime
from roder_core.settings.config import ProviderConfig


@dataclass
class StartSettings:
    cwd: Path | None = None
    provider: str | None = None
    model: str | None = None
    mode: str | None = None
    sandbox: str | None = None
    profile: str = "developer"
    #: None: use the stored trust decision (interactive only); headless callers pass False
    #: unless the user gave --trust.
    trust: bool | None = None
    interactive: bool = True
    max_iterations: int | None = None
    env: Mapping[str, str] | None = None
    #: Keep threads and other data of this run here instead of the user's data dir (batch rollouts).
    data_dir: Path | None = None
    #: ``data_dir`` is removed after the run: its thread store keeps no index.
    scratch_data: bool = False
    #: Grant this run the network (a batch task's ``"network": true``): commands keep it inside
    #: the sandbox and web tools may reach any host (if the profile grants them at all).
    network: bool = False
    #: The environment the agent's commands inherit when it must differ from ``env`` (a batch
    #: rollout's allowlist); None: ``env`` scrubbed of secrets.
    command_env: Mapping[str, str] | None = None
    #: Paths the command sandbox hides from the agent's commands (a batch: credential files).
    hidden_paths: tuple[Path, ...] = ()
    #: Ask for token log probabilities (a batch task's ``logprobs``); None: config.toml decides.
    logprobs: int | None = None
    #: Ask for prompt and answer token ids (a batch task's ``token_ids``); False: config.toml decides.
    token_ids: bool = False
    #: ``[providers.NAME]`` and ``[models."..."]`` tables that win over this machine's config.toml
    #: (a batch's resolved provider, without keys, on a Ray node whose config lacks it).
    provider_tables: Mapping[str, Mapping[str, Any]] | None = None
    model_tables: Mapping[str, Mapping[str, Any]] | None = None
    #: Secrets the embedder knows of, by label (the app server's ``--auth-token``): redacted
    #: like the others and scrubbed by value from every process Roder starts, from the first.
    secrets: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Started:
    runtime: Runtime
    distribution: Distribution
    #: True when no provider was chosen or configured and Roder fell back to the mock engine.
    fell_back_to_mock: bool
    #: Things the user must be told once at startup (a weaker sandbox than the default).
    notices: list[str] = field(default_factory=list)


def start_runtime(settings: StartSettings, factories: Iterable[tuple[str, ExtensionFactory]] | None = None) -> Started:
    """``factories`` replaces entry-point discovery (embedders and tests that pick extensions)."""
    host = make_host(
        settings.cwd,
        env=settings.env,
        trust=settings.trust,
        profile=settings.profile,
        interactive=settings.interactive,
        data_dir=settings.data_dir,
        scratch_data=settings.scratch_data,
    )
    if settings.sandbox:
        host.config.sandbox = settings.sandbox  # type: ignore[assignment]
    for name, table in (settings.provider_tables or {}).items():
        host.config.providers[name] = ProviderConfig.model_validate(dict(table))
    for name, table in (settings.model_tables or {}).items():
        host.config.models_override[name] = dict(table)
    if settings.logprobs is not None:
        host.config.logprobs = settings.logprobs
    if settings.token_ids:
        host.config.token_ids = True
    if settings.network:
        host.config.network.commands = True
        host.config.network.allow = ["*"]
    for label, value in settings.secrets.items():
        host.secrets.add(label, value)
    dist = build_distribution(host, factories)
    options = RuntimeOptions(
        cwd=host.cwd,
        paths=host.paths,
        config=host.config,
        mode=settings.mode or host.config.mode,
        provider=settings.provider,
        model=settings.model,
        interactive=settings.interactive,
        trusted=host.trusted,
        max_iterations=settings.max_iterations,
        redactor=host.secrets,
        env=host.env,
        command_env=settings.command_env,
        hidden_paths=settings.hidden_paths,
    )
    try:
        runtime = Runtime(dist.registry, options)
    except UnknownProviderError as exc:
        if not dist.skipped:
            raise
        # The provider may be one a skipped extension (a config mistake) would have offered.
        reasons = "; ".join(s.describe() for s in dist.skipped)
        raise UnknownProviderError(f"{exc}; {reasons}") from exc
    if factories is None and settings.data_dir is None and not (host.cwd / ".roder" / "extensions").is_dir():
        from roder_core.kernel.store_record import record_thread_store

        record_thread_store(host.paths, runtime.store, settings.profile)  # for `roder sessions list`
    fell_back = settings.provider is None and host.config.provider is None and runtime.provider == "mock"
    sandbox = runtime.sandbox  # probed once, now, so the user hears about a weaker sandbox up front
    runtime.audit.record(
        "sandbox.status",
        {"requested": sandbox.requested, "effective": sandbox.effective, "blocked": sandbox.blocked, "reason": sandbox.reason},
    )
    if sandbox.effective == "off":
        from roder_core.brokers.self_protection import mark_non_dumpable

        mark_non_dumpable()  # before any command, hook or MCP server starts: /proc/<pid>/environ stays closed
    notices = [sandbox.notice] if sandbox.notice else []
    return Started(runtime, dist, fell_back, notices)


def settings_from_args(args: object, *, interactive: bool) -> StartSettings:
    """Map the shared CLI flags (see roder_tui.cli.add_runtime_flags) onto StartSettings."""
    trust_flag = bool(getattr(args, "trust", False))
    return StartSettings(
        provider=getattr(args, "provider", None),
        model=getattr(args, "model", None),
        mode=getattr(args, "mode", None),
        sandbox=getattr(args, "sandbox", None),
        profile=getattr(args, "profile", "developer"),
        trust=True if trust_flag else (None if interactive else False),
        interactive=interactive,
        max_iterations=getattr(args, "max_iterations", None),
    )
