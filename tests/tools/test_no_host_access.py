"""Tools reach the machine only through brokers: no tool module may import os, subprocess,
socket (or their cousins) or call ``open`` itself. The checker is tested on bad samples too, so
this test can fail."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import roder_ext_builtin_coding_tools

#: Modules that reach the host (files, processes, network) or load code dynamically.
BANNED_MODULES = frozenset(
    {
        "os",
        "subprocess",
        "socket",
        "shutil",
        "pty",
        "tempfile",
        "glob",
        "pathlib",
        "io",
        "signal",
        "ssl",
        "http",
        "urllib.request",
        "httpx",
        "requests",
        "asyncio.subprocess",
        "ctypes",
        "importlib",
        "mmap",
    }
)
#: Pure names from banned modules that do not touch the machine.
ALLOWED_NAMES = {"pathlib": {"PurePath", "PurePosixPath"}}
BANNED_CALLS = frozenset({"open", "exec", "eval", "compile", "__import__"})
BANNED_ATTRIBUTES = frozenset(
    {"create_subprocess_exec", "create_subprocess_shell", "open_connection", "open_unix_connection", "start_server"}
)
#: posixpath is os.path: only its string functions may be used.
PURE_POSIXPATH = frozenset(
    {"normpath", "join", "basename", "dirname", "split", "splitext", "isabs", "commonpath", "commonprefix"}
)


def violations(source: str) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in BANNED_MODULES or alias.name.split(".")[0] in BANNED_MODULES:
                    found.append(f"line {node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module in ("posixpath", "genericpath"):
            found += [
                f"line {node.lineno}: from {node.module} import {a.name}" for a in node.names if a.name not in PURE_POSIXPATH
            ]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            root = node.module.split(".")[0]
            if node.module in BANNED_MODULES or root in BANNED_MODULES:
                allowed = ALLOWED_NAMES.get(node.module, set())
                for alias in node.names:
                    if alias.name not in allowed:
                        found.append(f"line {node.lineno}: from {node.module} import {alias.name}")
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in BANNED_CALLS:
                found.append(f"line {node.lineno}: {func.id}()")
            if isinstance(func, ast.Attribute) and func.attr in BANNED_ATTRIBUTES:
                found.append(f"line {node.lineno}: .{func.attr}()")
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == "posixpath"
                and func.attr not in PURE_POSIXPATH
            ):
                found.append(f"line {node.lineno}: posixpath.{func.attr}()")
    return found


TOOL_MODULES = sorted(Path(roder_ext_builtin_coding_tools.__file__).parent.glob("*.py"))


@pytest.mark.parametrize("module", TOOL_MODULES, ids=lambda p: p.name)
def test_tool_module_does_not_touch_the_host(module: Path) -> None:
    assert violations(module.read_text(encoding="utf-8")) == []


def test_every_tool_module_is_checked() -> None:
    names = {p.name for p in TOOL_MODULES}
    assert {"read.py", "write.py", "edit.py", "patch.py", "bash.py", "search.py", "web.py"} <= names


@pytest.mark.parametrize(
    "source",
    [
        "import os\n",
        "import subprocess\n",
        "from socket import create_connection\n",
        "from pathlib import Path\n",
        "import shutil as s\n",
        "data = open('x').read()\n",
        "import asyncio\nasyncio.create_subprocess_exec('ls')\n",
        "from os.path import realpath\n",
        "__import__('os').system('id')\n",
        "import posixpath\nposixpath.exists('/etc')\n",
        "from posixpath import realpath\n",
    ],
)
def test_checker_catches_host_access(source: str) -> None:
    assert violations(source), source


def test_checker_allows_pure_helpers() -> None:
    assert violations("from pathlib import PurePath\nimport posixpath\nimport re\nimport difflib\n") == []
