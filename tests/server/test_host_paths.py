"""Where the background host lives and what a one-shot run compares before using it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from roder_core.server.host_paths import HostDirError, HostPaths, config_stamp, environment_digest


def test_the_folder_is_made_private_and_a_planted_one_is_refused(tmp_path: Path) -> None:
    paths = HostPaths(tmp_path / "roder-host")
    paths.ensure_private()
    assert (os.stat(paths.directory).st_mode & 0o777) == 0o700
    paths.ensure_private()  # an existing private folder of ours is fine

    open_to_all = HostPaths(tmp_path / "planted")
    open_to_all.directory.mkdir(mode=0o755)
    os.chmod(open_to_all.directory, 0o755)
    with pytest.raises(HostDirError, match="open to other users"):
        open_to_all.ensure_private()

    (tmp_path / "elsewhere").mkdir(mode=0o700)
    link = HostPaths(tmp_path / "link")
    link.directory.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(HostDirError, match="not a directory"):
        link.ensure_private()


@pytest.mark.skipif(os.getuid() != 0, reason="giving a folder to another user needs root")
def test_a_folder_of_another_user_is_refused(tmp_path: Path) -> None:
    foreign = HostPaths(tmp_path / "foreign")
    foreign.directory.mkdir(mode=0o700)
    os.chown(foreign.directory, 65534, 65534)
    with pytest.raises(HostDirError, match="another user"):
        foreign.ensure_private()


def test_paths_are_per_data_folder_and_short_enough_for_a_socket(tmp_path: Path) -> None:
    deep = tmp_path / ("x" * 150)
    one = HostPaths.for_data_dir(deep / "a", {})
    two = HostPaths.for_data_dir(deep / "b", {})
    assert one.directory != two.directory
    assert len(str(one.socket).encode()) < 108
    runtime = tmp_path / "run"
    runtime.mkdir()
    assert HostPaths.for_data_dir(deep / "a", {"XDG_RUNTIME_DIR": str(runtime)}).directory.parent == runtime


def test_the_config_stamp_ignores_looks_but_not_what_a_run_does(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('provider = "local"\ntheme = "roder-dark"\n')
    before = config_stamp(config, tmp_path, False)
    config.write_text('provider = "local"\ntheme = "roder-light"\n[keys]\nquit = "ctrl+x"\n')
    assert config_stamp(config, tmp_path, False) == before
    config.write_text('provider = "other"\ntheme = "roder-light"\n')
    assert config_stamp(config, tmp_path, False) != before
    project = tmp_path / ".roder"
    project.mkdir()
    (project / "config.toml").write_text('mode = "bypass"\n')
    assert config_stamp(config, tmp_path, True) != config_stamp(config, tmp_path, False)
    config.write_text("not = [valid")
    assert config_stamp(config, tmp_path, False) != config_stamp(tmp_path / "missing.toml", tmp_path, False)


def test_the_environment_digest_covers_keys_and_endpoints_only() -> None:
    base = {"PATH": "/bin", "OPENAI_API_KEY": "sk-1", "RODER_HOME": "/h"}
    assert environment_digest(base) == environment_digest({**base, "PATH": "/usr/bin", "TERM": "xterm"})
    assert environment_digest(base) != environment_digest({**base, "OPENAI_API_KEY": "sk-2"})
    assert environment_digest(base) != environment_digest({**base, "OPENAI_BASE_URL": "http://127.0.0.1:1"})
