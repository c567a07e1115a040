"""Project trust: decisions per canonical path, the first-open prompt API, headless runs ignore
project items unless --trust."""

from __future__ import annotations

import os
from pathlib import Path

from roder_core.kernel.distribution import build_distribution, make_host
from roder_core.policy.trust import TrustStore, project_items
from roder_core.runtime.bootstrap import settings_from_args
from roder_core.settings.paths import RoderPaths


def test_decisions_prompt_and_nearest_wins(workspace: Path, tmp_path: Path) -> None:
    store = TrustStore(RoderPaths.from_env())
    assert not store.needs_prompt(workspace)  # nothing to load: no question
    (workspace / ".mcp.json").write_text("{}")
    (workspace / ".roder" / "skills").mkdir(parents=True)
    assert project_items(workspace) == [".roder/skills", ".mcp.json"]
    assert store.needs_prompt(workspace)
    assert not store.is_trusted(workspace)
    link = tmp_path / "link"
    link.symlink_to(workspace)
    store.set(link, True)  # stored under the canonical path
    assert store.decision(workspace) is True
    assert store.is_trusted(workspace / "sub")
    assert not store.needs_prompt(workspace)
    inner = workspace / "vendor"
    inner.mkdir()
    store.set(inner, False)
    assert not store.is_trusted(inner / "deep")
    assert store.is_trusted(workspace)
    assert store.effective_decision(inner / "deep") == (False, str(inner.resolve()))
    store.forget(workspace.resolve())
    assert store.needs_prompt(workspace)


def _ids(workspace: Path, trust: bool | None) -> set[str]:
    host = make_host(workspace, env=dict(os.environ), trust=trust, interactive=trust is None)
    return {m.id for m in build_distribution(host).registry.manifests}


def test_headless_ignores_project_items_unless_trust(workspace: Path) -> None:
    (workspace / ".roder").mkdir()
    (workspace / ".roder" / "config.toml").write_text('[[hooks.PreToolUse]]\ncommand = "exit 2"\n')
    TrustStore(RoderPaths.from_env()).set(workspace, True)  # even a trusted folder...

    class Args:
        trust = False

    headless = settings_from_args(Args(), interactive=False)
    assert headless.trust is False  # ...is not trusted by a headless run without --trust
    assert "roder-ext-command-hooks" not in _ids(workspace, headless.trust)
    Args.trust = True
    assert "roder-ext-command-hooks" in _ids(workspace, settings_from_args(Args(), interactive=False).trust)
    assert "roder-ext-command-hooks" in _ids(workspace, None)  # interactive: the stored decision
