"""The filesystem broker: scoping, symlinks, hard links, protected paths, atomic writes,
listing with .gitignore, capability checks and audit records."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from roder_core.brokers import BrokerDenied
from roder_core.brokers.fs import WorkspaceFileSystem, protected_reason


def fs_for(workspace: Path, **kw: Any) -> WorkspaceFileSystem:
    return WorkspaceFileSystem(workspace, **kw)


def test_relative_and_absolute_paths_inside(workspace: Path) -> None:
    fs = fs_for(workspace)
    (workspace / "a.txt").write_text("x")
    assert fs.resolve("a.txt") == (workspace / "a.txt").resolve()
    assert fs.resolve(str(workspace / "a.txt")) == (workspace / "a.txt").resolve()
    assert fs.display(fs.resolve("sub/../a.txt")) == "a.txt"


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "~/.bashrc", "sub/../../x", "/"])
def test_escapes_are_refused(workspace: Path, path: str) -> None:
    with pytest.raises(BrokerDenied, match="outside the workspace"):
        fs_for(workspace).resolve(path)


def test_symlinked_file_and_folder_escapes(workspace: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    (tmp_path / "elsewhere").mkdir()
    os.symlink(secret, workspace / "link.txt")
    os.symlink(tmp_path / "elsewhere", workspace / "linkdir")
    fs = fs_for(workspace)
    with pytest.raises(BrokerDenied, match="resolves to"):
        fs.read_bytes("link.txt")
    with pytest.raises(BrokerDenied, match="outside"):
        fs.write_bytes("linkdir/new.txt", b"x")
    assert not (tmp_path / "elsewhere" / "new.txt").exists()


def test_symlink_inside_workspace_is_fine(workspace: Path) -> None:
    (workspace / "real.txt").write_text("hello")
    os.symlink("real.txt", workspace / "alias.txt")
    assert fs_for(workspace).read_bytes("alias.txt") == b"hello"


def test_hard_links_are_refused(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("theirs")
    os.link(outside, workspace / "hard.txt")
    fs = fs_for(workspace)
    with pytest.raises(BrokerDenied, match="hard-linked"):
        fs.read_bytes("hard.txt")
    with pytest.raises(BrokerDenied, match="hard-linked"):
        fs.write_bytes("hard.txt", b"mine")
    assert outside.read_text() == "theirs"


@pytest.mark.parametrize(
    "path",
    [
        ".git/config",
        ".git/hooks/pre-commit",
        ".roder/config.toml",
        ".bashrc",
        ".zshrc",
        ".gitconfig",
        ".npmrc",
        ".mcp.json",
        "sub/.envrc",
        ".vscode/tasks.json",
        ".ssh/authorized_keys",
    ],
)
def test_protected_paths_refuse_writes(workspace: Path, path: str) -> None:
    fs = fs_for(workspace)
    with pytest.raises(BrokerDenied, match="protected"):
        fs.write_bytes(path, b"x")
    assert not (workspace / path).exists()


def test_symlink_into_protected_path_is_protected(workspace: Path) -> None:
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text("[core]\n")
    os.symlink(".git/config", workspace / "innocent.txt")
    with pytest.raises(BrokerDenied, match="protected"):
        fs_for(workspace).write_bytes("innocent.txt", b"[core]\nfsmonitor = evil\n")
    assert (workspace / ".git" / "config").read_text() == "[core]\n"


def test_protected_paths_are_readable(workspace: Path) -> None:
    (workspace / ".gitconfig").write_text("[user]\n")
    assert fs_for(workspace).read_bytes(".gitconfig") == b"[user]\n"


def test_protected_reason_names() -> None:
    assert protected_reason(["src", "main.py"]) is None
    assert protected_reason([".git", "HEAD"]) == ".git/ is protected"
    assert protected_reason(["a", ".npmrc"]) == "a/.npmrc is a protected file"
    assert protected_reason(["sub", ".roder", "extensions", "x.py"]) == "sub/.roder/ is protected"
    assert protected_reason(["deep", "er", ".GIT", "hooks"]) == "deep/er/.GIT/ is protected"
    assert protected_reason(["gitconfig.md"]) is None


def test_fifo_is_refused(workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    with pytest.raises(BrokerDenied, match="not a regular file"):
        fs_for(workspace).read_bytes("pipe")


def test_atomic_write_delete_move_and_mkdir(workspace: Path) -> None:
    records: list[tuple[str, dict[str, Any]]] = []
    fs = fs_for(workspace, audit=lambda kind, fields: records.append((kind, fields)))
    fs.write_bytes("d/a.txt", b"one")
    fs.move("d/a.txt", "e/b.txt")
    assert (workspace / "e/b.txt").read_bytes() == b"one"
    assert not (workspace / "d/a.txt").exists()
    os.symlink("b.txt", workspace / "e" / "link")
    fs.delete("e/link")  # removes the link, not its target
    assert (workspace / "e/b.txt").exists()
    assert not (workspace / "e/link").exists()
    fs.mkdir("f/g")
    assert (workspace / "f/g").is_dir()
    assert [k for k, _ in records] == ["fs.write", "fs.move", "fs.delete", "fs.mkdir"]
    with pytest.raises(BrokerDenied, match="workspace root"):
        fs.delete(".")


def test_capabilities_are_enforced(workspace: Path) -> None:
    (workspace / "a.txt").write_text("x")
    read_only = fs_for(workspace, capabilities=frozenset({"fs.read.workspace"}))
    assert read_only.read_bytes("a.txt") == b"x"
    with pytest.raises(BrokerDenied, match=r"fs\.write\.workspace"):
        read_only.write_bytes("a.txt", b"y")
    nothing = fs_for(workspace, capabilities=frozenset())
    with pytest.raises(BrokerDenied, match=r"fs\.read\.workspace"):
        nothing.read_bytes("a.txt")


def test_extra_roots(workspace: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    fs = fs_for(workspace, extra_roots=[notes])
    fs.write_bytes(str(notes / "n.md"), b"ok")
    assert (notes / "n.md").read_bytes() == b"ok"


def test_listing_and_walk_respect_gitignore(workspace: Path) -> None:
    (workspace / ".gitignore").write_text("build/\n*.log\n!keep.log\n")
    (workspace / "build").mkdir()
    (workspace / "build" / "out.js").write_text("x")
    (workspace / "src").mkdir()
    (workspace / "src" / ".gitignore").write_text("gen_*.py\n")
    (workspace / "src" / "main.py").write_text("x")
    (workspace / "src" / "gen_a.py").write_text("x")
    (workspace / "debug.log").write_text("x")
    (workspace / "keep.log").write_text("x")
    (workspace / ".git").mkdir()
    (workspace / ".git" / "HEAD").write_text("x")
    fs = fs_for(workspace)
    names = [e.display for e in fs.list_dir(".")]
    assert names == ["src", ".gitignore", "keep.log"]
    walked = sorted(e.display for e in fs.walk("."))
    assert walked == [".gitignore", "keep.log", "src/.gitignore", "src/main.py"]
    assert sorted(e.display for e in fs.walk("src")) == ["src/.gitignore", "src/main.py"]
    everything = sorted(e.display for e in fs.walk(".", respect_gitignore=False))
    assert "build/out.js" in everything
    assert ".git/HEAD" not in everything


def test_walk_does_not_follow_symlinked_folders(workspace: Path, tmp_path: Path) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("x")
    os.symlink(tmp_path / "outside", workspace / "link")
    walked = [e.display for e in fs_for(workspace).walk(".")]
    assert "link/secret.txt" not in walked
