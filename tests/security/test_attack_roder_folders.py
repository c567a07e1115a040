"""Attacks on Roder's own folders from a sandboxed command, through the real loop.

A thread's command that reads what Roder keeps for everyone else: other threads' sessions, task
logs and spilled output, stored credentials, the audit log, team channels, workflow journals,
other plugins' data, MCP logs, quarantined files and the background host's attach socket. Every
folder is hidden behind an empty tmpfs and only the thread's own task logs and spilled output are
shown back (``roder_core.brokers.own_folders``), wherever the folders are: a ``RODER_HOME``
beside the workspace, the platform folders in the home folder, a ``RODER_HOME`` inside the
workspace, or a workspace inside Roder's cache. The model is the loopback model server speaking
the Chat Completions wire format; the runtime is the default distribution with real bubblewrap.
CI runs this file as root and as an unprivileged user (``.ci/run-unprivileged``).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from roder_core.runtime.bootstrap import StartSettings, start_runtime
from roder_core.runtime.runtime import Runtime
from roder_core.server.host_paths import HostPaths
from roder_core.settings.paths import RoderPaths
from roder_core.testing.fake_server import FakeModelServer
from tests.brokers.helpers import marker, needs_bwrap, outside_folder, running
from tests.security.test_background_network import call, results, task_and_spill_steps, wait_for_task

pytestmark = needs_bwrap

LAYOUTS = ("roder-home-beside", "platform-folders-in-home", "roder-home-in-workspace", "workspace-in-cache")


@dataclass
class Lab:
    layout: str
    workspace: Path
    paths: RoderPaths
    env: dict[str, str]
    host: HostPaths


@pytest.fixture(params=LAYOUTS)
def lab(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    """Roder's folders and a workspace laid out one way, all on disk outside /tmp (the
    sandbox's /tmp is private, which would hide them for the wrong reason)."""
    with outside_folder("roder-own-") as base:
        base.chmod(0o755)
        home = base / "home"
        home.mkdir()
        runtime_dir = base / "run"
        runtime_dir.mkdir(mode=0o700)  # not under /run/user, which the sandbox masks anyway
        env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "LOCAL_API_KEY": "sk-local-xyz12345"}
        env["XDG_RUNTIME_DIR"] = str(runtime_dir)
        for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HOME", str(home))
        workspace = base / "ws"
        if request.param == "platform-folders-in-home":
            monkeypatch.delenv("RODER_HOME")
        else:
            roder_home = {
                "roder-home-beside": base / "roder-home",
                "roder-home-in-workspace": workspace / ".roder-home",
                "workspace-in-cache": base / "roder-home",
            }[request.param]
            roder_home.mkdir(parents=True)
            env["RODER_HOME"] = str(roder_home)
            monkeypatch.setenv("RODER_HOME", str(roder_home))
        paths = RoderPaths.from_env(env)
        if request.param == "workspace-in-cache":
            workspace = paths.cache_dir / "worktrees" / "ws"
        workspace.mkdir(parents=True, exist_ok=True)
        assert paths.cache_dir.is_relative_to(home if request.param == "platform-folders-in-home" else base)
        yield Lab(request.param, workspace, paths, env, HostPaths.for_data_dir(paths.data_dir, env))


def plant(lab: Lab, mark: str) -> socket.socket:
    """What Roder and other threads keep, each with a marker; and a listening attach socket."""
    paths = lab.paths
    files = {
        paths.data_dir / "credentials.json": f'{{"keys": {{"other": "{mark}-credentials"}}}}',
        paths.data_dir / "teams" / "team_x.json": f'{{"messages": ["{mark}-team"]}}',
        paths.data_dir / "workflows" / "run.jsonl": f'{{"step": "{mark}-workflow"}}\n',
        paths.data_dir / "plugins" / "other@market" / "state.txt": f"{mark}-plugindata\n",
        paths.cache_dir / "mcp-logs" / "server.log": f"{mark}-mcplog\n",
        paths.cache_dir / "quarantine" / "x" / ".envrc": f"{mark}-quarantine\n",
        paths.config_dir / "agents" / "private.md": f"{mark}-config\n",
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    with open(paths.audit_file, "a", encoding="utf-8") as audit:
        audit.write(f'{{"kind": "note", "text": "{mark}-audit"}}\n')
    lab.host.ensure_private()
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(lab.host.socket))
    listener.listen(1)
    return listener


