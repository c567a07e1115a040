"""The real `roder` against the fake server running as its own process (as other suites use it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from roder_tui.cli import main

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-e2e-DONOTLEAK0123456789"


@pytest.fixture
def fake_server(tmp_path: Path) -> Iterator[tuple[str, Path, Path]]:
    """Starts ``roder dev fake-server`` outside the checkout; yields (base url, script path, request log)."""
    script, log = tmp_path / "script.json", tmp_path / "requests.jsonl"
    script.write_text(
        json.dumps(
            {
                "steps": [
                    {"status": 429, "headers": {"retry-after": "1"}},
                    {"text": "The answer is 42, computed carefully.", "drop_after": 4},
                    {"text": "The answer is 42, computed carefully."},
                    {"status": 401, "error": {"message": f"Incorrect API key provided: {KEY}"}},
                ]
            }
        )
    )
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "roder_tui.cli",
            "dev",
            "fake-server",
            "--script",
            str(script),
            "--port",
            "0",
            "--model",
            "my-model",
            "--log",
            str(log),
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        yield url, script, log
    finally:
        process.terminate()
        process.wait(timeout=10)


def roder(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(RODER_HOME=str(home), LOCAL_API_KEY=KEY)
    return subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


def configure(home: Path, url: str) -> None:
    (home / "config.toml").write_text(
        f'[providers.local]\ndialect = "chat-completions"\nbase_url = "{url}"\n'
        'api_key_env = "LOCAL_API_KEY"\nmodels = ["my-model"]\n'
    )


@pytest.mark.e2e
def test_one_shot_survives_429_and_a_dropped_stream_then_reports_401(
    fake_server: tuple[str, Path, Path], roder_home: Path, workspace: Path
) -> None:
    url, _script, log = fake_server
    configure(roder_home, url)
    done = roder(roder_home, workspace, "-p", "what is the answer?", "--provider", "local", "--model", "my-model")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "The answer is 42, computed carefully."  # nothing repeated after the retry
    notices = [line for line in done.stderr.splitlines() if "; retry " in line]
    assert len(notices) == 2, done.stderr  # every backoff is said on stderr, never a silent stall
    assert notices[0].startswith("roder: local: rate limited (HTTP 429)")
    assert notices[0].endswith("retry 1 of 4 in 1.0 s")
    assert "the stream broke off" in notices[1] or "ended before" in notices[1]
    requests = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["path"] for r in requests] == ["/v1/chat/completions"] * 3
    assert requests[0]["json"]["model"] == "my-model"
    assert requests[0]["headers"]["authorization"] == "***"

    failed = roder(roder_home, workspace, "-p", "again", "--provider", "local", "--model", "my-model")
    assert failed.returncode == 1
    lines = [line for line in failed.stderr.splitlines() if line.startswith("roder: turn failed")]
    assert len(lines) == 1
    assert "HTTP 401" in lines[0]
    assert "LOCAL_API_KEY" in lines[0]
    assert KEY not in failed.stderr + failed.stdout
    for path in roder_home.rglob("*"):  # keys are never persisted
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path


def test_providers_list_and_models(
    fake_server: tuple[str, Path, Path], roder_home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _script, _log = fake_server
    (roder_home / "config.toml").write_text(
        f'[providers.local]\ndialect = "chat-completions"\nbase_url = "{url}"\napi_key_env = "LOCAL_API_KEY"\n'
        'models = ["my-model", "mystery-model"]\n'
        '[providers.ollama]\nbase_url = "http://127.0.0.1:9/v1"\n'
        '[models."local/my-model"]\ncontext_window = 32768\nmax_output_tokens = 4096\n'
    )
    monkeypatch.setenv("LOCAL_API_KEY", KEY)
    assert main(["providers", "list"]) == 0
    listing = capsys.readouterr().out
    assert "local" in listing
    assert "LOCAL_API_KEY set" in listing
    assert "OPENAI_API_KEY missing" in listing
    assert "default: local (LOCAL_API_KEY is set)" in listing
    assert KEY not in listing

    assert main(["models", "--provider", "local"]) == 0
    models = capsys.readouterr().out
    assert "my-model" in models
    assert "32,768" in models
    assert "4,096" in models
    mystery = next(line for line in models.splitlines() if "mystery-model" in line)
    assert "mystery-model ?" in mystery
    assert mystery.split()[3] == "-"  # a guessed limit is never sent

    assert main(["models", "--provider", "local", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data[0]["models"][0]["id"] == "my-model"
    assert data[0]["models"][0]["known"] is True
    assert data[0]["models"][0]["sentOutputLimit"] == 4096
    assert data[0]["models"][1]["sentOutputLimit"] is None

    assert main(["models", "--provider", "ollama"]) == 1
    assert "cannot reach http://127.0.0.1:9/v1" in capsys.readouterr().out
    assert main(["models", "--provider", "nope"]) == 2


@pytest.mark.e2e
def test_stream_json_reports_each_retry_as_an_event(tmp_path: Path, roder_home: Path, workspace: Path) -> None:
    script, log = tmp_path / "script.json", tmp_path / "requests.jsonl"
    script.write_text(json.dumps({"steps": [{"status": 503, "error": {"message": "overloaded"}}, {"text": "fine"}]}))
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "roder_core.testing.fake_server",
            "--script",
            str(script),
            "--port",
            "0",
            "--model",
            "my-model",
            "--log",
            str(log),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        configure(roder_home, process.stdout.readline().strip())
        done = roder(roder_home, workspace, "-p", "hi", "--provider", "local", "--output-format", "stream-json")
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    retries = [e for e in events if e["type"] == "turn/retrying"]
    assert len(retries) == 1
    retry = retries[0]
    assert retry["attempt"] == 1
    assert retry["maxAttempts"] == 4
    assert 0 < retry["wait"] <= 20
    assert "HTTP 503" in retry["reason"]
    assert "overloaded" in retry["reason"]
    assert retry["kind"] == "server"
    assert events[-1]["type"] == "result"
    assert events[-1]["text"] == "fine"
    assert "; retry " not in done.stderr  # stream-json says it once, as an event


@pytest.mark.e2e
def test_json_result_shows_cache_reads_writes_and_cost(tmp_path: Path, roder_home: Path, workspace: Path) -> None:
    script = tmp_path / "script.json"
    usage = {"input_tokens": 10_000, "cached_tokens": 9_000, "output_tokens": 50}
    script.write_text(json.dumps({"steps": [{"text": "cheap", "usage": usage}]}))
    process = subprocess.Popen(
        [sys.executable, "-m", "roder_core.testing.fake_server", "--script", str(script), "--port", "0", "--model", "gpt-4.1"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        (roder_home / "config.toml").write_text(
            f'[providers.local]\ndialect = "chat-completions"\nbase_url = "{url}"\nmodels = ["gpt-4.1"]\n'
        )
        done = roder(roder_home, workspace, "-p", "hi", "--provider", "local", "--output-format", "json")
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["cache_read_tokens"], result["cache_write_tokens"]) == (9_000, 0)
    # gpt-4.1: 1,000 fresh x $2 + 9,000 cached x $0.50 + 50 out x $8, per Mtok
    assert result["cost_usd"] == pytest.approx(0.0069)


def test_the_install_exposes_roder_but_not_the_checkouts_tests_or_bench(tmp_path: Path) -> None:
    probe = (
        "import importlib.util as u, sys; "
        "print(*(u.find_spec(m) is not None for m in ('roder_core', 'roder_tui', 'roder_ext_mcp', 'tests', 'bench')))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert found.stdout.split() == ["True", "True", "True", "False", "False"], found.stderr


def test_an_optional_api_key_env_is_optional(roder_home: Path, workspace: Path) -> None:
    """``[providers.local]``'s ``api_key_env`` is sent when set and left out (not an error) when unset."""
    from roder_core.testing.fake_server import ThreadedFakeServer

    with ThreadedFakeServer([{"text": "no key needed"}, {"text": "keyed"}]) as server:
        configure(roder_home, server.base_url)
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env["RODER_HOME"] = str(roder_home)
        keyless = subprocess.run(
            [sys.executable, "-m", "roder_tui.cli", "-p", "hi", "--provider", "local"],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert keyless.returncode == 0, keyless.stderr
        assert keyless.stdout.strip() == "no key needed"
        keyed = roder(roder_home, workspace, "-p", "hi", "--provider", "local")
        assert keyed.stdout.strip() == "keyed", keyed.stderr
        posts = server.calls
    assert "authorization" not in posts[0].headers
    assert posts[1].headers["authorization"] == f"Bearer {KEY}"
