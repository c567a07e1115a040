"""What git_dirs finds without running git: program paths in a config, git-dir look-alikes,
``gitdir:`` pointers, and the git dirs around a path (worktree pointers, commondir)."""

from __future__ import annotations

from pathlib import Path

import pytest

from roder_core.brokers.git_dirs import (
    config_includes,
    config_programs,
    git_refusal,
    gitdir_pointer,
    looks_like_git_dir,
    pointer_refusal,
    would_look_like_git_dir,
)


def test_config_programs_names_paths_git_would_run(tmp_path: Path) -> None:
    config = """
[core]
    hooksPath = .husky
    fsmonitor = ./tools/fsmon.sh   ; a comment
    pager = less
[filter "lfs"]
    clean = git-lfs clean -- %f
[filter "evil"]
    smudge = scripts/smudge.sh %f
[diff "img"]
    textconv = "./bin/exif"
[alias]
    st = status
"""
    found = {p.relative_to(tmp_path).as_posix() for p in config_programs(config, tmp_path)}
    assert found == {".husky", "tools/fsmon.sh", "scripts/smudge.sh", "bin/exif"}


def test_config_includes_names_the_files_git_reads_as_config(tmp_path: Path) -> None:
    config = """
[include]
    path = ../tools/git.inc
[includeIf "gitdir:~/work.d/"]
    path = "/etc/shared.inc"   ; absolute
[core]
    path = not-an-include
"""
    found = config_includes(config, tmp_path / ".git" / "config")
    assert found == [tmp_path / "tools" / "git.inc", Path("/etc/shared.inc")]


def test_git_dir_shapes(tmp_path: Path) -> None:
    (tmp_path / "objects").mkdir()
    (tmp_path / "refs").mkdir()
    assert not looks_like_git_dir(tmp_path)
    assert would_look_like_git_dir(tmp_path, "HEAD")
    assert not would_look_like_git_dir(tmp_path, "README")
    (tmp_path / "HEAD").write_text("ref: refs/heads/main\n")
    assert looks_like_git_dir(tmp_path)
    assert gitdir_pointer(b"  gitdir: ../x\n")
    assert gitdir_pointer(b"GITDIR:x")
    assert not gitdir_pointer(b"# gitdir: x")


def test_git_refusal_follows_worktree_pointers_and_commondir(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    main_git = ws / "store"
    for name in ("objects", "refs"):
        (main_git / name).mkdir(parents=True)
    (main_git / "HEAD").write_text("ref: refs/heads/main\n")
    linked = ws / "meta" / "wt1"
    linked.mkdir(parents=True)
    (linked / "commondir").write_text("../../store\n")
    (linked / "HEAD").write_text("ref: refs/heads/wt1\n")  # a linked worktree's git dir: HEAD + commondir
    (ws / "tree").mkdir()
    (ws / "tree" / ".git").write_text("gitdir: ../meta/wt1\n")
    assert git_refusal(ws / "meta" / "wt1" / "config", ws) is not None  # the gitdir: target
    assert git_refusal(ws / "tree" / "src" / "a.py", ws) is None  # the worktree itself is fine
    assert git_refusal(ws / "store" / "config", ws) is not None  # the common dir (a git dir by shape)
    assert git_refusal(ws / "notes" / "a.txt", ws) is None
    assert pointer_refusal(b"gitdir: ../store") is not None
    assert pointer_refusal(b"hello") is None


def test_a_global_hooks_path_protects_that_folder_in_every_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[core]\n\thooksPath = .githooks\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    assert "a program path in" in (git_refusal(ws / ".githooks" / "pre-commit", ws) or "")
    assert git_refusal(ws / "src" / "app.py", ws) is None
