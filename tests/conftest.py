"""Shared fixtures. Every test runs with its own RODER_HOME and never sees the user's files."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """A suite started in the background by a non-interactive shell (``.ci/run ... &``) inherits
    SIGINT ignored, and so would every Roder process it starts: the tests of what Ctrl+C does
    would then wait forever. Deliver it as a terminal does, to this process and its children."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


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


#: Areas whose tests start whole programs, servers, containers, ssh daemons or batch runs, or
#: attack the sandbox through the real loop: ``pytest -m "not slow"`` (the contributors' quick
#: lane, see CONTRIBUTING.md) leaves them out; CI and the README's command run everything.
SLOW_AREAS = frozenset({"e2e", "runners", "batch", "security"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark as ``slow`` every test of a slow area and every end-to-end (``e2e``) test."""
    tests = Path(__file__).resolve().parent
    for item in items:
        relative = item.path.resolve().relative_to(tests)
        if relative.parts[0] in SLOW_AREAS or item.get_closest_marker("e2e") is not None:
            item.add_marker(pytest.mark.slow)
