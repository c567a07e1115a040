"""Fixtures of the app tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def fixed_workspace(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    # The status bar shows the workspace with the home folder as "~": a workspace under a private
    # HOME reads "~/ws" wherever TMPDIR points and however many runs share the machine.
    root = Path(tempfile.mkdtemp(prefix="roder-snapshot-"))
    monkeypatch.setenv("HOME", str(root))
    workspace = root / "ws"
    workspace.mkdir()
    monkeypatch.setattr("roder_tui.widgets.sidebar.clock", lambda: 0.0)
    monkeypatch.setattr("roder_tui.widgets.messages.format_duration", lambda _ms: "12ms")
    yield workspace
    shutil.rmtree(root, ignore_errors=True)
