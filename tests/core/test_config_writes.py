"""config.toml edits (approvals made "always", theme, mode, provider choice) keep the user's file:
through a symlink, with its mode, atomically, and merged under a lock when processes race."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from roder_core.settings.config import ConfigWriter


def test_a_symlinked_config_is_written_at_its_target(tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    target = dotfiles / "roder.toml"
    target.write_text("# mine\ntheme = 'roder-dark'\n")
    link = tmp_path / "home" / "config.toml"
    link.parent.mkdir()
    link.symlink_to(target)
    ConfigWriter(link).append_unique("policy.allow", "bash(ls)")
    assert link.is_symlink()
    assert os.readlink(link) == str(target)
    assert "bash(ls)" in target.read_text()
    assert target.read_text().startswith("# mine\n")  # comments and layout survive


def test_the_file_keeps_its_mode(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("mode = 'ask'\n")
    config.chmod(0o600)
    ConfigWriter(config).set("theme", "roder-light")
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert 'theme = "roder-light"' in config.read_text()


def test_a_new_file_is_private_and_no_temporary_file_is_left(tmp_path: Path) -> None:
    folder = tmp_path / "fresh"
    config = folder / "config.toml"
    ConfigWriter(config).set("mode", "plan")
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert sorted(p.name for p in folder.iterdir()) == [".config.toml.lock", "config.toml"]


def test_two_processes_writing_at_once_keep_each_others_rules(tmp_path: Path) -> None:
    """Each process appends its own 40 rules while the other does; every rule survives."""
    config = tmp_path / "config.toml"
    config.write_text("")
    program = (
        "import sys\nfrom pathlib import Path\nfrom roder_core.settings.config import ConfigWriter\n"
        "writer = ConfigWriter(Path(sys.argv[1]))\n"
        "for i in range(40):\n    writer.append_unique('policy.allow', f'bash(echo {sys.argv[2]}-{i})')\n"
    )
    writers = [subprocess.Popen([sys.executable, "-c", program, str(config), name]) for name in ("a", "b")]
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    text = config.read_text()
    missing = [f"{name}-{i}" for name in ("a", "b") for i in range(40) if f"bash(echo {name}-{i})" not in text]
    assert missing == []
