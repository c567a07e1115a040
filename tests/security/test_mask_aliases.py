"""A masked secret reached through another path: the sandbox masks a path, so every other way
to the same file must be masked too, or the command refused (``secret_paths.masks``).

Through the real loop (a scripted model's ``bash`` calls, real bubblewrap): a bind mount of the
secret's folder or of a folder above it (made on the host, as root), a hard link made on the
host, and the sandbox's own ``/proc/<pid>/root``, ``/proc/<pid>/cwd`` and ``/dev/fd`` views.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from roder_core.brokers.sandbox import probe_bubblewrap
from roder_core.ir import ToolResultItem
from tests.brokers.helpers import marker, outside_folder
from tests.tools.harness import start

PROBE = probe_bubblewrap()
pytestmark = pytest.mark.skipif(not PROBE.works, reason=f"needs bubblewrap: {PROBE.reason}")


@pytest.fixture
def home() -> Iterator[Path]:
    """A fake home outside /tmp (the sandbox's /tmp is private and would prove nothing) holding
    an SSH key and a .netrc."""
    with outside_folder("roder-alias-") as base:
        base.chmod(0o755)
        home = base / "home"
        (home / ".ssh").mkdir(parents=True)
        (home / ".ssh" / "id_rsa").write_text(f"KEY-{marker()}\n")
        (home / ".netrc").write_text(f"NETRC-{marker()}\n")
        (base / "roder").mkdir()
        yield home


@pytest.fixture
def mount_point() -> Iterator[Path]:
    """An empty folder to bind-mount onto (outside /tmp), unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("making a bind mount on the host needs root")
    with outside_folder("roder-alias-mnt-") as folder:
        yield folder
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)


def bind(source: Path, target: Path) -> None:
    made = subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True, text=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"this machine refuses a bind mount: {made.stderr.strip()}")


async def run_commands(workspace: Path, home: Path, commands: list[str], config: str = "") -> list[str]:
    roder_home = home.parent / "roder"
    if config:
        (roder_home / "config.toml").write_text(config)
    env = {**os.environ, "HOME": str(home), "RODER_HOME": str(roder_home)}
    steps = [{"tool_calls": [{"name": "bash", "arguments": {"command": c}, "id": f"c{n}"}]} for n, c in enumerate(commands)]
    runtime = start(workspace, [*steps, {"text": "done"}], mode="bypass", sandbox=None, interactive=False, env=env).runtime
    try:
        thread = await runtime.start_thread()
        turn = await runtime.run_turn(thread.id, "read the keys")
        assert turn.status == "completed"
        return [item.text for item in runtime.thread(thread.id).items() if isinstance(item, ToolResultItem)]
    finally:
        await runtime.close()


def secrets_of(home: Path) -> list[str]:
    return [(home / ".ssh" / "id_rsa").read_text().strip(), (home / ".netrc").read_text().strip()]


async def test_a_bind_mount_of_a_folder_above_the_secret_is_masked_too(workspace: Path, home: Path, mount_point: Path) -> None:
    bind(home.parent, mount_point)
    results = await run_commands(
        workspace,
        home,
        [
            f"cat {home}/.ssh/id_rsa; cat {mount_point}/home/.ssh/id_rsa; cat {mount_point}/home/.netrc; "
            f"ls -a {mount_point}/home/.ssh; echo reached-the-alias"
        ],
    )
    assert "reached-the-alias" in results[0], results  # the command ran, through the alias
    for secret in secrets_of(home):
        assert secret not in results[0], results


async def test_a_bind_mount_of_the_secret_folder_itself_is_masked_too(workspace: Path, home: Path, mount_point: Path) -> None:
    bind(home / ".ssh", mount_point)
    results = await run_commands(workspace, home, [f"cat {mount_point}/id_rsa; ls -a {mount_point}; echo ran"])
    assert "ran" in results[0]
    assert secrets_of(home)[0] not in results[0], results


async def test_a_hard_link_to_a_secret_refuses_the_command_until_it_is_masked(workspace: Path, home: Path) -> None:
    """A hard link the user made elsewhere (here beside the home, outside the workspace) reaches
    the key's content: the command is refused, naming the file; with the other name in
    ``deny_read`` both are masked and commands run again."""
    other = home.parent / "backup-key"
    os.link(home / ".ssh" / "id_rsa", other)
    [refused] = await run_commands(workspace, home, [f"cat {other}"])
    assert "hard link" in refused and "id_rsa" in refused and "was not run" in refused, refused
    assert secrets_of(home)[0] not in refused
    [ran] = await run_commands(workspace, home, [f"cat {other}; echo ran"], config=f'[sandboxing]\ndeny_read = ["{other}"]\n')
    assert "ran" in ran and secrets_of(home)[0] not in ran, ran


async def test_the_sandboxs_own_proc_and_fd_views_lead_nowhere(workspace: Path, home: Path) -> None:
    """Tried and stopped: ``/proc/self/root``, ``/proc/1/root``, every process's ``cwd`` and
    ``root``, and every inherited descriptor (``/dev/fd``) inside the sandbox."""
    key = home / ".ssh" / "id_rsa"
    results = await run_commands(
        workspace,
        home,
        [
            f"cat /proc/self/root{key} /proc/1/root{key} /proc/1/cwd/../../{key}; "
            f"for p in /proc/[0-9]*; do cat $p/root{key} $p/cwd{key}; done; "
            "for fd in /dev/fd/* /proc/self/fd/*; do readlink $fd; [ -f $fd ] && head -c 200 $fd; done; echo looked-everywhere"
        ],
    )
    assert "looked-everywhere" in results[0], results
    assert secrets_of(home)[0] not in results[0], results
