"""Every plugin source kind, fetched for real on this machine: git over file:// (github, url,
git-subdir), an npm tarball, a zip from a loopback HTTP server, a command; and catalogs added
from git, a folder and a URL, refreshed and removed."""

from __future__ import annotations

import hashlib
import shutil
import zipfile
from pathlib import Path

import pytest

from roder_core.plugins.service import fetch_settings
from roder_core.plugins.store import PluginError, PluginStore
from roder_core.settings.paths import RoderPaths
from tests.plugins.support import allow_loopback, bare_repo, git, marketplace, serve_folder, write, write_json


def plugin_folder(root: Path, name: str, version: str | None = None) -> Path:
    manifest = {"name": name, **({"version": version} if version else {})}
    write_json(root / ".claude-plugin" / "plugin.json", manifest)
    write(root / "commands" / "hello.md", f"---\ndescription: hello from {name}\n---\nSay hello.")
    return root


def store() -> PluginStore:
    paths = RoderPaths.from_env()
    return PluginStore(paths, fetch_settings(paths))


def test_git_sources_github_url_and_subdir(tmp_path: Path, roder_home: Path) -> None:
    repos = tmp_path / "repos"
    (repos / "acme").mkdir(parents=True)
    work = plugin_folder(tmp_path / "work", "from-github")
    plugin_folder(work / "sub" / "inner", "from-subdir", "3.1.0")
    commit = bare_repo(work, repos / "acme" / "tools.git")
    allow_loopback(roder_home, f'github_url = "file://{repos}/{{repo}}.git"\n')
    url = f"file://{repos}/acme/tools.git"
    catalog = marketplace(
        tmp_path / "catalog",
        "git-market",
        [
            {"name": "from-github", "source": {"source": "github", "repo": "acme/tools"}},
            {"name": "pinned", "source": {"source": "url", "url": url, "sha": commit, "ref": "nonexistent"}},
            {"name": "from-subdir", "source": {"source": "git-subdir", "url": "acme/tools", "path": "sub/inner"}},
            {"name": "bad-subdir", "source": {"source": "git-subdir", "url": url, "path": "../../etc"}},
        ],
    )
    plugins = store()
    plugins.add_marketplace(str(catalog))
    github = plugins.install("from-github")  # runs no code: no consent needed
    assert github.version == commit[:12] and github.git_commit_sha == commit
    assert (Path(github.install_path) / "commands" / "hello.md").is_file()
    assert not (Path(github.install_path) / ".git").exists()
    pinned = plugins.install("pinned")
    assert pinned.git_commit_sha == commit  # sha wins over ref
    subdir = plugins.install("from-subdir")
    assert subdir.version == "3.1.0" and (Path(subdir.install_path) / "commands" / "hello.md").is_file()
    with pytest.raises(PluginError, match="is not a folder of the repository"):
        plugins.install("bad-subdir")
    assert not list((roder_home / "cache" / "plugins" / ".staging").iterdir())  # nothing half-installed is left


def test_npm_source_from_a_local_tarball_runs_no_lifecycle_script(tmp_path: Path) -> None:
    package = plugin_folder(tmp_path / "pkg", "npm-plugin")
    marker = tmp_path / "postinstall-ran"
    write_json(
        package / "package.json", {"name": "npm-plugin", "version": "1.2.0", "scripts": {"postinstall": f"touch {marker}"}}
    )
    packed = tmp_path / "packed"
    packed.mkdir()
    import subprocess

    subprocess.run(["npm", "pack", str(package), "--pack-destination", str(packed)], check=True, capture_output=True, timeout=120)
    [tarball] = list(packed.glob("*.tgz"))
    catalog = marketplace(
        tmp_path / "catalog", "npm-market", [{"name": "npm-plugin", "source": {"source": "npm", "package": str(tarball)}}]
    )
    plugins = store()
    plugins.add_marketplace(str(catalog))
    preview = plugins.preview("npm-plugin")
    assert "package.json postinstall script: touch" in "\n".join(preview.runs_code)
    record = plugins.install("npm-plugin", preview.consent)
    assert record.version == hashlib.sha256(tarball.read_bytes()).hexdigest()[:12]  # no version in plugin.json
    assert (Path(record.install_path) / "commands" / "hello.md").is_file()
    assert not marker.exists()


