"""Shared fixtures. Every test runs with its own RODER_HOME and never sees the user's files."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def roder_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path / "roder-home"
    home.mkdir()
    monkeypatch.setenv("RODER_HOME", str(home))
    for key in list(os.environ):
        if key.endswith("_API_KEY") or key in {"OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "RODER_MOCK_SCRIPT"}:
            monkeypatch.delenv(key, raising=False)
    yield home


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws
