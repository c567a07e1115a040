"""A newcomer's mistakes, each met by one clear line, a non-zero exit where it fails, and nothing
lost: the real ``roder`` program in a subprocess (or on a pseudo-terminal for the key prompt)."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.builders import wait_until


def roder(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


#: The ``roder`` command line of this interpreter.
RODER = [sys.executable, "-m", "roder_tui.cli"]


def in_bubblewrap(flags: list[str], command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``command`` under bubblewrap, the whole file system shown with ``flags`` on top (a
    read-only mount, a small tmpfs, another user); skips where bubblewrap cannot do that."""
    done = subprocess.run(
        ["bwrap", "--dev-bind", "/", "/", *flags, *command],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    if "bwrap:" in done.stderr:
        pytest.skip(f"bubblewrap cannot do {' '.join(flags)} here: {done.stderr.strip()}")
    return done


def test_roder_home_naming_a_file_is_one_line_and_exit_1(tmp_path: Path, workspace: Path) -> None:
    home = tmp_path / "home-file"
    home.write_text("not a folder\n")
    done = roder("-p", "hello", "--provider", "mock", cwd=workspace, env={"RODER_HOME": str(home)})
    assert done.returncode == 1
    assert done.stdout == ""  # the model was never called
    line = one_line(done.stderr)
    assert str(home) in line
    assert "it is a file, not a folder" in line
    assert home.read_text() == "not a folder\n"  # nothing written over it


def test_a_subcommand_checks_the_home_too(tmp_path: Path, workspace: Path) -> None:
    home = tmp_path / "home-file"
    home.write_text("")
    done = roder("sessions", "list", cwd=workspace, env={"RODER_HOME": str(home / "inside")})
    assert done.returncode == 1
    assert "RODER_HOME" in one_line(done.stderr)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap makes the read-only mount")
def test_a_read_only_home_fails_before_the_model_is_called(tmp_path: Path, workspace: Path) -> None:
    """A read-only mount stops root as well as a user (a folder's mode bits would not stop root)."""
    home = tmp_path / "ro-home"
    home.mkdir()
    done = in_bubblewrap(["--ro-bind", str(home), str(home)], [*RODER, "-p", "hi"], workspace, {"RODER_HOME": str(home)})
    assert done.returncode == 1
    assert done.stdout == ""
    assert "is not writable" in one_line(done.stderr) or "Read-only file system" in done.stderr
    assert list(home.iterdir()) == []


#: Things that can stand where a config file should be, and what Roder says about each.
UNREADABLE_CONFIGS = {
    "a folder": (lambda path: path.mkdir(), "not read: it is a folder, not a file"),
    "not UTF-8": (
        lambda path: path.write_bytes(b'model = "m"\n\xff\n'),
        "not UTF-8 text (byte 0xff at offset 12); save it as UTF-8",
    ),
    "broken TOML": (lambda path: path.write_text("provider = \n"), "Invalid value (at line 1, column 12)"),
}


@pytest.mark.parametrize("kind", sorted(UNREADABLE_CONFIGS))
@pytest.mark.parametrize("whose", ["user", "project"])
def test_a_config_file_roder_cannot_read_is_one_line_naming_it(kind: str, whose: str, roder_home: Path, workspace: Path) -> None:
    make, says = UNREADABLE_CONFIGS[kind]
    path = roder_home / "config.toml" if whose == "user" else workspace / ".roder" / "config.toml"
    path.parent.mkdir(exist_ok=True)
    make(path)
    before = path.read_bytes() if path.is_file() else None
    done = roder("-p", "hi", "--provider", "mock", "--trust", cwd=workspace)
    assert done.returncode == 2
    assert done.stdout == ""  # the model was never called
    assert one_line(done.stderr) == f"roder: {path}: {says}"
    assert (path.read_bytes() if path.is_file() else None) == before  # left as it was
    assert not list(roder_home.glob("data/threads/*.jsonl"))  # no thread begun


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap makes a user that cannot read the file")
@pytest.mark.parametrize("whose", ["user", "project"])
def test_an_unreadable_config_file_is_one_line(whose: str, roder_home: Path, workspace: Path) -> None:
    """Mode 000 stops root only outside a user namespace's root: bubblewrap runs Roder as another
    user there, so this holds as root and as a user."""
    path = roder_home / "config.toml" if whose == "user" else workspace / ".roder" / "config.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text('provider = "mock"\n')
    path.chmod(0)
    another_user = ["--unshare-user", "--uid", "4242", "--gid", "4242"]
    done = in_bubblewrap(another_user, [*RODER, "-p", "hi", "--trust"], workspace, {})
    assert done.returncode == 2
    assert done.stdout == ""
    assert one_line(done.stderr) == f"roder: {path}: not read: permission denied"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('provdier = "mock"\n', "unknown key [provdier]; did you mean 'provider'?"),
        ("[policy]\ndeny = 3\n", "policy.deny: Input should be a valid list"),
    ],
)
def test_a_mistake_in_the_project_config_names_the_project_file(text: str, says: str, roder_home: Path, workspace: Path) -> None:
    (roder_home / "config.toml").write_text('provider = "mock"\n')
    (workspace / ".roder").mkdir()
    (workspace / ".roder" / "config.toml").write_text(text)
    done = roder("-p", "hi", "--trust", cwd=workspace)
    assert f"roder: {workspace / '.roder' / 'config.toml'}: {says}" in done.stderr.splitlines()
    assert str(roder_home / "config.toml") not in done.stderr


