"""The coding tools as installed: manifests and capability profiles, parallel edits of one file
serialized by the mutation queue, and the sandbox level the runtime reports."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
import roder_ext_builtin_coding_tools as coding_tools
from roder_ext_mock import MockProviderExtension

from roder_core.brokers import sandbox
from roder_core.ir import ToolResultItem
from roder_core.kernel.distribution import build_distribution, make_host
from roder_tui.ask import run_ask
from roder_tui.cli import build_parser
from tests.tools.harness import call, run_script, start


def test_manifests_and_tools(workspace: Path) -> None:
    host = make_host(workspace, trust=False)
    dist = build_distribution(host, [("tools", coding_tools.create)])
    manifest = dist.registry.manifest("roder-ext-builtin-coding-tools")
    assert manifest is not None
    assert [c.id for c in manifest.required_capabilities] == ["fs.read.workspace", "fs.write.workspace", "process.spawn.shell"]
    names = dist.registry.tool_registry().names()
    assert names == ["read", "write", "edit", "apply_patch", "bash", "grep", "glob", "ls", "web_fetch"]


def test_eval_profile_drops_only_web_fetch(workspace: Path) -> None:
    host = make_host(workspace, trust=False, profile="eval-sandbox")
    dist = build_distribution(host, [("tools", coding_tools.create), ("mock", lambda h: MockProviderExtension())])
    names = dist.registry.tool_registry().names()
    assert "web_fetch" not in names
    assert "bash" in names
    assert "edit" in names
    assert [s.source for s in dist.skipped] == ["roder-ext-web-fetch"]
    assert "network.web" in dist.skipped[0].reason


def test_every_spelling_of_a_path_takes_the_same_mutation_lock(workspace: Path) -> None:
    spellings = ["list.txt", "./list.txt", "sub/../list.txt", str(workspace / "list.txt")]
    tools = [coding_tools.WriteTool(), coding_tools.EditTool()]
    keys = {key for tool in tools for path in spellings for key in tool.mutated_paths({"path": path}, workspace)}
    assert keys == {str(workspace / "list.txt")}
    patch = "*** Begin Patch\n*** Update File: ./list.txt\n*** Move to: b.txt\n-a\n+b\n*** End Patch"
    assert coding_tools.ApplyPatchTool().mutated_paths({"patch": patch}, workspace) == [
        str(workspace / "list.txt"),
        str(workspace / "b.txt"),
    ]


async def test_parallel_edits_of_one_file_all_apply(workspace: Path) -> None:
    target = workspace / "list.txt"
    target.write_text("".join(f"item {i}\n" for i in range(8)))
    edits = [call("edit", path="list.txt", old_string=f"item {i}\n", new_string=f"item {i} done\n") for i in range(8)]
    _runtime, results = await run_script(workspace, [{"tool_calls": edits}, {"text": "ok"}], mode="auto-edit")
    assert [r.is_error for r in results] == [False] * 8
    assert target.read_text() == "".join(f"item {i} done\n" for i in range(8))


async def test_runtime_reports_the_sandbox(workspace: Path) -> None:
    started = start(workspace, [{"text": "hi"}], sandbox="off")
    assert started.runtime.sandbox.effective == "off"
    assert started.notices == []
    steps = [{"tool_calls": [call("bash", command="echo hi")]}, {"text": "ok"}]
    _runtime, results = await run_script(workspace, steps, sandbox="off")
    assert "sandbox off" in results[0].text


async def test_tool_views_reach_the_thread(workspace: Path) -> None:
    steps = [{"tool_calls": [call("write", path="n.txt", content="a\n"), call("bash", command="cat n.txt")]}, {"text": "ok"}]
    env = {**os.environ}
    runtime = start(workspace, steps, env=env).runtime
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "go")
    kinds = [i.type for i in runtime.thread(thread.id).items()]
    assert "fileChange" in kinds
    assert "commandExecution" in kinds
    assert sum(isinstance(i, ToolResultItem) for i in runtime.thread(thread.id).items()) == 2


def test_missing_bubblewrap_is_said_once_by_roder_p(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_which = sandbox.shutil.which
    monkeypatch.setattr(sandbox.shutil, "which", lambda name, *a, **k: None if name == "bwrap" else real_which(name))
    monkeypatch.chdir(workspace)
    out, err = io.StringIO(), io.StringIO()
    code = run_ask(build_parser().parse_args(["-p", "hi", "--provider", "mock"]), stdin=io.StringIO(""), out=out, err=err)
    assert code == 0
    notices = [line for line in err.getvalue().splitlines() if "sandbox" in line]
    assert notices == [
        "roder: command sandbox is off: bubblewrap (bwrap) is not installed. Commands still get a scrubbed "
        "environment, resource limits and workspace-only file tools, but can write anywhere you can and reach "
        "the network"
    ]
