"""A plugin's node dependencies: ``npm ci --ignore-scripts`` into the installed copy at install,
through the process broker, offline (a ``file:`` tarball dependency; the registry is pointed at
a closed loopback port so nothing can leave the machine); a failure is one line and the rest of
the plugin loads."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from roder_core.customization.definitions import DefinitionRoots
from roder_core.plugins.components import discover_with_plugins
from roder_core.plugins.service import PluginService
from roder_core.plugins.store import PluginStore
from roder_core.settings.paths import RoderPaths
from tests.plugins.support import marketplace, write, write_json

pytestmark = pytest.mark.skipif(shutil.which("npm") is None or shutil.which("node") is None, reason="npm is not installed")


@pytest.fixture(autouse=True)
def offline_npm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """npm may never reach a registry here: any attempt hits a closed loopback port."""
    monkeypatch.setenv("npm_config_registry", "http://127.0.0.1:9/")
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache-of-the-test"))
    monkeypatch.setenv("npm_config_update_notifier", "false")


def npm(cwd: Path, *args: str) -> None:
    subprocess.run(["npm", *args], cwd=cwd, check=True, capture_output=True, text=True, timeout=120)


def node_plugin(root: Path, *, broken: bool = False) -> Path:
    """A plugin whose package.json depends on a local tarball, with its npm lockfile."""
    dep = root / "tiny-dep-src"
    write_json(dep / "package.json", {"name": "tiny-dep", "version": "1.0.0", "main": "index.js"})
    write(dep / "index.js", 'module.exports = "tiny-dep works";\n')
    plugin = root / "noder"
    (plugin / "vendor").mkdir(parents=True)
    npm(dep, "pack", "--pack-destination", str(plugin / "vendor"))
    write_json(plugin / ".claude-plugin" / "plugin.json", {"name": "noder", "version": "0.1.0"})
    dependencies = {"tiny-dep": "file:vendor/tiny-dep-1.0.0.tgz"}
    write_json(plugin / "package.json", {"name": "noder", "version": "0.1.0", "dependencies": dependencies})
    write(plugin / "commands" / "hi.md", "---\ndescription: hi\n---\nSay hi.")
    npm(plugin, "install", "--package-lock-only", "--offline", "--ignore-scripts", "--no-audit", "--no-fund")
    if broken:
        (plugin / "vendor" / "tiny-dep-1.0.0.tgz").unlink()  # the lockfile names a tarball that is gone
    return marketplace(root, "node-market", [{"name": "noder", "source": "./noder"}])


def test_npm_ci_installs_node_dependencies_into_the_installed_copy(tmp_path: Path, workspace: Path) -> None:
    node_plugin(tmp_path / "catalog")
    store = PluginStore(RoderPaths.from_env())
    store.add_marketplace(str(tmp_path / "catalog"))
    preview = store.preview("noder@node-market")
    assert "node dependencies installed at install: npm ci --ignore-scripts --no-audit --no-fund" in preview.runs_code
    record = store.install("noder@node-market", preview.consent)
    assert record.notes == []
    root = Path(record.install_path)
    assert (root / "node_modules" / "tiny-dep" / "index.js").is_file()
    done = subprocess.run(
        ["node", "-e", "console.log(require('tiny-dep'))"], cwd=root, capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "tiny-dep works"
    assert not (tmp_path / "catalog" / "noder" / "node_modules").exists()  # the catalog's copy is untouched


def test_a_failed_npm_ci_is_one_line_and_the_plugin_still_loads(tmp_path: Path, workspace: Path) -> None:
    node_plugin(tmp_path / "catalog", broken=True)
    paths = RoderPaths.from_env()
    service = PluginService(paths, workspace, False)
    service.add(str(tmp_path / "catalog"))
    preview, _ = service.preview("noder@node-market")
    row = service.install("noder@node-market", preview.consent, preview)
    [note] = [p for p in row["problems"] if "node dependencies" in p]
    assert note.startswith("node dependencies not installed: npm ci exited with"), note
    assert "\n" not in note and "ENOENT" in note
    commands = discover_with_plugins(DefinitionRoots(workspace, paths, False)).commands
    assert "noder:hi" in commands
