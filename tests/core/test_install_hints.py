"""Hints for optional extras name a command that works for a checkout install (Roder is not on
a package index, so ``pip install 'roder[ray]'`` would fail)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from roder_core.batch.backends import BackendUnavailable, run_ray
from roder_core.kernel.install_hints import checkout_root, extra_install_hint

REPO = Path(__file__).resolve().parents[2]


def test_the_hint_installs_the_extra_from_this_checkout() -> None:
    assert checkout_root() == REPO
    assert extra_install_hint("remote") == f"pip install -e '{REPO}[remote]'"


def test_the_ray_backend_without_ray_gives_the_working_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if Ray were not installed
    with pytest.raises(BackendUnavailable) as missing:
        run_ray([], 1, lambda *_a: None)
    assert f"pip install -e '{REPO}[ray]'" in str(missing.value)
    assert "roder[ray]" not in str(missing.value)
