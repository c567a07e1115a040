"""Process extensions through the real loop: real extension processes (the Python SDK's example
and a probe written with it), a scripted model, real bubblewrap. Crashes and hangs fail only the
call; the sandbox gives exactly what was granted; an untrusted project starts nothing."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from roder_core.server.protocol import (
    EXTENSIONS_LIST,
    THREAD_START,
    TURN_INTERRUPT,
    TURN_START,
    ThreadStartParams,
    TurnInterruptParams,
    TurnStartParams,
)
from roder_core.testing.fake_server import ThreadedFakeServer
from tests.builders import scripted_client, turn_tool_results

REPO = Path(__file__).resolve().parents[2]
SDK = REPO / "sdk" / "python"
PROBE = Path(__file__).with_name("probe_extension.py")
WORDCOUNT = SDK / "examples" / "wordcount.py"


def toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def declare(home: Path, name: str, command: list[str], capabilities: list[str], env: dict[str, str], extra: str = "") -> None:
    env_table = ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items())
    with (home / "config.toml").open("a", encoding="utf-8") as handle:
        handle.write(
            f"[extensions.process.{name}]\ncommand = {toml_list(command)}\ncapabilities = {toml_list(capabilities)}\n"
            f"env = {{ {env_table} }}\n{extra}"
        )


@pytest.fixture
def marks(workspace: Path) -> Path:
    """Where the probe leaves marks: in the workspace, the one folder a granted process can
    write that the test also sees (the sandbox's /tmp is its own)."""
    folder = workspace / "marks"
    folder.mkdir()
    return folder


def probe_env(marks: Path, **extra: str) -> dict[str, str]:
    return {"RODER_SDK_PATH": str(SDK), "PROBE_MARKS": str(marks), **extra}


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


async def test_the_python_example_runs_a_tool_with_streamed_output_and_its_hook_policy_and_context(
    roder_home: Path, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "notes.txt").write_text("one two three\nfour\n")
    steps = [
        call("word_count", path="notes.txt"),
        call("bash", command="git push --force origin main"),
        call("write", path="yarn.lock", content="x"),
        {"text": "done"},
    ]
    with ThreadedFakeServer(steps) as model:
        (roder_home / "config.toml").write_text(
            f'[providers.fk]\ndialect = "chat-completions"\nbase_url = "{model.base_url}"\nmodels = ["m1"]\n', encoding="utf-8"
        )
        declare(roder_home, "wordcount", [sys.executable, str(WORDCOUNT)], ["fs.read.workspace"], {})
        async with scripted_client(workspace, tmp_path, steps, provider="fk") as app:
            listing = await app.call(EXTENSIONS_LIST)
            assert [(p.id, p.state, p.granted) for p in listing.processes] == [
                ("acme-wordcount", "running", ["fs.read.workspace"])
            ]
            manifest = next(m for m in listing.extensions if m["id"] == "acme-wordcount")
            assert {"ToolProvider": "acme-wordcount"} in manifest["provides"]
            results = await turn_tool_results(app)
            segments = [s.render({}) for s in app.runtime.registry.status_segments if s.id() == "wordcount-calls"]
        first_request = json.dumps(model.calls[0].json)
    counted, pushed, locked = results
    assert (counted.name, counted.text, counted.data, counted.is_error) == (
        "word_count",
        "4 words, 2 lines",
        {"words": 4, "lines": 2},
        False,
    )
    assert pushed.is_error and "force pushes are not allowed here" in pushed.text
    assert locked.is_error and "lock files are written by the package manager" in locked.text
    assert not (workspace / "yarn.lock").exists()
    assert segments[0] is not None and segments[0].text == "wc:1"
    assert "House rule: answer in one sentence." in first_request  # the context provider's block


async def test_a_crash_fails_only_the_call_and_the_next_call_restarts_the_process(
    roder_home: Path, workspace: Path, tmp_path: Path, marks: Path
) -> None:
    declare(roder_home, "probe", [sys.executable, str(PROBE)], [], probe_env(marks))
    async with scripted_client(workspace, tmp_path, [call("instance"), call("crash"), call("instance"), {"text": "done"}]) as app:
        before, crashed, after = await turn_tool_results(app)
        state = (await app.call(EXTENSIONS_LIST)).processes[0]
    assert crashed.is_error
    assert crashed.text == "crash failed: extension probe exited with status 3 (stderr: about to crash: goodbye)"
    assert not after.is_error and after.text != before.text  # a new process answered
    assert (state.state, state.restarts) == ("running", 1)
    assert state.last_error is not None and "exited with status 3" in state.last_error


async def test_a_hung_call_times_out_with_a_clear_error_and_the_process_is_replaced(
    roder_home: Path, workspace: Path, tmp_path: Path, marks: Path
) -> None:
    declare(roder_home, "probe", [sys.executable, str(PROBE)], ["fs.write.workspace"], probe_env(marks), extra="timeout = 1\n")
    async with scripted_client(workspace, tmp_path, [call("hang"), call("instance"), {"text": "done"}]) as app:
        hung, answered = await turn_tool_results(app)
    assert hung.is_error and hung.text == "hang failed: extension probe did not answer tool/execute within 1 s"
    assert not answered.is_error and answered.text != (marks / "hang-started").read_text()


async def test_an_interrupted_call_is_cancelled_in_the_extension(
    roder_home: Path, workspace: Path, tmp_path: Path, marks: Path
) -> None:
    declare(roder_home, "probe", [sys.executable, str(PROBE)], ["fs.write.workspace"], probe_env(marks))
    async with scripted_client(workspace, tmp_path, [call("wait_for_cancel"), {"text": "done"}]) as app:
        thread = (await app.call(THREAD_START, ThreadStartParams())).thread
        events = app.subscribe(thread.id)
        turn = (await app.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="go"))).turn
        async with asyncio.timeout(60):
            async for note in events:
                if note.method == "item/started" and getattr(note.item, "type", "") == "toolCall":
                    break
        while not (marks / "waiting").exists():
            await asyncio.sleep(0.01)
        await app.call(TURN_INTERRUPT, TurnInterruptParams(thread_id=thread.id, turn_id=turn.id))
        while not (marks / "cancelled").exists():
            await asyncio.sleep(0.01)
    assert (marks / "cancelled").read_text() == (marks / "waiting").read_text()


