"""The two file brokers share one policy: the same refusal, the same message, the same audit.

``WorkspaceFileSystem`` (this machine, directory fds) and ``TransportFileSystem`` (a runner's
files through its transport) differ only in how they touch files. Here both serve the same
folder, the runner's through a transport that performs plain file operations on this machine
(what SFTP does on the host), and every refusal, listing and audit record must come out the
same. A structural check keeps every decision out of the I/O classes, so a rule added to one
broker alone fails here.
"""

from __future__ import annotations

import ast
import os
import stat as stat_mod
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import roder_core.brokers.fs as local_fs
import roder_core.brokers.git_dirs as git_dirs
import roder_core.brokers.runner_fs as runner_fs
from roder_core.brokers import BrokerDenied, FileKind, FileSystemBroker
from roder_core.brokers.content_gate import ContentGate
from roder_core.brokers.fs import WorkspaceFileSystem
from roder_core.brokers.runner_fs import RemoteStat, TransportFileSystem
from roder_core.policy.rules import RuleSet


def _kind(mode: int) -> FileKind:
    if stat_mod.S_ISLNK(mode):
        return "symlink"
    if stat_mod.S_ISDIR(mode):
        return "dir"
    return "file" if stat_mod.S_ISREG(mode) else "other"


class HereTransport:
    """A ``FileTransport`` doing plain file operations on this machine, as SFTP does on a host
    (``realpath`` of a missing path fails, as OpenSSH's does for the broker)."""

    def realpath(self, path: str) -> str:
        real = os.path.realpath(path)
        os.lstat(real)
        return real

    def lstat(self, path: str) -> RemoteStat:
        st = os.lstat(path)
        return RemoteStat(_kind(st.st_mode), st.st_size, st.st_mtime, st.st_nlink)

    def read(self, path: str, max_bytes: int | None) -> bytes:
        with open(path, "rb") as handle:
            return handle.read() if max_bytes is None else handle.read(max_bytes)

    def write_atomic(self, path: str, data: bytes) -> None:
        tmp = path + ".tmp"
        Path(tmp).write_bytes(data)
        os.replace(tmp, path)

    def mkdir(self, path: str) -> None:
        os.mkdir(path)

    def unlink(self, path: str) -> None:
        os.unlink(path)

    def rename(self, source: str, target: str) -> None:
        os.rename(source, target)

    def listdir(self, path: str) -> list[tuple[str, RemoteStat]]:
        return [(name, self.lstat(os.path.join(path, name))) for name in os.listdir(path)]


Records = list[tuple[str, dict[str, Any]]]


def both(workspace: Path, **kw: Any) -> tuple[tuple[FileSystemBroker, Records], tuple[FileSystemBroker, Records]]:
    """The local broker and the runner's broker over ``workspace``, each with its audit log."""
    here: Records = []
    runner: Records = []
    gate = ContentGate(workspace, rules=RuleSet(deny=["read(.env)", "read(private/**)"]))
    local = WorkspaceFileSystem(workspace, audit=lambda k, f: here.append((k, f)), gate=gate, **kw)
    remote = TransportFileSystem(HereTransport(), str(workspace), audit=lambda k, f: runner.append((k, f)), gate=gate, **kw)
    return (local, here), (remote, runner)