#: A command line of each subcommand that reads the configuration, or why it reads none. Every
#: subcommand is named here, so a new one must say how it meets a bad config.
CONFIG_READERS: dict[str, list[str] | str] = {
    "tools": ["tools", "list"],
    "mcp": ["mcp", "list"],
    "trust": "records trust in Roder's own state, reading no config",
    "untrust": "records trust in Roder's own state, reading no config",
    "extensions": ["extensions", "list"],
    "providers": ["providers", "list"],
    "models": ["models"],
    "audit": "reads the audit log only",
    "sessions": ["sessions", "show", "nothing"],
    "replay": ["replay", "nothing"],
    "app-server": ["app-server"],
    "serve": "starts a background host and quotes the host's own log, where app-server's line is",
    "attach": "needs a terminal; its host read the config",
    "web": "serves `roder attach` to browsers; its host read the config",
    "acp": ["acp"],
    "batch": ["batch", "tasks.jsonl", "--out", "out"],
    "doctor": ["doctor", "--no-live"],
    "exec": ["exec", "--workspace", ".", "--in-place", "hi"],
    "plugin": ["plugin", "list"],
    "dev": "the loopback model server uses no Roder folder",
}


def test_every_subcommand_is_listed_for_the_bad_config_check() -> None:
    from roder_tui.cli import SUBCOMMANDS

    assert set(CONFIG_READERS) == set(SUBCOMMANDS)


@pytest.mark.parametrize(
    "argv",
    [["-p", "hi"], ["sessions", "list"], ["plugin", "marketplace", "list"], ["mcp", "login", "x"]]
    + [argv for argv in CONFIG_READERS.values() if isinstance(argv, list)],
    ids=" ".join,
)
@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("provider = \n", "Invalid value (at line 1, column 12)"),
        ("[policy]\ndeny = 3\n", "policy.deny: Input should be a valid list"),
    ],
    ids=["broken TOML", "wrong type"],
)
def test_a_bad_config_is_exit_2_and_one_line_in_every_command(
    argv: list[str], text: str, says: str, roder_home: Path, workspace: Path
) -> None:
    """One handler in the CLI decides the status and the line; no command answers on its own."""
    (workspace / "tasks.jsonl").write_text('{"id": "a", "prompt": "hi"}\n')
    config = roder_home / "config.toml"
    config.write_text(text)
    done = roder(*argv, cwd=workspace)
    assert (done.returncode, one_line(done.stderr)) == (2, f"roder: {config}: {says}")
    assert done.stdout == ""
    assert not (workspace / "out").exists()