def zip_plugin(folder: Path, archive: Path) -> str:
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                zf.write(path, Path("top") / path.relative_to(folder))
    return hashlib.sha256(archive.read_bytes()).hexdigest()


def test_archive_source_over_loopback_http(tmp_path: Path, roder_home: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    digest = zip_plugin(plugin_folder(tmp_path / "zipme", "zipped"), served / "plugin.zip")
    evil = served / "evil.zip"
    with zipfile.ZipFile(evil, "w") as zf:
        zf.writestr("../../escaped.txt", "x")
    with serve_folder(served) as base:
        catalog = marketplace(
            tmp_path / "catalog",
            "zip-market",
            [
                {"name": "zipped", "source": {"source": "archive", "url": f"{base}/plugin.zip", "sha256": digest}},
                {"name": "tampered", "source": {"source": "archive", "url": f"{base}/plugin.zip", "sha256": "0" * 64}},
                {"name": "evil", "source": {"source": "archive", "url": f"{base}/evil.zip"}},
            ],
        )
        plugins = store()
        plugins.add_marketplace(str(catalog))
        with pytest.raises(PluginError, match="loopback and link-local hosts are refused"):
            plugins.install("zipped")
        allow_loopback(roder_home)
        plugins = store()
        record = plugins.install("zipped")
        assert record.version == digest[:12]
        assert (Path(record.install_path) / "commands" / "hello.md").is_file()  # the one top-level folder is the plugin
        with pytest.raises(PluginError, match="sha256 is"):
            plugins.install("tampered")
        with pytest.raises(PluginError, match="leaves the archive"):
            plugins.install("evil")
    assert not (tmp_path / "escaped.txt").exists()


def test_command_source_needs_its_exact_command_accepted(tmp_path: Path) -> None:
    made = plugin_folder(tmp_path / "made", "generated", "0.1.0")
    command = f"echo {made}"
    catalog = marketplace(
        tmp_path / "catalog", "cmd-market", [{"name": "generated", "source": {"source": "command", "command": command}}]
    )
    plugins = store()
    plugins.add_marketplace(str(catalog))
    preview = plugins.preview("generated")
    assert preview.components_known is False and preview.runs_code == [
        f"command source (runs from $HOME to produce the plugin folder): {command}"
    ]
    with pytest.raises(PluginError, match="runs code when enabled"):
        plugins.install("generated")
    record = plugins.install("generated", preview.consent)
    assert (Path(record.install_path) / "commands" / "hello.md").is_file() and Path(record.install_path) != made
    bad = marketplace(
        tmp_path / "bad", "bad-market", [{"name": "noisy", "source": {"source": "command", "command": "echo one; echo two"}}]
    )
    plugins.add_marketplace(str(bad))
    with pytest.raises(PluginError, match="must print exactly one absolute directory"):
        plugins.install("noisy", plugins.preview("noisy").consent)


def test_marketplaces_from_git_refresh_and_remove(tmp_path: Path) -> None:
    work = tmp_path / "market-work"
    marketplace(work, "team-market", [{"name": "first", "source": "./first"}])
    plugin_folder(work / "first", "first")
    bare_repo(work, tmp_path / "market.git")
    plugins = store()
    known, market = plugins.add_marketplace(f"file://{tmp_path}/market.git")
    assert known.source == {"source": "git", "url": f"file://{tmp_path}/market.git"} and [e.name for e in market.entries] == [
        "first"
    ]
    record = plugins.install("first@team-market")
    assert len(record.version) == 12  # the marketplace clone's commit
    marketplace(work, "team-market", [{"name": "first", "source": "./first"}, {"name": "second", "source": "./second"}])
    plugin_folder(work / "second", "second")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "second")
    git(work, "push", "-q", str(tmp_path / "market.git"), "main")
    assert [r["name"] for r in plugins.search("second")] == []
    plugins.refresh("team-market")
    assert [r["name"] for r in plugins.search("second")] == ["second"]
    removed = plugins.remove_marketplace("team-market")
    assert removed == ["first@team-market"] and plugins.installed() == {}
    assert not Path(record.install_path).exists()


