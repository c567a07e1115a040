"""A confined process kept under /tmp sees its own package, and nothing hidden inside it.

The sandbox's /tmp is private, so a program kept in a clone under /tmp is shown to it: its whole
package, read-only (``brokers/confined.program_folders``). Roder's own folders and a workspace
the process was not granted may sit inside that package; showing it must not bring them back.
Real bubblewrap, a real process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from roder_core.brokers.confined import confine, program_folders
from roder_core.brokers.sandbox import sandbox_status
from roder_core.brokers.secrets import SecretRedactor

READER = """
import sys
for path in sys.argv[1:]:
    if path.startswith("write:"):
        try:
            with open(path[6:], "w") as handle:
                handle.write("WRITTEN")
            print("WROTE", path[6:])
        except OSError as exc:
            print("DENIED", path[6:], type(exc).__name__)
        continue
    try:
        with open(path) as handle:
            print("READ", path, handle.read().strip())
    except OSError as exc:
        print("DENIED", path, type(exc).__name__)
"""


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """``pkg/`` under /tmp: a package marker, the program in ``tool/``, Roder's home with a
    credential in ``home/``, and a workspace with a file in ``ws/``."""
    if not str(tmp_path).startswith("/tmp/"):
        pytest.skip(f"the case is a package under the private /tmp; pytest's tmp_path is {tmp_path}")
    if sandbox_status(None).bwrap is None:
        pytest.skip("bubblewrap is not available")
    pkg = tmp_path / "pkg"
    (pkg / "tool").mkdir(parents=True)
    (pkg / "pyproject.toml").write_text("[project]\nname = 'tool'\n")
    (pkg / "tool" / "reader.py").write_text(READER)
    (pkg / "home").mkdir()
    (pkg / "home" / "credentials.json").write_text("CREDENTIAL-MARK")
    (pkg / "ws").mkdir()
    (pkg / "ws" / "notes.txt").write_text("WORKSPACE-MARK")
    (pkg / "README").write_text("PACKAGE-MARK")
    return pkg


def _run(package: Path, *, reads: bool, writes: bool = False) -> str:
    targets = [package / "README", package / "home" / "credentials.json", package / "ws" / "notes.txt"]
    targets.append(Path(f"write:{package / 'ws' / 'out.txt'}"))
    command = confine(
        [sys.executable, str(package / "tool" / "reader.py"), *map(str, targets)],
        package / "ws",
        dict(os.environ),
        known=SecretRedactor(),
        reads=reads,
        writes=writes,
        network=False,
        hidden=[package / "home"],
    )
    assert command.sandboxed
    done = subprocess.run(command.argv, env=command.env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_shown_package_brings_back_nothing_hidden_in_it(package: Path) -> None:
    out = _run(package, reads=False)
    assert "PACKAGE-MARK" in out  # the package is shown: the program ran from it
    assert "CREDENTIAL-MARK" not in out and f"DENIED {package / 'home' / 'credentials.json'}" in out
    assert "WORKSPACE-MARK" not in out  # the workspace was not granted


def test_a_granted_workspace_inside_a_shown_package_is_bound_back(package: Path) -> None:
    out = _run(package, reads=True)
    assert "WORKSPACE-MARK" in out and "PACKAGE-MARK" in out
    assert "CREDENTIAL-MARK" not in out


def test_a_writable_workspace_inside_a_shown_package_keeps_its_grant(package: Path) -> None:
    """The package holding the workspace is shown read-only; the workspace bound inside it
    stays writable (the outer bind must not cover the grant)."""
    out = _run(package, reads=True, writes=True)
    assert f"WROTE {package / 'ws' / 'out.txt'}" in out, out
    assert (package / "ws" / "out.txt").read_text() == "WRITTEN"
    assert "CREDENTIAL-MARK" not in out


def test_a_program_linked_into_another_package_under_tmp_runs(package: Path) -> None:
    """npm's ``node_modules/.bin/NAME`` is a link into the program's own package: both the
    folder it is named in and the package it leads to are shown, so the program starts and
    reads its package's files (the folder of the link alone would leave the link dangling)."""
    tools = package.parent / "tools"
    server = tools / "node_modules" / "server"
    (server / "lib").mkdir(parents=True)
    (server / "package.json").write_text('{"name": "server"}')
    (server / "data.txt").write_text("SERVER-MARK")
    script = server / "lib" / "cli.sh"
    script.write_text('#!/bin/sh\ncat "$(dirname "$(readlink -f "$0")")/../data.txt"\n')
    script.chmod(0o755)
    links = package.parent / "links" / "bin"
    links.mkdir(parents=True)
    (links / "server").symlink_to(script)
    assert program_folders([str(links / "server")], {}) == [links, server]
    command = confine(
        [str(links / "server")],
        package / "ws",
        {"PATH": "/usr/bin:/bin"},
        known=SecretRedactor(),
        reads=True,
        writes=False,
        network=False,
    )
    done = subprocess.run(command.argv, env=command.env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "SERVER-MARK"), done.stderr