def _on_a_small_disk(workspace: Path, tmp_path: Path, script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``script`` (sh) run with RODER_HOME on a fresh 256 KiB file system of its own (bubblewrap's
    tmpfs, as root and as a user); ``$OUT`` is a folder of ``tmp_path`` to copy results into."""
    out = tmp_path / "out"
    out.mkdir()
    home = tmp_path / "small-home"
    home.mkdir()
    env = {**env, "RODER_HOME": str(home), "OUT": str(out), "RODER": " ".join(RODER)}
    return in_bubblewrap(["--size", str(256 * 1024), "--tmpfs", str(home)], ["sh", "-c", script], workspace, env)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap makes the small file system")
def test_a_full_home_fails_before_the_model_is_called(workspace: Path, tmp_path: Path) -> None:
    done = _on_a_small_disk(
        workspace, tmp_path, 'dd if=/dev/zero of="$RODER_HOME/filler" bs=4096 2>/dev/null; $RODER -p hello --provider mock', {}
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert "(RODER_HOME): no space left on its device (0 KiB free)" in one_line(done.stderr)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap makes the small file system")
def test_a_home_that_fills_mid_turn_is_said_once_and_the_thread_stays_readable(workspace: Path, tmp_path: Path) -> None:
    """The answer (300 KB, more than the disk holds) is printed whole; one line says the thread
    could not be saved, the run exits 1, and the thread file holds whole lines only."""
    answer = "word " * 60_000
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [{"text": answer, "chunk_size": 65536}]}))
    done = _on_a_small_disk(
        workspace,
        tmp_path,
        '$RODER -p big --provider mock; echo "exit $?" >&2; cp "$RODER_HOME"/data/threads/*.jsonl "$OUT"/',
        {"RODER_MOCK_SCRIPT": str(script)},
    )
    assert done.stdout.strip() == answer.strip()
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert "Traceback" not in done.stderr
    assert len(lines) == 2, done.stderr
    assert re.fullmatch(
        r"roder: could not save thread thr_\w+: No space left on device; "
        r"the rest is saved when its next turn starts, if there is room then",
        lines[0],
    )
    assert lines[1] == "exit 1"
    [saved] = (tmp_path / "out").glob("*.jsonl")
    data = saved.read_bytes()
    assert data.endswith(b"\n")  # no torn line
    methods = [json.loads(line).get("method") for line in data.splitlines()[1:]]
    assert methods[0] == "thread/started"
    assert "turn/started" in methods


#: Inside the small file system: a thread's first turn while the disk is full, then the next turn
#: after room was made. Prints the errors each turn showed, as JSON.
FULL_THEN_FREED = """
import asyncio, json, os, sys
from pathlib import Path
from roder_core.runtime.bootstrap import StartSettings
from roder_core.server.client import LocalAppClient
from roder_core.server.protocol import THREAD_START, TURN_START, ThreadStartParams, TurnStartParams
from roder_core.threads.events import ErrorEvent, TurnCompleted

FILLER = Path(os.environ["RODER_HOME"]) / "filler"

async def turn(client, events, thread_id, prompt):
    started = (await client.call(TURN_START, TurnStartParams(thread_id=thread_id, prompt=prompt))).turn
    errors = []
    async for event in events:
        if isinstance(event, ErrorEvent):
            errors.append(event.message)
        if isinstance(event, TurnCompleted) and event.turn.id == started.id:
            return errors

def fill():
    fd = os.open(FILLER, os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, bytes(4096)):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)

async def main():
    client = LocalAppClient.start(StartSettings(cwd=Path.cwd(), provider="mock", trust=False))
    async with client:
        events = client.subscribe()
        thread = (await client.call(THREAD_START, ThreadStartParams())).thread
        fill()
        first = await turn(client, events, thread.id, "while the disk is full")
        second = await turn(client, events, thread.id, "still full")
        FILLER.unlink()
        third = await turn(client, events, thread.id, "after room was made")
        fourth = await turn(client, events, thread.id, "saved as usual")
    print(json.dumps({"thread": thread.id, "errors": [first, second, third, fourth]}))

