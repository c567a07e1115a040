"""A plugin's node dependencies, installed into its installed copy at install time.

As Claude Code does: when the plugin's root has ``package.json`` and a lockfile, ``npm ci
--ignore-scripts`` (``package-lock.json`` / ``npm-shrinkwrap.json``) or ``bun install
--frozen-lockfile --ignore-scripts`` (``bun.lock`` / ``bun.lockb``) runs in the installed copy,
so ``${CLAUDE_PLUGIN_ROOT}/node_modules`` exists for its MCP servers and hooks. Yarn and pnpm
lockfiles are skipped. No lifecycle script runs. The command goes through the process broker
(scrubbed environment, resource limits, the sandbox when there is one) with only the installed
copy and npm's cache writable; the network is allowed, since the user asked for the install.
A failure is one line in the install record's notes: the rest of the plugin still loads.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

from roder_core.settings.paths import RoderPaths

#: Claude Code's limit for installing a plugin's dependencies.
NODE_TIMEOUT = 60.0
_SKIPPED_LOCKFILES = ("yarn.lock", "pnpm-lock.yaml")


def install_command(root: Path) -> list[str] | None:
    """The command for ``root``'s lockfile, or None when there is nothing to install."""
    if not (root / "package.json").is_file():
        return None
    if (root / "bun.lock").is_file() or (root / "bun.lockb").is_file():
        return ["bun", "install", "--frozen-lockfile", "--ignore-scripts"]
    if (root / "package-lock.json").is_file() or (root / "npm-shrinkwrap.json").is_file():
        return ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"]
    return None


def skipped_reason(root: Path) -> str | None:
    """Why a plugin with package.json gets no node dependencies (one line), if it does not."""
    if not (root / "package.json").is_file() or install_command(root) is not None:
        return None
    found = next((name for name in _SKIPPED_LOCKFILES if (root / name).is_file()), None)
    if found:
        return f"node dependencies not installed: {found} is not supported (only npm and bun lockfiles are)"
    return "node dependencies not installed: package.json has no lockfile (package-lock.json or bun.lock)"


def node_dependencies(root: Path, paths: RoderPaths, *, timeout: float = NODE_TIMEOUT) -> list[str]:
    """Install ``root``'s node dependencies; returns the notes to record (empty on success).
    Blocking: callers run it in a worker thread (it runs its own event loop)."""
    skipped = skipped_reason(root)
    if skipped is not None:
        return [skipped]
    argv = install_command(root)
    if argv is None:
        return []
    if shutil.which(argv[0]) is None:
        return [f"node dependencies not installed: {argv[0]} is not on the PATH"]
    return asyncio.run(_run(argv, root, paths, timeout))


async def _run(argv: list[str], root: Path, paths: RoderPaths, timeout: float) -> list[str]:
    from roder_core.brokers.fs import WorkspaceFileSystem
    from roder_core.brokers.process import HostProcessBroker
    from roder_core.brokers.sandbox import sandbox_status
    from roder_core.brokers.secret_paths import default_deny_read
    from roder_core.settings.config import ConfigError, load_config

    try:
        config = load_config(paths, Path.home(), False)
        level = config.sandbox
    except ConfigError:
        level = None
    cache = paths.cache_dir / "plugins" / ".npm-cache"
    cache.mkdir(parents=True, exist_ok=True)
    home = Path(os.environ.get("HOME") or os.path.expanduser("~"))
    broker = HostProcessBroker(
        WorkspaceFileSystem(root, extra_roots=[cache]),
        sandbox=sandbox_status(level, cache_file=paths.cache_dir / "sandbox-probe.json"),
        spill_dir=paths.spill_dir,
        quarantine_dir=paths.cache_dir / "quarantine",
        env={**os.environ, "npm_config_cache": str(cache), "BUN_INSTALL_CACHE_DIR": str(cache / "bun")},
        network=True,
        deny_read=default_deny_read(home, paths.data_dir, paths.config_file),
    )
    what = " ".join(argv[:2])
    try:
        result = await broker.run(argv, cwd=root, timeout=timeout)
    except Exception as exc:  # the broker refused (no sandbox where one is required) or could not start it
        return [f"node dependencies not installed: {what} could not run: {exc}"]
    if result.timed_out:
        return [f"node dependencies not installed: {what} timed out after {timeout:g}s"]
    if result.exit_code != 0:
        lines = [line.strip() for line in result.output.splitlines() if line.strip()]
        errors = [line for line in lines if "err" in line.lower() and "complete log" not in line]
        detail = "; ".join(errors[:3]) if errors else lines[-1] if lines else ""
        return [f"node dependencies not installed: {what} exited with {result.exit_code}: {detail[:300]}"]
    return []
