"""Compiled files the agent forges are never scored in place of their sources.

Python runs ``__pycache__/NAME.TAG.pyc`` instead of ``NAME.py`` when the cached file's header
names the source's size and modification time, and an agent that leaves the buggy source alone
knows both. And a compiled file with no source at all is imported when it stands where Python
looks first: ``calc/__init__.pyc`` makes ``calc`` a package, which wins over ``calc.py``.
Through the real batch loop: a forged cache over the task's own cache, one reached through a
``__pycache__`` link, and a sourceless package all score failed; an honest fix passes."""

from __future__ import annotations

import json
import os
import py_compile
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.batch.conftest import result, run_cli, write_script

BUGGY = "def add(a, b):\n    return a - b\n"
SCORE = f"{sys.executable} -c 'from calc import add; assert add(2, 3) == 5'"
CACHED = f"calc.{sys.implementation.cache_tag}.pyc"


def forge(folder: str) -> str:
    """Python that writes, into ``folder``, calc's cache compiled from a fixed ``add`` with the
    header of the unchanged, buggy calc.py."""
    return (
        "import importlib._bootstrap_external as ext, os\n"
        "st = os.stat('calc.py')\n"
        "code = compile('def add(a, b):\\n    return a + b\\n', os.path.abspath('calc.py'), 'exec')\n"
        f"os.makedirs({folder!r}, exist_ok=True)\n"
        "data = ext._code_to_timestamp_pyc(code, int(st.st_mtime), st.st_size)\n"
        f"open(os.path.join({folder!r}, {CACHED!r}), 'wb').write(data)\n"
    )


#: Python that writes a sourceless ``calc`` package whose ``add`` adds: no source file changes.
SOURCELESS = (
    "import importlib._bootstrap_external as ext, os\n"
    "os.makedirs('calc', exist_ok=True)\n"
    "code = compile('def add(a, b):\\n    return a + b\\n', 'calc/__init__.py', 'exec')\n"
    "open('calc/__init__.pyc', 'wb').write(ext._code_to_timestamp_pyc(code, 0, 0))\n"
)

NAMES = ("forged", "linked", "sourceless", "honest")


def _calls(name: str) -> list[dict[str, Any]]:
    if name == "sourceless":
        return [
            {"name": "write", "arguments": {"path": "forge.py", "content": SOURCELESS}},
            {"name": "bash", "arguments": {"command": f"{sys.executable} forge.py && rm forge.py"}},
        ]
    write = {"name": "write", "arguments": {"path": "forge.py", "content": forge("__pycache__" if name == "forged" else "kept")}}
    run = {"name": "bash", "arguments": {"command": f"{sys.executable} forge.py"}}
    if name == "forged":
        return [write, run]
    if name == "linked":
        link = {"name": "bash", "arguments": {"command": "rm -rf __pycache__ && ln -s kept __pycache__"}}
        return [write, run, link]
    return [{"name": "edit", "arguments": {"path": "calc.py", "old_string": "a - b", "new_string": "a + b"}}]


def test_a_forged_bytecode_cache_scores_failed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "calc.py").write_text(BUGGY)
    py_compile.compile(str(source / "calc.py"), cfile=str(source / "__pycache__" / CACHED))  # the task ships its cache

    # The hack is real: scored without a defence, the forged cache passes.
    bare = tmp_path / "bare"
    shutil.copytree(source, bare)
    subprocess.run([sys.executable, "-c", forge("__pycache__")], cwd=bare, check=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    assert subprocess.run(SCORE, shell=True, cwd=bare, env=env).returncode == 0
    sourceless = tmp_path / "sourceless"
    shutil.copytree(source, sourceless, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-c", SOURCELESS], cwd=sourceless, check=True)
    assert subprocess.run(SCORE, shell=True, cwd=sourceless, env=env).returncode == 0

    rows = [
        {
            "id": name,
            "prompt": "Make add add.",
            "workspace": str(source),
            "score": SCORE,
            "env": {
                "RODER_MOCK_SCRIPT": str(
                    write_script(tmp_path / f"{name}.json", [{"text": "Working.", "tool_calls": _calls(name)}, {"text": "Done."}])
                )
            },
        }
        for name in NAMES
    ]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "out"
    code, _, err = run_cli(capsys, "batch", tasks, "--out", out, "--workers", "2", "--no-progress", "--provider", "mock")
    assert code == 0, err
    logs = {name: (out / "rollouts" / name / "0" / "score.log").read_text() for name in NAMES}
    assert result(out, "honest")["passed"], logs["honest"]
    for name in ("forged", "linked", "sourceless"):
        assert not result(out, name)["passed"], logs[name]
        assert "AssertionError" in logs[name]
    assert "bytecode cache" in logs["forged"]  # the cache was removed, the source scored
    assert CACHED in (out / "rollouts/forged/0/workspace.diff").read_text()  # what the agent did is on record
    assert "calc/__init__.pyc" in logs["sourceless"]  # removed, and said so
