"""Roder starting itself again never imports the project's Python files.

``roder serve`` (also ``roder attach`` and ``roder web`` when no host runs yet) starts the host
as ``python -m roder_tui.cli serve`` in the project's folder, and every ``roder web`` page runs
``python -m roder_tui.cli attach``. A plain ``-m`` puts the working folder first on
``sys.path``: a cloned repository holding ``roder_tui/__init__.py`` or a ``json.py`` had it run
on the host, unconfined, with no trust asked, the moment the user started a host there. Both go
through ``host.roder_argv`` (``python -P``); the second test fails on a module that starts
Python on its own ``sys.executable`` any other way.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import roder_tui
from roder_tui.web import attach_command
from tests.e2e.host_support import host_env

pytestmark = pytest.mark.e2e

#: The installed ``roder`` script beside this Python.
ROD = str(Path(sys.executable).parent / "roder")
#: Module names the host imports after its start: a package of Roder's own, the standard
#: library's and a dependency's.
PLANTED = ("roder_tui/__init__.py", "roder_core/__init__.py", "json.py", "typing_extensions.py", "pydantic/__init__.py")


def test_a_host_started_in_a_hostile_folder_imports_none_of_its_files(workspace: Path, roder_home: Path, tmp_path: Path) -> None:
    ran = tmp_path / "ran.txt"
    for name in PLANTED:
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(f"open({str(ran)!r}, 'a').write({name!r} + '\\n')\n")
    (workspace / "roder_tui" / "cli.py").write_text("")
    env = host_env(roder_home)
    # ``roder serve`` as the user starts it: the installed script, whose own process has its
    # folder (not the working folder) on its path; what is under test is the host it starts
    try:
        started = subprocess.run([ROD, "serve"], cwd=workspace, env=env, capture_output=True, text=True, timeout=120)
        assert started.returncode == 0, started.stdout + started.stderr
        assert "started in the background" in started.stdout, started.stdout
    finally:
        stopped = subprocess.run([ROD, "serve", "--stop"], cwd=workspace, env=env, capture_output=True, text=True, timeout=60)
    assert "stopped" in stopped.stdout, stopped.stdout + stopped.stderr
    assert not ran.exists(), ran.read_text()


def test_every_restart_of_roder_leaves_the_working_folder_off_the_path() -> None:
    """No ``[sys.executable, ...]`` command line in Roder's code but ``host.roder_argv``'s."""
    root = Path(roder_tui.__file__).parent.parent
    found = []
    for folder in ("roder_core", "roder_tui", "extensions"):
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.List) and node.elts and ast.unparse(node.elts[0]) == "sys.executable":
                    found.append(f"{path.relative_to(root).as_posix()}:{node.lineno}")
    assert [f.rsplit(":", 1)[0] for f in found] == ["roder_tui/host.py"], found
    assert " -P -m roder_tui.cli attach" in attach_command()
