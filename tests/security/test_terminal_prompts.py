"""Questions Roder asks on the terminal show what they quote; they never send it raw.

``guard_stdio`` wraps ``sys.stdout`` and ``sys.stderr``, but ``input()`` writes its prompt
through readline to the C library's stdout and ``getpass`` to ``/dev/tty``, both past the
wrapper. ``roder plugin install`` asks for a plugin's required options with the title and
description its manifest gives them, so a marketplace's plugin put an OSC 52 clipboard write, a
title change or a bidi override on the user's terminal at install time. Every prompt now goes
through ``terminal_text.ask``, which makes the question visible first; the second test fails on
a module that prompts another way.
"""

from __future__ import annotations

import ast
import os
import pty
import select
import subprocess
from pathlib import Path

import pytest

import roder_tui
from tests.plugins.support import marketplace, write_json
from tests.security.terminal_support import HOSTILE, SHOWN, payload_sequences
from tests.server.support import roder_command

pytestmark = pytest.mark.e2e


def _hostile_plugin(root: Path) -> Path:
    write_json(
        root / "shady" / ".claude-plugin" / "plugin.json",
        {
            "name": "shady",
            "version": "1.0.0",
            "userConfig": {
                "REGION": {"type": "string", "title": f"Region {HOSTILE} Q1END", "required": True},
                "TOKEN": {
                    "type": "string",
                    "title": "Token",
                    "description": f"{HOSTILE} Q2END",
                    "required": True,
                    "sensitive": True,
                },
            },
        },
    )
    return marketplace(root, "evil", [{"name": "shady", "source": "./shady"}])


def _until(main: int, marker: bytes, raw: bytearray) -> None:
    while marker not in raw:
        ready, _, _ = select.select([main], [], [], 60)
        assert ready, bytes(raw)
        raw += os.read(main, 65536)


def test_plugin_option_prompts_show_the_manifests_sequences(tmp_path: Path, workspace: Path, roder_home: Path) -> None:
    catalog = _hostile_plugin(tmp_path / "market")
    added = subprocess.run(
        roder_command("plugin", "marketplace", "add", str(catalog)), cwd=workspace, capture_output=True, timeout=120
    )
    assert added.returncode == 0, added.stderr
    main, child = pty.openpty()
    proc = subprocess.Popen(
        roder_command("plugin", "install", "shady@evil"), stdin=child, stdout=child, stderr=child, cwd=workspace
    )
    os.close(child)
    raw = bytearray()
    try:
        _until(main, b"Q1END: ", raw)
        os.write(main, b"eu\n")
        _until(main, b"Q2END): ", raw)
        os.write(main, b"tok-123\n")
        _until(main, b"installed shady@evil", raw)
    finally:
        assert proc.wait(timeout=120) == 0, bytes(raw)
        os.close(main)
    text = raw.decode("utf-8", errors="replace")
    assert payload_sequences(bytes(raw)) == [], text
    assert all(part in text for part in SHOWN), text


def _prompts(tree: ast.AST) -> list[int]:
    """Lines that call ``input``/``getpass`` or import ``getpass``."""
    lines = []
    for node in ast.walk(tree):
        called = node.func if isinstance(node, ast.Call) else None
        name = called.id if isinstance(called, ast.Name) else called.attr if isinstance(called, ast.Attribute) else ""
        imported = isinstance(node, ast.alias) and node.name == "getpass"
        if isinstance(node, (ast.Call, ast.alias)) and (name in ("input", "getpass") or imported):
            lines.append(node.lineno)
    return sorted(lines)


def test_only_the_one_asker_prompts_on_the_terminal() -> None:
    """``input(...)`` and ``getpass`` nowhere in Roder's own code but inside ``terminal_text.ask``."""
    root = Path(roder_tui.__file__).parent.parent
    found = []
    for folder in ("roder_core", "roder_tui", "extensions"):
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            if path.relative_to(root).as_posix() == "roder_tui/terminal_text.py":
                ask = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "ask")
                assert _prompts(ask), "terminal_text.ask no longer prompts: update this test"
                outside = set(_prompts(tree)) - set(_prompts(ask))
            else:
                outside = set(_prompts(tree))
            found += [f"{path.relative_to(root)}:{line}" for line in sorted(outside)]
    assert found == [], found
