"""Builds the broker set for one (workspace, extension) pair from the runtime's settings.

``Runtime.brokers_for`` calls ``default_broker_factory`` unless the embedder supplied its own
factory (a remote runner, a container backend, a test double).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roder_core.brokers import Brokers
from roder_core.brokers.content_gate import shared_gate
from roder_core.brokers.fs import WorkspaceFileSystem
from roder_core.brokers.network import AllowlistNetworkBroker
from roder_core.brokers.own_folders import OwnFolders
from roder_core.brokers.process import HostProcessBroker, ResourceLimits
from roder_core.brokers.sandbox import sandbox_status
from roder_core.brokers.secret_paths import default_deny_read, expand
from roder_core.brokers.secrets import EnvSecretBroker, SecretRedactor, provider_key_names, runtime_redactor
from roder_core.plugins.enabled import plugin_bin_dirs

if TYPE_CHECKING:
    from roder_core.runtime.options import BrokerScope


def default_broker_factory(scope: BrokerScope) -> Brokers:
    runtime = scope.runtime
    options = runtime.options
    config = options.config
    env = dict(options.env) if options.env is not None else dict(os.environ)
    audit: Callable[[str, dict[str, Any]], None] | None = getattr(runtime, "audit", None)
    # Roder's config, data, cache and host folders: hidden from commands (but for a thread's
    # own files) and out of the file tools' reach, even inside the workspace
    own = OwnFolders.of(options.paths, env)
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    deny_read = [
        *default_deny_read(home, options.paths.data_dir, options.paths.config_file),
        *expand(config.sandboxing.deny_read, home),
        # paths the embedding program hides too (a batch hides the operator's credentials)
        *options.hidden_paths,
    ]
    extra_roots = [Path(root) for root in config.fs.extra_roots]
    fs = WorkspaceFileSystem(
        scope.workspace,
        extra_roots=extra_roots,
        capabilities=scope.capabilities,
        audit=audit,
        extension_id=scope.extension_id,
        hidden=own.hidden,
        # the one decision of what reaches the model: the runtime's live rules (rules added
        # from an approval apply at once) and the secret masks
        gate=shared_gate(
            scope.workspace,
            roots=extra_roots,
            rules=runtime.read_rules,
            masked=deny_read,
        ),
    )
    redactor = getattr(runtime, "redact", None)
    if not isinstance(redactor, SecretRedactor):
        redactor = runtime_redactor(env, config)
    limits = config.limits
    command_env = dict(options.command_env) if options.command_env is not None else env
    plugin_code = options.paths.cache_dir / "plugins"
    # enabled plugins' bin/ folders come first on the commands' PATH (and are shown read-only
    # in the sandbox: the cache's plugins/ folder is, and a linked plugin's bin/ is added)
    bins = plugin_bin_dirs(options.paths, scope.workspace, options.trusted, config.model_extra)
    if bins:
        command_env = {**command_env, "PATH": os.pathsep.join([*map(str, bins), command_env.get("PATH") or os.defpath])}
    process = HostProcessBroker(
        fs,
        sandbox=runtime.sandbox if hasattr(runtime, "sandbox") else sandbox_status(config.sandbox),
        spill_dir=options.paths.spill_dir,
        quarantine_dir=options.paths.cache_dir / "quarantine",
        capabilities=scope.capabilities,
        env=command_env,
        pass_env=config.secrets.pass_env,
        secret_names=provider_key_names(config),
        limits=ResourceLimits(
            cpu_seconds=limits.cpu_seconds,
            address_space_mb=limits.address_space_mb,
            file_size_mb=limits.file_size_mb,
            processes=limits.processes,
            memory_mb=limits.memory_mb,
        ),
        default_timeout=limits.bash_timeout,
        redactor=redactor,
        audit=audit,
        extension_id=scope.extension_id,
        network=config.network.commands,
        deny_read=deny_read,
        allow_unix_sockets=config.sandboxing.allow_unix_sockets,
        # installed plugins' code (roder_core.plugins.records: the cache dir's plugins/)
        shown=[plugin_code, *(b for b in bins if not b.resolve().is_relative_to(plugin_code.resolve()))],
        own_folders=own,
    )
    network = AllowlistNetworkBroker(
        config.network.allow, capabilities=scope.capabilities, audit=audit, extension_id=scope.extension_id
    )
    secrets = EnvSecretBroker(redactor, env, scope.capabilities)
    return Brokers(fs=fs, process=process, network=network, secrets=secrets)