@pytest.fixture
def listener() -> Iterator[int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server.getsockname()[1]
    server.close()


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed: process extensions run unconfined")
@pytest.mark.parametrize(
    "granted", [[], ["fs.read.workspace", "network.loopback", "secret.read.PROBE_TOKEN"], ["fs.write.workspace"]]
)
async def test_the_process_gets_exactly_what_was_granted(
    roder_home: Path,
    workspace: Path,
    tmp_path: Path,
    marks: Path,
    listener: int,
    granted: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (workspace / "visible.txt").write_text("hello")
    secret = Path.home() / ".ssh" / "roder-probe-secret"
    if not secret.parent.exists():
        pytest.skip("no ~/.ssh to hide")
    monkeypatch.setenv("PROBE_TOKEN", "tok-DONOTLEAK-1234567890")
    env = probe_env(marks, PROBE_SECRET_FILE=str(secret), PROBE_PORT=str(listener))
    declare(roder_home, "probe", [sys.executable, str(PROBE)], granted, env)
    secret.write_text("ssh-secret")
    try:
        async with scripted_client(workspace, tmp_path, [call("probe"), {"text": "done"}]) as app:
            (probed,) = await turn_tool_results(app)
            sandboxed = (await app.call(EXTENSIONS_LIST)).processes[0].sandboxed
    finally:
        secret.unlink()
    found = probed.data
    assert sandboxed
    assert found["secret_file"].startswith("error:")  # ~/.ssh is hidden whatever was granted
    reads = bool({"fs.read.workspace", "fs.write.workspace"} & set(granted))
    assert ("visible.txt" in found["workspace"]) is reads
    assert (found["write"] == "ok") is ("fs.write.workspace" in granted)
    assert (found["network"] == "connected") is ("network.loopback" in granted)
    assert (found["secret_env"] == "present") is ("secret.read.PROBE_TOKEN" in granted)
    assert "tok-DONOTLEAK" not in json.dumps(found)  # redacted from the transcript like any tool output


async def test_a_context_provider_is_never_given_a_secret_in_the_prompt(
    roder_home: Path, workspace: Path, tmp_path: Path, marks: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "db-pass-DONOTLEAK-0987654321"
    monkeypatch.setenv("APP_DB_PASSWORD", secret)
    declare(roder_home, "probe", [sys.executable, str(PROBE)], ["fs.write.workspace"], probe_env(marks))
    async with scripted_client(workspace, tmp_path, [{"text": "done"}]) as app:
        await turn_tool_results(app, prompt=f"connect with {secret} please")
    assert (marks / "prompt").read_text() == "connect with [redacted:APP_DB_PASSWORD] please"


async def test_a_manifest_that_requires_more_than_was_granted_is_refused(
    roder_home: Path, workspace: Path, tmp_path: Path, marks: Path
) -> None:
    declare(roder_home, "probe", [sys.executable, str(PROBE)], [], probe_env(marks, PROBE_REQUIRES="network.web"))
    async with scripted_client(workspace, tmp_path, [{"text": "done"}]) as app:
        listing = await app.call(EXTENSIONS_LIST)
    assert [s.reason for s in listing.skipped if s.source == "probe"] == [
        "process extension probe requires network.web, which config.toml does not grant "
        "(add to capabilities in [extensions.process.probe] to allow)"
    ]
    assert listing.processes == []  # nothing of it was installed, and its process was stopped


async def test_an_untrusted_project_starts_no_process(workspace: Path, roder_home: Path, tmp_path: Path, marks: Path) -> None:
    starter = tmp_path / "starter.py"
    starter.write_text(f"from pathlib import Path\nPath({str(marks / 'started')!r}).write_text('yes')\n")
    (workspace / ".roder").mkdir()
    (workspace / ".roder" / "config.toml").write_text(
        f"[extensions.process.evil]\ncommand = {toml_list([sys.executable, str(starter)])}\n", encoding="utf-8"
    )
    async with scripted_client(workspace, tmp_path, [{"text": "done"}]) as app:
        listing = await app.call(EXTENSIONS_LIST)
    assert listing.processes == []
    assert not (marks / "started").exists()


async def test_a_broken_command_is_listed_with_its_reason(roder_home: Path, workspace: Path, tmp_path: Path) -> None:
    declare(roder_home, "gone", ["/nonexistent/extension"], [], {})
    declare(roder_home, "odd", [sys.executable, "-c", "pass"], ["fs.read.everything"], {})
    async with scripted_client(workspace, tmp_path, [{"text": "done"}]) as app:
        reasons = {s.source: s.reason for s in (await app.call(EXTENSIONS_LIST)).skipped}
    assert reasons["process:gone"].startswith("process extension gone did not start: ")
    assert "No such file or directory" in reasons["process:gone"]
    assert "'fs.read.everything' is not one a process can be granted" in reasons["process:odd"]


NODE = shutil.which("node")
TS_EXAMPLE = REPO / "sdk" / "typescript" / "dist" / "examples" / "loopback_engine.js"


@pytest.mark.skipif(NODE is None, reason="Node.js is not installed")
def test_a_typescript_extension_provides_the_engine_and_a_tool_of_a_one_shot_turn(roder_home: Path, workspace: Path) -> None:
    """`roder -p` on an engine that lives in a Node.js process, talking to the loopback model
    server in Chat Completions, with a tool from the same process."""
    import subprocess

    if not TS_EXAMPLE.exists():
        message = "the TypeScript SDK is not built: run `npm ci && npm run build` in sdk/typescript (.ci/run does)"
        if os.environ.get("RODER_REQUIRE_TS_SDK"):
            pytest.fail(message)
        pytest.skip(message)
    steps = [call("reverse_text", text="roder"), {"text": "It reads redor."}]
    with ThreadedFakeServer(steps) as model:
        declare(roder_home, "ts", [str(NODE), str(TS_EXAMPLE)], ["network.loopback"], {"MODEL_BASE_URL": model.base_url})
        env = {**os.environ, "RODER_HOME": str(roder_home)}
        done = subprocess.run(
            [sys.executable, "-m", "roder_tui.cli", "-p", "reverse roder", "--provider", "ts-loopback", "--mode", "bypass"],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "It reads redor."
        assert len(model.calls) == 2
        second = model.calls[1].json
        assert second["model"] == "loopback-model"
        tool_message = next(m for m in second["messages"] if m["role"] == "tool")
        assert tool_message["content"] == "redor"
        assert any(t["function"]["name"] == "reverse_text" for t in second["tools"])


def test_roder_extensions_list_shows_the_process_and_its_state(roder_home: Path, workspace: Path) -> None:
    import subprocess

    declare(roder_home, "wordcount", [sys.executable, str(WORDCOUNT)], ["fs.read.workspace"], {})
    env = {**os.environ, "RODER_HOME": str(roder_home)}
    listing = subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", "extensions", "list"],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listing.returncode == 0, listing.stderr
    block = listing.stdout.split("acme-wordcount 0.1.0  Word count", 1)[1].split("\n\n")[0]
    assert "provides: ToolProvider(acme-wordcount), Hook(no-force-push), ContextProvider(house-rules)" in block
    assert "process: running, sandboxed" in block or "process: running, NOT sandboxed (no bubblewrap)" in block


async def test_a_plugin_declares_a_process_extension(roder_home: Path, workspace: Path, tmp_path: Path, marks: Path) -> None:
    """``roderExtensions`` in a plugin (``.roder-extensions.json``): shown before install with its
    grants, started from the installed copy with ``${CLAUDE_PLUGIN_ROOT}`` filled in, listed."""
    import shutil as files

    from roder_core.plugins.store import PluginStore
    from roder_core.settings.paths import RoderPaths
    from tests.plugins.support import marketplace, write_json

    folder = tmp_path / "catalog" / "probe-plugin"
    write_json(folder / ".claude-plugin" / "plugin.json", {"name": "probe-plugin", "version": "1.0.0"})
    files.copy(PROBE, folder / "probe_extension.py")
    table = {
        "probe": {
            "command": sys.executable,
            "args": ["${CLAUDE_PLUGIN_ROOT}/probe_extension.py"],
            "capabilities": ["fs.write.workspace"],
            "env": probe_env(marks),
        }
    }
    write_json(folder / ".roder-extensions.json", table)
    marketplace(tmp_path / "catalog", "probe-market", [{"name": "probe-plugin", "source": "./probe-plugin"}])
    store = PluginStore(RoderPaths.from_env())
    store.add_marketplace(str(tmp_path / "catalog"))
    preview = store.preview("probe-plugin@probe-market")
    assert any("extension probe:" in line and "fs.write.workspace" in line for line in preview.runs_code), preview.runs_code
    store.install("probe-plugin@probe-market", preview.consent)
    async with scripted_client(workspace, tmp_path, [call("instance"), {"text": "done"}]) as app:
        (answered,) = await turn_tool_results(app)
        listing = await app.call(EXTENSIONS_LIST)
    assert not answered.is_error and len(answered.text) == 32
    assert [(p.id, p.state, p.granted) for p in listing.processes] == [("probe", "running", ["fs.write.workspace"])]
