"""Secrets whose variable names do not say so never reach a helper process Roder starts.

The process broker scrubs a command's environment by name (``*KEY*``, ``*TOKEN*``, ...), by the
configured providers' ``api_key_env`` and by value (the app server's ``--auth-token env:VAR``,
stored keys). Roder also starts processes that are not commands: process extensions (third-party
code confined to what it was granted), command hooks and language servers. They used to be
scrubbed by name only, so a provider key kept in ``CORP_LLM_AUTH`` or the app server's token in
``RODER_WS`` reached a process extension granted nothing, and a hook. Through the real loop (the
scripted model, a real extension process under real bubblewrap, a real hook process), neither
is in their environment now: every child's environment comes from ``scrubbed_env`` with the
run's known secrets (``HostContext.secrets``).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from roder_core.runtime.bootstrap import StartSettings
from roder_core.server.client import LocalAppClient
from tests.brokers.helpers import marker
from tests.builders import turn_tool_results
from tests.process_extensions.test_process_extensions import PROBE, call, declare, probe_env

PROVIDER_VARIABLE = "CORP_LLM_AUTH"  # a provider's api_key_env whose name says nothing
TOKEN_VARIABLE = "RODER_WS"  # the app server's --auth-token env:RODER_WS


def _configure(home: Path, hook_log: Path) -> None:
    (home / "config.toml").write_text(
        "[providers.corp]\n"
        'dialect = "chat-completions"\n'
        'base_url = "http://127.0.0.1:9/v1"\n'
        f'api_key_env = "{PROVIDER_VARIABLE}"\n'
        'models = ["corp-model"]\n\n'
        "[[hooks.UserPromptSubmit]]\n"
        f'hooks = [{{ type = "command", command = {json.dumps(_hook(hook_log))} }}]\n\n',
        encoding="utf-8",
    )


def _hook(log: Path) -> str:
    script = log.with_suffix(".py")
    script.write_text(f"import json, os\nopen({str(log)!r}, 'w').write(json.dumps(sorted(os.environ)))\n")
    return f"{sys.executable} {script}"


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed: process extensions run unconfined")
async def test_a_process_extension_and_a_hook_never_get_secrets_their_names_hide(
    roder_home: Path, workspace: Path, tmp_path: Path
) -> None:
    hook_log = tmp_path / "hook-env.json"
    _configure(roder_home, hook_log)
    marks = workspace / "marks"
    marks.mkdir()
    declare(
        roder_home, "probe", [sys.executable, str(PROBE)], [], probe_env(marks, PROBE_SECRET_FILE="/nonexistent", PROBE_PORT="9")
    )
    key, token = f"corp-{marker()}", f"ws-{marker()}"
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [call("probe"), {"text": "done"}]}))
    env = {**os.environ, PROVIDER_VARIABLE: key, TOKEN_VARIABLE: token, "RODER_MOCK_SCRIPT": str(script)}
    settings = StartSettings(
        cwd=workspace, provider="mock", mode="bypass", interactive=False, env=env, secrets={"app-server token": token}
    )
    async with LocalAppClient.start(settings) as app:
        (probed,) = await turn_tool_results(app)
    names = probed.data["env_names"]
    assert "RODER_EXTENSION_NAME" in names  # the probe did report its environment
    assert PROVIDER_VARIABLE not in names
    assert TOKEN_VARIABLE not in names
    hooked = json.loads(hook_log.read_text())
    assert "RODER_PROJECT_DIR" in hooked
    assert PROVIDER_VARIABLE not in hooked
    assert TOKEN_VARIABLE not in hooked
