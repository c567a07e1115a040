"""config.toml never fails open (``settings.config.key_problems``).

A misspelt security table or key (``[polcy]``, ``dney``, ``deny_reed``) stops ``roder`` before it
starts, with one line naming the key and the nearest valid one; other unknown keys are warnings
naming the nearest valid one; a typo in one provider table disables that provider alone. Each
case runs the real ``roder -p`` against the loopback model server.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from roder_core.testing.fake_server import ThreadedFakeServer


def roder(*args: str, home: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RODER_HOME": str(home), "LOCAL_API_KEY": "sk-local-abc12345"}
    env.pop("RODER_MOCK_SCRIPT", None)
    return subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


FATAL = {
    "misspelt-table": ('[polcy]\ndeny = ["bash(rm *)"]\n', "[polcy]; did you mean 'policy'?"),
    "misspelt-deny": ('[policy]\ndney = ["bash(rm *)"]\n', "'dney' in [policy]; did you mean 'deny'?"),
    "misspelt-deny-read": ('[sandboxing]\ndeny_reed = ["~/secrets"]\n', "'deny_reed' in [sandboxing]"),
    "misspelt-network": ('[network]\nalow = ["*"]\n', "'alow' in [network]; did you mean 'allow'?"),
    "misspelt-limits": ("[limits]\nmemory = 100\n", "'memory' in [limits]"),
    "trust-table": ('[trust]\nfolders = ["/"]\n', "[trust]"),
    "misspelt-sandboxing": ('[sandboxng]\ndeny_read = ["~/x"]\n', "did you mean 'sandboxing'?"),
    "top-level-key-after-a-table": ('[network]\nallow = []\nmode = "plan"\n', "'mode' in [network]"),
    "capitalised-table": ('[Policy]\ndeny = ["bash(*)"]\n', "did you mean 'policy'?"),
}


@pytest.mark.parametrize("case", list(FATAL), ids=list(FATAL))
def test_a_mistake_in_a_security_table_stops_roder(case: str, workspace: Path, roder_home: Path) -> None:
    text, words = FATAL[case]
    (roder_home / "config.toml").write_text(text)
    done = roder("-p", "hello", "--provider", "mock", home=roder_home, cwd=workspace)
    assert done.returncode != 0
    assert words in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stdout == ""


def test_a_trusted_projects_misspelt_policy_stops_roder_too(workspace: Path, roder_home: Path) -> None:
    (workspace / ".roder").mkdir()
    (workspace / ".roder" / "config.toml").write_text('[polcy]\ndeny = ["bash(*)"]\n')
    done = roder("-p", "hello", "--provider", "mock", "--trust", home=roder_home, cwd=workspace)
    assert done.returncode != 0 and "did you mean 'policy'?" in done.stderr, done.stderr


def test_other_unknown_keys_warn_and_a_provider_typo_disables_that_provider_alone(workspace: Path, roder_home: Path) -> None:
    with ThreadedFakeServer([{"text": "answer from the fine provider"}]) as server:
        (roder_home / "config.toml").write_text(
            "[contxt]\nauto_compact = false\n"
            '[providers.typo]\ndialect = "chat-completions"\n'
            f'base_url = "{server.base_url}"\napi_key_evn = "LOCAL_API_KEY"\nmodels = ["fake-model"]\n'
            '[providers.fine]\ndialect = "chat-completions"\n'
            f'base_url = "{server.base_url}"\napi_key_env = "LOCAL_API_KEY"\nmodels = ["fake-model"]\n'
        )
        done = roder("-p", "hello", "--provider", "fine", home=roder_home, cwd=workspace)
        assert done.returncode == 0, done.stderr
        assert "answer from the fine provider" in done.stdout
        assert "unknown table [contxt]; did you mean 'context'?" in done.stderr, done.stderr
        assert "api_key_evn: unknown key; did you mean 'api_key_env'?" in done.stderr, done.stderr
        typo = roder("-p", "hello", "--provider", "typo", home=roder_home, cwd=workspace)
        assert typo.returncode != 0
        assert "api_key_evn" in typo.stderr, typo.stderr