def test_a_catalog_added_by_url_cannot_install_relative_sources(tmp_path: Path, roder_home: Path) -> None:
    served = tmp_path / "served"
    marketplace(served, "url-market", [{"name": "local-only", "source": "./local-only"}])
    allow_loopback(roder_home)
    with serve_folder(served) as base:
        plugins = store()
        known, _ = plugins.add_marketplace(f"{base}/.claude-plugin/marketplace.json")
    assert known.catalog_only
    with pytest.raises(PluginError, match="was added by URL"):
        plugins.preview("local-only")


def test_search_deduplicates_by_name_and_install_all_variants_enables_one(tmp_path: Path, workspace: Path) -> None:
    from roder_core.plugins.service import PluginService

    for name in ("alpha-market", "beta-market"):
        root = marketplace(
            tmp_path / name, name, [{"name": "formatter", "source": "./formatter", "description": f"fmt from {name}"}]
        )
        plugin_folder(root / "formatter", "formatter", "1.0.0" if name == "alpha-market" else "2.0.0")
    service = PluginService(RoderPaths.from_env(), workspace, False)
    service.add(str(tmp_path / "alpha-market"))
    service.add(str(tmp_path / "beta-market"))
    [result] = service.search("format")["results"]
    assert result["name"] == "formatter"
    assert [(v["id"], v["version"]) for v in result["variants"]] == [
        ("formatter@alpha-market", None),
        ("formatter@beta-market", None),
    ]
    with pytest.raises(PluginError, match="offered by several marketplaces"):
        service.store.preview("formatter")
    done = service.install_all("formatter", {})
    assert [(p["id"], p["version"], p["enabled"]) for p in done["installed"]] == [
        ("formatter@alpha-market", "1.0.0", True),
        ("formatter@beta-market", "2.0.0", False),
    ]
    assert "only the first variant is enabled" in done["note"]
    switched = service.set_enabled("formatter@beta-market", True)
    assert switched["enabled"] and not service.store.installed()["formatter@alpha-market"].enabled
    shutil.rmtree(tmp_path / "alpha-market")
    assert any("alpha-market" in p for p in service.search("")["problems"])


def test_install_default_online_through_a_mirror_and_offline(tmp_path: Path, roder_home: Path) -> None:
    from tests.plugins.support import copy_official

    work = copy_official(tmp_path / "work", ["commit-commands"])
    (tmp_path / "mirror" / "anthropics").mkdir(parents=True)
    commit = bare_repo(work, tmp_path / "mirror" / "anthropics" / "claude-plugins-official.git")
    allow_loopback(roder_home, f'github_url = "file://{tmp_path}/mirror/{{repo}}.git"\n')
    plugins = store()
    known, _ = plugins.install_default()
    assert known.official and known.source == {"source": "github", "repo": "anthropics/claude-plugins-official"}
    assert Path(known.install_location) == roder_home / "data" / "plugins" / "marketplaces" / "claude-plugins-official"
    record = plugins.install("commit-commands", plugins.preview("commit-commands").consent)
    assert record.version == commit[:12]  # a relative source inside a git catalog: the catalog's commit
    other = marketplace(tmp_path / "other", "not-official", [])
    with pytest.raises(PluginError, match="not claude-plugins-official"):
        plugins.install_default(other)
