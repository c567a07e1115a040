"""A provider backoff shows as a notice in the app, with the reason and the wait."""

from __future__ import annotations

from pathlib import Path

import pytest

from roder_core.testing.fake_server import FakeModelServer
from tests.tui.helpers import ask, make_app, ready


async def test_a_retry_shows_a_notice(workspace: Path, roder_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    steps = [{"status": 503, "error": {"message": "overloaded, try later"}}, {"text": "Back again."}]
    async with FakeModelServer(steps, models=("my-model",)) as server:
        (roder_home / "config.toml").write_text(
            f'[providers.local]\ndialect = "chat-completions"\nbase_url = "{server.base_url}"\nmodels = ["my-model"]\n'
        )
        app = make_app(workspace, None, monkeypatch, provider="local")
        notes: list[tuple[str, str]] = []
        original = app.notify
        monkeypatch.setattr(
            app, "notify", lambda message, **kw: (notes.append((str(message), kw.get("title", ""))), original(message, **kw))
        )
        async with app.run_test(size=(100, 30)) as pilot:
            await ready(pilot)
            await ask(pilot, "hello")
    retries = [message for message, title in notes if title == "retrying"]
    assert len(retries) == 1, notes
    assert "HTTP 503" in retries[0]
    assert "overloaded, try later" in retries[0]
    assert "retry 1 of 4 in" in retries[0]
    assert len(server.calls) == 2
