"""Shared pieces of the plugin tests: the official marketplace copy, small catalogs, servers.

The official catalog is a plain copy kept outside the repository (``shared/testdata``, beside
the checkout in CI and above a worktree here); tests copy the parts they need into a temporary
folder and never touch the original. Where no copy is found the tests that need it skip, naming
the folder; CI sets ``RODER_REQUIRE_SHARED`` so that there they fail instead.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
OFFICIAL_NAME = "claude-plugins-official"


def official_source() -> Path:
    """``shared/testdata/claude-plugins-official``: ``$RODER_SHARED_DIR`` first, then a
    ``shared`` folder beside the repository or beside any folder above it."""
    candidates = []
    if os.environ.get("RODER_SHARED_DIR"):
        candidates.append(Path(os.environ["RODER_SHARED_DIR"]))
    candidates += [parent / "shared" for parent in REPO.parents]
    for shared in candidates:
        found = shared / "testdata" / OFFICIAL_NAME
        if (found / ".claude-plugin" / "marketplace.json").is_file():
            return found
    missing = f"shared/testdata/{OFFICIAL_NAME} not found beside {REPO} (set RODER_SHARED_DIR)"
    if os.environ.get("RODER_REQUIRE_SHARED"):  # CI has the copy: a missing one fails there
        raise RuntimeError(missing)
    import pytest  # a clone elsewhere (say under /tmp) has no copy beside it: those tests skip, saying why

    pytest.skip(missing)


def copy_official(dest: Path, plugins: list[str]) -> Path:
    """The official catalog file plus the named plugin folders, copied under ``dest``."""
    source = official_source()
    root = dest / OFFICIAL_NAME
    shutil.copytree(source / ".claude-plugin", root / ".claude-plugin")
    for name in plugins:
        for group in ("plugins", "external_plugins"):
            if (source / group / name).is_dir():
                shutil.copytree(source / group / name, root / group / name, symlinks=True)
    return root


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def write_json(path: Path, data: Any) -> Path:
    return write(path, json.dumps(data, indent=2))


def marketplace(root: Path, name: str, plugins: list[dict[str, Any]], **extra: Any) -> Path:
    write_json(
        root / ".claude-plugin" / "marketplace.json", {"name": name, "owner": {"name": "tests"}, "plugins": plugins, **extra}
    )
    return root


def git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def bare_repo(work: Path, bare: Path) -> str:
    """Commit ``work`` and push it to a new bare repository; returns the commit."""
    git(work, "init", "-q", "-b", "main")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "plugin")
    git(bare.parent, "init", "-q", "--bare", bare.name)
    git(work, "push", "-q", str(bare), "main")
    git(bare, "symbolic-ref", "HEAD", "refs/heads/main")
    return git(work, "rev-parse", "HEAD")


@contextmanager
def serve_folder(folder: Path) -> Iterator[str]:
    """A loopback HTTP server for ``folder``; yields its base URL."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(folder), **kwargs)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def allow_loopback(roder_home: Path, extra: str = "") -> None:
    """The user's config.toml lets downloads reach this machine (the tests' servers)."""
    write(roder_home / "config.toml", f"[plugins]\nallow_loopback_http = true\n{extra}")


def claude_home(tmp_path: Path) -> Path:
    """A Claude Code folder with hookify installed from its cache and enabled, a second enabled
    plugin whose files are gone, and the official catalog cloned."""
    claude = tmp_path / "claude-home"
    cached = claude / "plugins" / "cache" / OFFICIAL_NAME / "hookify" / "0.9.0"
    source = copy_official(tmp_path / "src", ["hookify"])
    shutil.copytree(source / "plugins" / "hookify", cached)
    clone = claude / "plugins" / "marketplaces" / OFFICIAL_NAME
    shutil.copytree(source / ".claude-plugin", clone / ".claude-plugin")
    records = {
        f"hookify@{OFFICIAL_NAME}": [{"scope": "user", "installPath": str(cached), "version": "0.9.0"}],
        f"gone@{OFFICIAL_NAME}": [{"scope": "user", "installPath": str(claude / "nowhere"), "version": "1"}],
    }
    write_json(claude / "plugins" / "installed_plugins.json", {"version": 2, "plugins": records})
    write_json(
        claude / "plugins" / "known_marketplaces.json",
        {OFFICIAL_NAME: {"source": {"source": "github"}, "installLocation": str(clone)}},
    )
    enabled = {f"hookify@{OFFICIAL_NAME}": True, f"gone@{OFFICIAL_NAME}": True}
    write_json(claude / "settings.json", {"enabledPlugins": enabled})
    return claude


def file_stamps(folder: Path) -> dict[Path, int]:
    """Every file under ``folder`` with its modification time (to prove a folder was only read)."""
    return {p: p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


def formatter_variants(root: Path) -> list[Path]:
    """Two catalogs, ``alpha`` and ``beta``, offering a plugin of the same name (commands only)."""
    found = []
    for name in ("alpha", "beta"):
        catalog = marketplace(root / name, name, [{"name": "formatter", "source": "./formatter"}])
        write_json(catalog / "formatter" / ".claude-plugin" / "plugin.json", {"name": "formatter", "version": "1.0.0"})
        write(catalog / "formatter" / "commands" / "fmt.md", "Format the code.")
        found.append(catalog)
    return found
