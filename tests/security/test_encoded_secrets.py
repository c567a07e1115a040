"""A secret shown encoded is still a secret: a command that prints a file holding a secret's
value as base64 (wrapped at 76 columns, as ``base64`` does, or on one line), as hex
or percent-encoded leaves the marker in the model's request, the stored thread and every file in
Roder's folders, never the encoded value (``SecretRedactor``, the one redactor, knows each value's
encoded forms)."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from roder_core.runtime.bootstrap import StartSettings, start_runtime
from roder_core.testing.fake_server import FakeModelServer
from tests.brokers.helpers import marker


def _bash(command: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}


@pytest.mark.parametrize(
    ("command", "encode"),
    [
        ("base64 notes.txt", lambda text: base64.encodebytes(text.encode()).decode()),
        ("base64 -w0 notes.txt", lambda text: base64.b64encode(text.encode()).decode()),
        ("basenc --base64url -w0 notes.txt", lambda text: base64.urlsafe_b64encode(text.encode()).decode()),
        ('python3 -c \'print(open("notes.txt", "rb").read().hex())\'', lambda text: text.encode().hex()),
        (
            'python3 -c \'import sys, urllib.parse; print(urllib.parse.quote(open("notes.txt").read(), safe=""))\'',
            lambda text: quote(text, safe=""),
        ),
    ],
    ids=["base64-wrapped", "base64-one-line", "base64url", "hex", "percent"],
)
async def test_an_encoded_secret_never_reaches_the_model_or_the_thread(
    workspace: Path, roder_home: Path, command: str, encode: Any
) -> None:
    secret = f"db/{marker()}+secret?value&more"
    text = "x" * 61 + f"\ntoken = {secret}\n"  # the value straddles base64's line break
    (workspace / "notes.txt").write_text(text)
    async with FakeModelServer([_bash(command), {"text": "done"}]) as server:
        (roder_home / "config.toml").write_text(
            '[providers.local]\ndialect = "chat-completions"\n'
            f'base_url = "{server.base_url}"\napi_key_env = "LOCAL_API_KEY"\nmodels = ["fake-model"]\n'
        )
        env = {**os.environ, "LOCAL_API_KEY": "sk-local-1", "APP_DB_SECRET": secret}
        runtime = start_runtime(StartSettings(cwd=workspace, provider="local", mode="bypass", interactive=False, env=env)).runtime
        try:
            thread = await runtime.start_thread()
            await runtime.run_turn(thread.id, "show the notes")
        finally:
            await runtime.close()
        model_saw = server.calls[-1].body.decode("utf-8")
    assert "[redacted:APP_DB_SECRET]" in model_saw, model_saw[-2000:]
    holding = [p for p in roder_home.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    assert holding == [], holding
    stored = "".join(p.read_text(errors="replace") for p in roder_home.rglob("*.jsonl"))
    assert stored and "[redacted:APP_DB_SECRET]" in stored
    for form in _forms(secret):
        assert form not in model_saw.replace("\\n", ""), form
        assert form not in stored.replace("\\n", ""), form


def _forms(secret: str) -> list[str]:
    """The middle of the secret's base64 at each alignment (standard and URL-safe), its hex and
    its percent-encoding, worked out here independently of Roder."""
    data = secret.encode()
    forms = [quote(secret, safe=""), data.hex()]
    for pad in range(3):
        middle = base64.b64encode(b"\0" * pad + data).decode()[4:-4]
        forms += [middle, middle.replace("+", "-").replace("/", "_")]
    return forms