async def start(lab: Lab, server: FakeModelServer) -> Runtime:
    lab.paths.config_dir.mkdir(parents=True, exist_ok=True)
    lab.paths.config_file.write_text(
        '[providers.local]\ndialect = "chat-completions"\n'
        f'base_url = "{server.base_url}"\napi_key_env = "LOCAL_API_KEY"\nmodels = ["fake-model"]\n'
    )
    started = start_runtime(
        StartSettings(cwd=lab.workspace, provider="local", mode="bypass", interactive=False, trust=False, env=lab.env)
    )
    runtime = started.runtime
    assert runtime.options.paths == lab.paths
    assert runtime.sandbox.effective == "workspace-write", runtime.sandbox.reason
    return runtime


async def test_a_thread_sees_its_own_files_and_nothing_else_of_roders_folders(lab: Lab) -> None:
    mark = marker()
    listener = plant(lab, mark)
    steps = task_and_spill_steps(mark)
    async with FakeModelServer(steps) as server:
        runtime = await start(lab, server)
        try:
            owner = await runtime.start_thread()
            await runtime.run_turn(owner.id, f"{mark}-prompt: start it")
            started, big = results(runtime, owner.id)[:2]
            task_id = started.data["task_id"]
            info = await wait_for_task(runtime, task_id, lambda t: t.last_line == f"{mark}-task" or t.status != "running")
            spill = Path(big.data["full_output_path"])
            assert spill.parent == lab.paths.spill_dir / owner.id, spill
            assert Path(str(info.output_path)).parent == lab.paths.task_logs_dir / owner.id
            assert any(mark in p.read_text() for p in lab.paths.threads_dir.rglob("*") if p.is_file())

            # the owner's commands read its own spilled output and task log (read-only)
            own = (
                f"grep -c {mark}-spilled {spill}; cat {info.output_path}; "
                f'python3 -c \'open("{spill}", "a").write("tamper")\' 2>/dev/null || echo READ-ONLY'
            )
            steps += [{"tool_calls": [call("bash", command=own)]}, {"text": "read"}]
            await runtime.run_turn(owner.id, "read your output")
            mine = results(runtime, owner.id)[2]
            assert mine.text.startswith("1\n"), mine.text
            assert f"{mark}-task" in mine.text and "READ-ONLY" in mine.text, mine.text
            assert "tamper" not in spill.read_text()

            other = await runtime.start_thread()
            paths = lab.paths
            folders = " ".join(str(p) for p in (paths.config_dir, paths.data_dir, paths.cache_dir, lab.host.directory))
            snoop = (
                f"grep -raoh '{mark}-[a-z]*' {folders} 2>/dev/null | sort -u; "
                f"ls -A {lab.paths.task_logs_dir} {lab.paths.spill_dir} {lab.paths.data_dir} 2>&1; "
                f"test -S {lab.host.socket} && echo SOCKET-SEEN; "
                f"echo written > {lab.workspace}/proof.txt; true"
            )
            tools = [
                call("bash", command=snoop),
                call("read", path=str(paths.data_dir / "credentials.json")),
                call("glob", pattern="**/*"),
                call("grep", pattern=f"{mark}-[a-z]+"),
            ]
            steps += [{"tool_calls": tools}, {"text": "looked"}]
            await runtime.run_turn(other.id, "look around")
            by_tool = {r.name: r for r in results(runtime, other.id)}
            looked, read, globbed, grepped = (by_tool[name] for name in ("bash", "read", "glob", "grep"))
            # the file tools do not reach Roder's folders either, even inside the workspace
            assert read.is_error and mark not in read.text, read.text
            assert "credentials.json" not in globbed.text and "audit.jsonl" not in globbed.text, globbed.text
            assert grepped.text.startswith("no matches"), grepped.text
            assert mark not in looked.text, looked.text
            assert "redacted" not in looked.text, looked.text  # hidden, not merely redacted
            assert owner.id not in looked.text, looked.text
            assert "SOCKET-SEEN" not in looked.text, looked.text
            # the workspace stays the workspace, wherever Roder's folders are
            assert (lab.workspace / "proof.txt").read_text() == "written\n"
        finally:
            await runtime.close()
            listener.close()
    assert not running(mark)


def test_the_lab_layouts_put_the_folders_where_they_say(lab: Lab) -> None:
    """Guards the fixture: each layout really has the nesting it names."""
    cache, workspace = lab.paths.cache_dir, lab.workspace
    home = Path(lab.env["HOME"])
    layout = (
        "workspace-in-cache"
        if workspace.is_relative_to(cache)
        else "roder-home-in-workspace"
        if cache.is_relative_to(workspace)
        else "platform-folders-in-home"
        if cache.is_relative_to(home)
        else "roder-home-beside"
    )
    assert layout == lab.layout