asyncio.run(main())
"""


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap makes the small file system")
def test_a_thread_not_saved_for_a_full_disk_is_saved_whole_at_a_turn_after_room_is_made(workspace: Path, tmp_path: Path) -> None:
    """A host keeps running after the disk filled: each turn says again that the thread is not
    saved, and the first turn after room was made writes everything kept back, in order, so the
    thread file holds all four turns, in order, whole lines only (before, nothing after the
    failure was saved again in that process)."""
    answer = "word " * 20_000
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [{"text": answer}, {"text": "two"}, {"text": "three"}, {"text": "four"}]}))
    driver = tmp_path / "driver.py"
    driver.write_text(FULL_THEN_FREED)
    done = _on_a_small_disk(
        workspace,
        tmp_path,
        f'{sys.executable} {driver}; echo "exit $?" >&2; cp "$RODER_HOME"/data/threads/*.jsonl "$OUT"/',
        {"RODER_MOCK_SCRIPT": str(script)},
    )
    assert "exit 0" in done.stderr, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    first, second, third, fourth = out["errors"]
    assert any(m.startswith(f"could not save thread {out['thread']}: No space left on device") for m in first), first
    assert [m for m in second if "is still not saved: No space left on device" in m], second
    assert third == [] and fourth == []
    [saved] = (tmp_path / "out").glob("*.jsonl")
    data = saved.read_bytes()
    assert data.endswith(b"\n")
    records = [json.loads(line) for line in data.splitlines()[1:]]
    started = [r["turnId"] for r in records if r.get("method") == "turn/started"]
    completed = [r["turn"]["id"] for r in records if r.get("method") == "turn/completed"]
    assert len(started) == 4 and completed == started  # every turn, in order, none twice
    texts = [r["item"].get("text", "") for r in records if r.get("method") == "item/completed"]
    assert any(t.strip() == answer.strip() for t in texts) and "four" in texts


def test_mode_choices_are_printed_as_their_names(workspace: Path) -> None:
    done = roder("-p", "hi", "--mode", "yolo", cwd=workspace)
    assert done.returncode == 2
    assert "choose from 'plan', 'ask', 'auto-edit', 'bypass'" in done.stderr
    assert "<Mode." not in done.stderr


def test_the_mock_counts_one_word_in_the_singular(workspace: Path) -> None:
    done = roder("-p", "hello", "--provider", "mock", cwd=workspace)
    assert done.stdout.startswith("Mock reply: I received 1 word, starting with")


def _on_terminal(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, int]:
    """(pid, master fd) of ``argv`` running on a new pseudo-terminal."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: become roder
        os.chdir(cwd)
        os.execve(sys.executable, [sys.executable, "-m", "roder_tui.cli", *argv], env)
    return pid, fd


def _read_until(fd: int, marker: bytes) -> bytes:
    seen = b""

    def arrived() -> bool:
        nonlocal seen
        while select.select([fd], [], [], 0)[0]:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                return marker in seen
            if not chunk:
                break
            seen += chunk
        return marker in seen

    wait_until(arrived, f"{marker!r} on the terminal (so far: {seen!r})", timeout=120)
    return seen


@pytest.mark.parametrize(("key", "name"), [(b"\x03", "ctrl+c"), (b"\x04", "ctrl+d")])
def test_leaving_the_login_prompt_stores_nothing_and_says_so(key: bytes, name: str, roder_home: Path, workspace: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    pid, fd = _on_terminal(["providers", "login", "openai"], workspace, env)
    try:
        _read_until(fd, b"(input hidden): ")
        os.write(fd, key)
        output = _read_until(fd, b"nothing stored")
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 1, name
    assert b"roder: no key given; nothing stored" in output
    assert b"Traceback" not in output
    assert not (roder_home / "data" / "credentials.json").exists()


def test_ctrl_c_during_start_up_is_one_line(workspace: Path) -> None:
    """SIGINT while the command is still starting: exit 130, no traceback. Its stdin is a pipe
    nobody writes to, so one-shot mode waits for it before it builds the runtime: the signal
    always lands during start-up, however slowly the machine (or this test's reader) runs."""
    proc = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "roder_tui.cli", "-p", "hello", "--provider", "mock"],
        cwd=workspace,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    # -X importtime reports each import on stderr as it completes: once one-shot mode's module is
    # in, the process is building its runtime (extensions, providers, the thread) when SIGINT lands.
    wait_until(lambda: "roder_tui.ask" in proc.stderr.readline(), "one-shot mode's import")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)  # (closes the child's stdin only after the signal)
    # (the parent's reader kept part of the import report buffered: look only at Roder's lines)
    messages = [line.strip() for line in err.splitlines() if "roder:" in line]
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err
    assert messages == ["roder: interrupted"]


