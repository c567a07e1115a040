"""Ray batches with a provider defined in the driver's config.toml (which the Ray workers' own
config lacks), a Ray worker killed mid-rollout (Ray does not retry it on its own: the driver
records the lost attempt, then retries), and errors that stay on one line."""

from __future__ import annotations

import os
import signal
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

from roder_core.testing.fake_server import ThreadedFakeServer
from tests.batch.conftest import result, run_cli, write_jsonl
from tests.builders import wait_until

FIX = [
    {
        "text": "Fixing add.",
        "tool_calls": [{"name": "edit", "arguments": {"path": "calc.py", "old_string": "a - b", "new_string": "a + b"}}],
    },
    {"text": "Fixed."},
]


def _descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        pid = int(stat[stat.rfind(")") + 2 :].split()[1])
        if pid == ancestor:
            return True
    return False


def _our_rollout_workers() -> list[int]:
    """Ray workers of this test's instance that are inside a rollout (scratch copy present)."""
    found = []
    for folder in Path(tempfile.gettempdir()).glob("roder-rollout-*-*"):
        pid = folder.name.split("-")[2]
        if pid.isdigit() and _descends_from(int(pid), os.getpid()):
            found.append(int(pid))
    return found


@pytest.mark.timeout(400)
def test_a_config_defined_provider_reaches_ray_workers_and_a_killed_worker_is_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], ray_instance: None
) -> None:
    calc = tmp_path / "calc"
    calc.mkdir()
    (calc / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    # The first answer waits at a gate: its worker is killed there; the retry gets the fix.
    steps: list[dict[str, Any]] = [{"text": "Thinking about it.", "gate": "held", "gate_after": 1}, *FIX]
    with ThreadedFakeServer(steps) as server:
        home = Path(os.environ["RODER_HOME"])  # the driver's; the Ray workers have another one
        (home / "config.toml").write_text(
            f'[providers.fk]\ndialect = "chat-completions"\nbase_url = "{server.base_url}"\nmodels = ["fk-model"]\n'
            'headers = { "x-team" = "evals", "authorization" = "Bearer sk-literal-0123456789abcdef0123" }\n'
        )
        tasks = write_jsonl(
            tmp_path / "tasks.jsonl",
            [{"id": "fix", "prompt": "Fix add.", "workspace": str(calc), "score": "grep -q 'a + b' calc.py"}],
        )
        out = tmp_path / "out"
        outcome: dict[str, Any] = {}

        def batch() -> None:
            outcome["code"], _, outcome["err"] = run_cli(
                capsys, "batch", tasks, "--out", out, "--provider", "fk", "--backend", "ray", "--no-progress"
            )

        runner = threading.Thread(target=batch)
        runner.start()
        try:
            wait_until(
                lambda: server.gate_reached("held").is_set() and _our_rollout_workers(),
                "the first attempt at its gate",
                timeout=240,
            )
            for pid in _our_rollout_workers():
                os.kill(pid, signal.SIGKILL)
            wait_until(
                lambda: (out / "rollouts" / "fix" / "0.attempts.json").exists() or not runner.is_alive(),
                "the lost attempt on disk",
            )
        finally:
            server.open_gate("held")
            runner.join(timeout=300)
    assert outcome["code"] == 0, outcome["err"]
    assert "Traceback" not in outcome["err"]
    fixed = result(out, "fix")
    assert fixed["passed"], fixed
    assert fixed["provider"] == "fk" and fixed["model"] == "fk-model"
    assert fixed["attempts"] == 2
    [lost] = fixed["discarded_attempts"]
    assert lost["cause"] == "infra_failure"
    assert "\n" not in lost["error"]
    assert not (out / "rollouts" / "fix" / "0.attempts.json").exists()  # the record holds it now
    assert "sk-literal" not in (out / "batch.json").read_text()  # the table travels without credentials
    assert '"x-team": "evals"' in (out / "batch.json").read_text()
    # Requests went to the driver's configured endpoint from the Ray worker: the gated one and two more.
    assert len(server.calls) == 3
