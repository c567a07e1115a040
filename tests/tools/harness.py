"""Real brokers and a real Runtime (mock engine + the built-in coding tools) for tool tests."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import roder_ext_builtin_coding_tools as coding_tools
from roder_ext_mock import MockProviderExtension

from roder_core.brokers import Brokers
from roder_core.brokers.fs import WorkspaceFileSystem
from roder_core.brokers.network import AllowlistNetworkBroker
from roder_core.brokers.process import HostProcessBroker, ResourceLimits
from roder_core.brokers.sandbox import sandbox_status
from roder_core.brokers.secrets import EnvSecretBroker, SecretRedactor
from roder_core.ir import ModelProfile, ToolResultItem
from roder_core.kernel.tools import ToolCall, ToolExecutionContext, ToolResult
from roder_core.runtime.bootstrap import Started, StartSettings, start_runtime

ALL_CAPS = frozenset({"fs.read.workspace", "fs.write.workspace", "process.spawn.shell", "network.web"})


def make_brokers(
    workspace: Path,
    cache: Path,
    *,
    sandbox: str | None = "off",
    capabilities: frozenset[str] = ALL_CAPS,
    env: Mapping[str, str] | None = None,
    allow: list[str] | None = None,
    limits: ResourceLimits | None = None,
    audit: Any = None,
    timeout: float = 120.0,
) -> Brokers:
    env = dict(os.environ if env is None else env)
    fs = WorkspaceFileSystem(workspace, capabilities=capabilities, audit=audit)
    process = HostProcessBroker(
        fs,
        sandbox=sandbox_status(sandbox),
        spill_dir=cache / "spill",
        quarantine_dir=cache / "quarantine",
        capabilities=capabilities,
        env=env,
        limits=limits,
        default_timeout=timeout,
        audit=audit,
    )
    network = AllowlistNetworkBroker(allow or [], capabilities=capabilities, audit=audit)
    return Brokers(
        fs=fs, process=process, network=network, secrets=EnvSecretBroker(SecretRedactor.from_env(env), env, capabilities)
    )


def context(
    workspace: Path, brokers: Brokers, *, images: bool = True, deadline: float | None = None, output: list[str] | None = None
) -> ToolExecutionContext:
    return ToolExecutionContext(
        thread_id="thr_test",
        turn_id="turn_test",
        call_id="call_test",
        workspace=workspace,
        mode="bypass",
        brokers=brokers,
        model=ModelProfile(id="m", images=images),
        deadline=deadline,
        emit_output=(output.append if output is not None else (lambda _t: None)),
    )


async def run_tool(tool: Any, ctx: ToolExecutionContext, **arguments: Any) -> ToolResult:
    return await tool.execute(ctx, ToolCall(id="call_test", name=tool.name, arguments=arguments))


def write_files(workspace: Path, files: Mapping[str, str | bytes]) -> Path:
    """Put ``files`` (relative path -> text or bytes) in ``workspace``, folders included."""
    for name, data in files.items():
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
    return workspace


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def start(
    workspace: Path,
    steps: list[dict[str, Any]],
    *,
    mode: str = "bypass",
    sandbox: str | None = None,
    interactive: bool = False,
    env: Mapping[str, str] | None = None,
    trust: bool = False,
    store: bool = False,
    context: bool = False,
) -> Started:
    """A Runtime built by the real bootstrap with only the mock engine and the coding tools
    (``store``: and the JSONL thread store, so a later runtime can resume its threads;
    ``context``: and the context providers, the environment block among them)."""
    factories: list[tuple[str, Any]] = [
        ("mock", lambda _host: MockProviderExtension(steps)),
        ("coding tools", coding_tools.create),
    ]
    if store:
        import roder_ext_jsonl_store

        factories.append(("store", roder_ext_jsonl_store.create))
    if context:
        import roder_ext_context

        factories.append(("context", roder_ext_context.create))
    settings = StartSettings(
        cwd=workspace,
        provider="mock",
        mode=mode,
        sandbox=sandbox,
        interactive=interactive,
        env=dict(os.environ if env is None else env),
        trust=trust,
    )
    return start_runtime(settings, factories)


async def run_script(workspace: Path, steps: list[dict[str, Any]], **kw: Any) -> tuple[Any, list[ToolResultItem]]:
    """Run one turn of ``steps``; returns (runtime, tool results in order)."""
    runtime = start(workspace, steps, **kw).runtime
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, "go")
    results = [i for i in runtime.thread(thread.id).items() if isinstance(i, ToolResultItem)]
    return runtime, results
