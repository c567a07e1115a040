"""The OpenSSH server every ssh runner test uses: one per test session (``sshd.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.runners.sshd import Sshd, start_sshd, why_not


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    reason = why_not()
    if reason is not None:
        pytest.skip(f"no OpenSSH server for the ssh runner tests: {reason}")
    try:
        server = start_sshd(tmp_path_factory.mktemp("sshd"))
    except RuntimeError as exc:
        pytest.skip(f"sshd cannot run on this machine: {exc}")
    try:
        yield server
    finally:
        server.stop()