@pytest.fixture
def tree(workspace: Path, tmp_path: Path) -> Path:
    """A workspace with something for every rule: secrets, links out, a fifo, git-dir shapes."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "theirs.txt").write_text("theirs")
    (workspace / "a.txt").write_text("a")
    (workspace / ".env").write_text("KEY=1")
    (workspace / "private").mkdir()
    (workspace / "private" / "p.txt").write_text("p")
    os.symlink(outside / "theirs.txt", workspace / "out-link.txt")
    os.symlink(outside, workspace / "out-dir")
    os.link(outside / "theirs.txt", workspace / "hard.txt")
    os.mkfifo(workspace / "pipe")
    for shaped in ("bare", "almost"):
        (workspace / shaped / "objects").mkdir(parents=True)
        (workspace / shaped / "refs").mkdir()
    (workspace / "bare" / "HEAD").write_text("ref: refs/heads/main\n")
    # the workspace is a worktree whose git dir lives in store/, whose config names a hook folder
    (workspace / ".git").write_text("gitdir: store\n")
    (workspace / "store").mkdir()
    (workspace / "store" / "config").write_text("[core]\n\thooksPath = tools/hooks\n")
    (workspace / ".gitignore").write_text("build/\n*.log\n")
    (workspace / "build").mkdir()
    (workspace / "build" / "out.o").write_text("o")
    (workspace / "debug.log").write_text("log")
    (workspace / "src" / "deep").mkdir(parents=True)
    (workspace / "src" / ".gitignore").write_text("gen.py\n")
    (workspace / "src" / "gen.py").write_text("generated")
    (workspace / "src" / "deep" / "m.py").write_text("m")
    return workspace


Op = Callable[[FileSystemBroker], object]

REFUSALS: dict[str, tuple[Op, dict[str, Any]]] = {
    "escape by ..": (lambda fs: fs.read_bytes("../outside/theirs.txt"), {}),
    "escape by absolute path": (lambda fs: fs.read_bytes("/etc/hostname"), {}),
    "escape by a symlinked file": (lambda fs: fs.read_bytes("out-link.txt"), {}),
    "escape by a symlinked folder": (lambda fs: fs.write_bytes("out-dir/new.txt", b"x"), {}),
    "protected name": (lambda fs: fs.write_bytes(".git/config", b"[core]"), {}),
    "protected name at depth": (lambda fs: fs.write_bytes("src/.vscode/tasks.json", b"{}"), {}),
    "protected name by delete": (lambda fs: fs.delete(".git/HEAD"), {}),
    "inside a git dir": (lambda fs: fs.write_bytes("bare/config", b"[core]"), {}),
    "completing a git dir": (lambda fs: fs.write_bytes("almost/HEAD", b"ref: x"), {}),
    "folder completing a git dir": (lambda fs: fs.mkdir("almost/HEAD/x"), {}),
    "the git dir a .git file points at": (lambda fs: fs.write_bytes("store/hooks/pre-commit", b"#!/bin/sh"), {}),
    "a program path of the git config": (lambda fs: fs.write_bytes("tools/hooks/pre-commit", b"#!/bin/sh"), {}),
    "gitdir pointer": (lambda fs: fs.write_bytes("notes.txt", b"gitdir: /elsewhere/.git"), {}),
    "hard-linked read": (lambda fs: fs.read_bytes("hard.txt"), {}),
    "hard-linked write": (lambda fs: fs.write_bytes("hard.txt", b"mine"), {}),
    "not a regular file": (lambda fs: fs.read_bytes("pipe"), {}),
    "not a regular file to write": (lambda fs: fs.write_bytes("pipe", b"x"), {}),
    "content gate": (lambda fs: fs.read_bytes(".env"), {}),
    "content gate by folder rule": (lambda fs: fs.read_bytes("private/p.txt"), {}),
    "the workspace root": (lambda fs: fs.delete("."), {}),
    "no write grant": (lambda fs: fs.write_bytes("a.txt", b"x"), {"capabilities": frozenset({"fs.read.workspace"})}),
    "no read grant": (lambda fs: fs.read_bytes("a.txt"), {"capabilities": frozenset()}),
    "empty path": (lambda fs: fs.stat(" "), {}),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_the_same_refusal_through_both_brokers(tree: Path, case: str) -> None:
    op, kw = REFUSALS[case]
    (local, here), (remote, runner) = both(tree, **kw)
    with pytest.raises(BrokerDenied) as on_this_machine:
        op(local)
    with pytest.raises(BrokerDenied) as on_a_runner:
        op(remote)
    assert str(on_a_runner.value) == str(on_this_machine.value)
    # the runner's records say so, and are otherwise the same
    assert [(k, {n: v for n, v in f.items() if n != "runner_path"}) for k, f in runner] == here
    assert all(f.get("runner_path") is True for _k, f in runner)
    assert bool(here) == (case != "empty path")  # every refusal of a path is audited


def test_the_same_listings_and_withheld_names(tree: Path) -> None:
    (local, _here), (remote, _runner) = both(tree)
    for respect in (True, False):
        shown: list[list[str]] = []
        refused: list[list[str]] = []
        for fs in (local, remote):
            withheld: list[str] = []
            listed = [i.display for i in fs.list_dir(".", respect_gitignore=respect, withheld=withheld)]
            walked = sorted(i.display for i in fs.walk(".", respect_gitignore=respect, withheld=withheld))
            shown.append(listed + walked)
            refused.append(sorted(withheld))
        assert shown[0] == shown[1]
        assert refused[0] == refused[1]
    names = shown[0]
    assert ".env" not in names and "private/p.txt" not in names and ".git" not in names
    _, found = local.find_files(".", "**/*.py", limit=10)
    assert remote.find_files(".", "**/*.py", limit=10)[1] == found == 1  # src/gen.py is ignored below src/
    assert local.withheld(".env") == remote.withheld(".env") is not None


def test_the_same_audit_records_for_what_was_done(tree: Path) -> None:
    (local, here), (remote, runner) = both(tree)
    for fs in (local, remote):
        fs.write_bytes("new/one.txt", b"1")
        fs.mkdir("made")
        fs.move("new/one.txt", "made/two.txt")
        fs.delete("made/two.txt")
    half = len(here)
    assert [(k, {n: v for n, v in f.items() if n != "runner_path"}) for k, f in runner] == here[:half]
    assert [k for k, _f in here] == ["fs.write", "fs.mkdir", "fs.move", "fs.delete"]


def test_a_write_walks_the_git_dir_rules_once(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk reads the workspace's ``.git`` pointer file; on a runner every read is an SFTP
    round trip, so a write (whose bytes are checked for a pointer too) reads it once, as a
    resolve does, through either broker."""
    reads: list[str] = []
    local_read = git_dirs.LocalProbe.read
    transport_read = HereTransport.read

    def counted_local(probe: git_dirs.LocalProbe, path: Path, limit: int) -> str:
        reads.append(str(path))
        return local_read(probe, path, limit)

    def counted_transport(transport: HereTransport, path: str, max_bytes: int | None) -> bytes:
        reads.append(path)
        return transport_read(transport, path, max_bytes)

    monkeypatch.setattr(git_dirs.LocalProbe, "read", counted_local)
    monkeypatch.setattr(HereTransport, "read", counted_transport)
    pointer = str(tree / ".git")
    for fs, _records in both(tree):
        reads.clear()
        fs.write_bytes("src/new.py", b"x = 1\n")
        assert reads.count(pointer) == 1
        with pytest.raises(BrokerDenied, match="gitdir:"):
            fs.write_bytes("src/other.py", b"gitdir: ../store\n")
        assert reads.count(pointer) == 2
        assert not (tree / "src" / "other.py").exists()


#: What only the policy decides: no I/O class builds a refusal, writes an audit record, asks
#: the content gate, reads protected names or ignore files' rules, or looks at Roder's folders.
_DECISIONS = {
    "BrokerDenied",
    "pointer_refusal",
    "gitdir_pointer",
    "protected_reason",
    "parse_rules",
    "visible",
    "IgnoreMatcher",
    "refusal",
    "_audit",
}


@pytest.mark.parametrize(("module", "name"), [(local_fs, "WorkspaceFileSystem"), (runner_fs, "TransportFileSystem")])
def test_the_io_classes_make_no_policy_decisions(module: Any, name: str) -> None:
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    cls = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == name)
    found = []
    for node in ast.walk(cls):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if called in _DECISIONS:
                found.append(f"line {node.lineno}: {called}(...)")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("fs."):
            found.append(f"line {node.lineno}: {node.value!r} (a grant or an audit kind)")
    assert not found, f"{name} decides for itself; move it to fs_policy.FsPolicy: {found}"