def test_ctrl_c_in_one_shot_with_stdin_piped_keeps_the_thread(roder_home: Path, workspace: Path, tmp_path: Path) -> None:
    """SIGINT while the answer streams: one line, exit 1 (docs/ask.md), and the thread holds the
    prompt with the piped text, its turn saved as interrupted."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [{"text": "streaming " * 400, "delay_ms": 100, "chunk_size": 10}]}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "roder_tui.cli", "-p", "summarize", "--provider", "mock", "--output-format", "stream-json"],
        cwd=workspace,
        env={**os.environ, "RODER_MOCK_SCRIPT": str(script)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("piped-context-7f3a\n")
    proc.stdin.close()
    wait_until(lambda: "item/agentMessage/delta" in proc.stdout.readline(), "the answer to stream")
    proc.send_signal(signal.SIGINT)
    proc.stdout.read()  # (to its end: a full pipe would hold the process)
    assert proc.stderr is not None
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 1, err
    assert one_line(err) == "roder: turn interrupted"
    [thread] = (roder_home / "data" / "threads").glob("*.jsonl")
    text = thread.read_text()
    assert "piped-context-7f3a" in text
    events = [json.loads(line) for line in text.splitlines()[1:]]
    assert [e["turn"]["status"] for e in events if e.get("method") == "turn/completed"] == ["interrupted"]


@pytest.fixture
def fake_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """``roder dev fake-server`` as its own process, requiring a key, answering a model call with
    the 404 a server's web pages give; yields (its /v1 URL, script)."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [{"status": 404, "error": {"message": "404 page not found"}}]}))
    flags = ["--port", "0", "--model", "served-model", "--api-key", "sk-right-key-0123456789"]
    process = subprocess.Popen(
        [sys.executable, "-m", "roder_tui.cli", "dev", "fake-server", "--script", str(script), *flags],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.endswith("/v1")
        yield url, script
    finally:
        process.terminate()
        process.wait(timeout=30)


def _endpoint(home: Path, base_url: str, *, models: bool) -> None:
    (home / "config.toml").write_text(
        f'[providers.local]\ndialect = "chat-completions"\nbase_url = "{base_url}"\napi_key_env = "LOCAL_API_KEY"\n'
        + ('models = ["served-model"]\n' if models else "")
    )


def test_a_base_url_without_v1_is_named_in_the_hint(fake_server: tuple[str, Path], roder_home: Path, workspace: Path) -> None:
    url, _ = fake_server
    root = url.removesuffix("/v1")
    _endpoint(roder_home, root, models=True)
    done = roder("-p", "hi", "--provider", "local", cwd=workspace, env={"LOCAL_API_KEY": "sk-right-key-0123456789"})
    assert done.returncode == 1
    assert f"is base_url right? {root} has no /v1" in done.stderr
    assert "is the model name right" not in done.stderr
    assert "Traceback" not in done.stderr


def test_a_refused_key_is_reported_even_without_a_models_list(
    fake_server: tuple[str, Path], roder_home: Path, workspace: Path
) -> None:
    url, _ = fake_server
    _endpoint(roder_home, url, models=False)
    done = roder("-p", "hi", "--provider", "local", cwd=workspace, env={"LOCAL_API_KEY": "sk-wrong-key-0123456789"})
    assert done.returncode == 1
    assert "rejected the credentials (HTTP 401)" in done.stderr
    assert "no model chosen" not in done.stderr
    assert "sk-wrong-key-0123456789" not in done.stderr


def test_without_a_model_the_hint_lists_what_the_endpoint_serves(
    fake_server: tuple[str, Path], roder_home: Path, workspace: Path
) -> None:
    url, _ = fake_server
    _endpoint(roder_home, url, models=False)
    done = roder("-p", "hi", "--provider", "local", cwd=workspace, env={"LOCAL_API_KEY": "sk-right-key-0123456789"})
    assert done.returncode == 1
    assert "no model chosen" in done.stderr
    assert "it serves served-model" in done.stderr


def test_a_trusted_project_changes_one_key_of_a_table_the_user_file_declares(roder_home: Path, workspace: Path) -> None:
    """The project's file is merged table by table over the user's: switching off the user's
    process extension, or giving the user's language server another argument, names only
    the key it changes (the user's file holds the rest of the table)."""
    (roder_home / "config.toml").write_text(
        'provider = "mock"\n'
        '[extensions.process.notes]\ncommand = ["/nonexistent/notes-extension"]\n'
        '[lsp.servers.pyls]\ncommand = "pylsp"\nextension_to_language = { ".py" = "python" }\n'
    )
    (workspace / ".roder").mkdir()
    (workspace / ".roder" / "config.toml").write_text(
        '[extensions.process.notes]\nenabled = false\n[lsp.servers.pyls]\nargs = ["--check-parent-process"]\n'
    )
    done = roder("-p", "hi", "--trust", cwd=workspace)
    assert "Field required" not in done.stderr
    assert done.returncode == 0, done.stderr
    assert "notes" not in done.stderr  # switched off: never started
