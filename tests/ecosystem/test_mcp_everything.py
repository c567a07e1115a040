"""The client side of MCP against the reference ``@modelcontextprotocol/server-everything`` from
npm (a real Node.js process over stdio): list_changed, sampling, elicitation, roots, logging,
progress and resource templates.

.ci/run installs the server into ``.ci-mcp`` and sets RODER_REQUIRE_MCP, so there a missing
server fails these tests; elsewhere they skip, saying how to install it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import roder_ext_mcp

from roder_core.ir import ApprovalDecision, ApprovalRequest, ToolResultItem
from roder_core.runtime.runtime import Runtime
from roder_core.server.client import LocalAppClient
from roder_core.threads.events import ApprovalRequested, ToolOutputDelta, UserInputRequested
from tests.builders import until
from tests.core.harness import call
from tests.ecosystem.harness import RoutedMockExtension, host_for, items, runtime_with
from tests.ecosystem.test_mcp import write_config

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "@modelcontextprotocol/server-everything"
MARKER = "SAMPLE-ME"
SAMPLED = "a sampled answer from the user's model"


def everything_entry() -> Path:
    """The server's entry script (``.ci-mcp`` of the checkout, or RODER_TEST_MCP_MODULES)."""
    modules = Path(os.environ.get("RODER_TEST_MCP_MODULES") or REPO / ".ci-mcp" / "node_modules")
    entry = modules / PACKAGE / "dist" / "index.js"
    node = shutil.which("node")
    if node is None or not entry.is_file():
        message = f"{PACKAGE} is not installed (.ci/run installs it: npm install --prefix .ci-mcp {PACKAGE})"
        if os.environ.get("RODER_REQUIRE_MCP"):
            pytest.fail(message)
        pytest.skip(message)
    return entry


def everything_config(extra: str = "", server: str = "") -> str:
    entry = everything_entry()
    return f"""
[mcp]
startup_wait = 25
{extra}

[mcp.servers.everything]
command = {json.dumps(shutil.which("node"))}
args = [{json.dumps(str(entry))}, "stdio"]
startup_timeout = 60
{server}
"""


def everything_runtime(
    workspace: Path, script: list[dict[str, Any]], *, interactive: bool, child: list[dict[str, Any]] | None = None
) -> tuple[Runtime, Any]:
    host = host_for(workspace, trusted=False)
    extension = roder_ext_mcp.create(host)
    engine = RoutedMockExtension(script, child or [{"text": SAMPLED}], MARKER)
    return runtime_with(host, [extension], engine=engine, interactive=interactive), extension


def tool(name: str, **arguments: Any) -> dict[str, Any]:
    return call(f"mcp__everything__{name}", **arguments)


async def run_one(runtime: Runtime, prompt: str = "go") -> list[ToolResultItem]:
    thread = await runtime.start_thread()
    await runtime.run_turn(thread.id, prompt)
    return items(runtime, thread.id, ToolResultItem)


def approving(runtime: Runtime, seen: list[ApprovalRequest], *, sampling: str = "allow_once") -> None:
    """Approve the first-use review; answer sampling approvals with ``sampling``."""

    def answer(event: object) -> None:
        if isinstance(event, ApprovalRequested):
            seen.append(event.request)
            decision = sampling if event.request.tool.startswith("mcp sampling") else "allow_once"
            runtime.resolve_approval(event.request.approval_id, ApprovalDecision(decision=decision))  # type: ignore[arg-type]

    runtime.bus.add_listener(answer)


# --------------------------------------------------------------------------- list_changed


async def test_tools_added_after_the_handshake_are_listed_again_and_callable(workspace: Path, roder_home: Path) -> None:
    """The server registers its sampling, elicitation and roots tools only after the handshake
    and announces them with notifications/tools/list_changed: they become callable."""
    write_config(roder_home, everything_config())
    script = [{"tool_calls": [tool("get-roots-list")]}, {"text": "done"}]
    runtime, ext = everything_runtime(workspace, script, interactive=False)
    try:
        connection = ext.manager.connections["everything"]
        await ext.manager.wait_ready(60)
        assert connection.status == "connected", connection.error
        await until(lambda: connection.relists >= 1, timeout=30)
        names = {t.name for t in connection.tools}
        assert {"trigger-sampling-request", "trigger-elicitation-request", "get-roots-list"} <= names
        assert "mcp__everything__trigger-sampling-request" in runtime.registry.tool_registry().names()
        [result] = await run_one(runtime)
        assert not result.is_error, result.text
        # Roots: the workspace the calling thread runs in.
        assert workspace.resolve().as_uri() in result.text
    finally:
        await runtime.close()


async def test_roots_are_the_workspace_and_configured_folders_and_follow_changes(
    workspace: Path, roder_home: Path, tmp_path: Path
) -> None:
    """The server asks for the roots after the handshake and again on roots/list_changed (it
    logs how many it received, at info level)."""
    notes, other = tmp_path / "notes", tmp_path / "other"
    notes.mkdir()
    other.mkdir()
    write_config(roder_home, everything_config(extra=f"roots = [{json.dumps(str(notes))}]", server='log_level = "info"'))
    script = [{"tool_calls": [tool("get-roots-list")]}, {"text": "done"}]
    runtime, ext = everything_runtime(workspace, script, interactive=False)
    log_file = runtime.options.paths.cache_dir / "mcp-logs" / "everything.log"
    try:
        await ext.manager.wait_ready(60)
        await until(lambda: log_file.exists() and "Roots updated: 2 root(s)" in log_file.read_text(), timeout=30)
        ext.manager.roots.add(other)  # a thread in another folder called the server
        await until(lambda: "Roots updated: 3 root(s)" in log_file.read_text(), timeout=30)
        [result] = await run_one(runtime)
        assert not result.is_error, result.text
        for folder in (workspace, notes, other):
            assert folder.resolve().as_uri() in result.text
    finally:
        await runtime.close()


# --------------------------------------------------------------------------- sampling


async def test_sampling_asks_the_user_then_runs_on_the_users_model(workspace: Path, roder_home: Path) -> None:
    write_config(roder_home, everything_config())
    script = [{"tool_calls": [tool("trigger-sampling-request", prompt=f"{MARKER} say hi", maxTokens=50)]}, {"text": "done"}]
    runtime, _ = everything_runtime(workspace, script, interactive=True)
    seen: list[ApprovalRequest] = []
    approving(runtime, seen)
    try:
        [result] = await run_one(runtime)
        assert not result.is_error, result.text
        assert SAMPLED in result.text
        [sampling] = [r for r in seen if r.tool.startswith("mcp sampling")]
        assert "MCP server 'everything' asks to use your model" in sampling.reason
        assert f"{MARKER} say hi" in sampling.reason  # the request itself is shown
        assert "System prompt: You are a helpful test server." in sampling.reason
        assert "at most 50 tokens" in sampling.reason
    finally:
        await runtime.close()


async def test_sampling_declined_by_the_user_reaches_the_server_as_a_refusal(workspace: Path, roder_home: Path) -> None:
    write_config(roder_home, everything_config())
    script = [{"tool_calls": [tool("trigger-sampling-request", prompt=f"{MARKER} hi")]}, {"text": "done"}]
    runtime, _ = everything_runtime(workspace, script, interactive=True)
    approving(runtime, [], sampling="deny")
    try:
        [result] = await run_one(runtime)
        assert result.is_error
        assert "sampling declined by the user" in result.text
        assert SAMPLED not in result.text
    finally:
        await runtime.close()


async def test_headless_sampling_is_declined_unless_policy_allows(workspace: Path, roder_home: Path) -> None:
    write_config(roder_home, everything_config())
    script = [{"tool_calls": [tool("trigger-sampling-request", prompt=f"{MARKER} hi")]}, {"text": "done"}]
    runtime, _ = everything_runtime(workspace, script, interactive=False)
    try:
        [result] = await run_one(runtime)
        assert result.is_error
        assert "nobody can approve in this headless run" in result.text
        assert 'sampling = "allow"' in result.text
    finally:
        await runtime.close()

    write_config(roder_home, everything_config(server='sampling = "allow"'))
    runtime, _ = everything_runtime(workspace, script, interactive=False)
    try:
        [result] = await run_one(runtime)
        assert not result.is_error, result.text
        assert SAMPLED in result.text
    finally:
        await runtime.close()


async def test_sampling_policy_deny_and_token_limit(workspace: Path, roder_home: Path) -> None:
    write_config(roder_home, everything_config(server='sampling = "deny"'))
    script = [{"tool_calls": [tool("trigger-sampling-request", prompt=f"{MARKER} hi")]}, {"text": "done"}]
    runtime, _ = everything_runtime(workspace, script, interactive=True)
    approving(runtime, [])
    try:
        [result] = await run_one(runtime)
        assert result.is_error
        assert 'sampling = "deny"' in result.text
    finally:
        await runtime.close()

    write_config(roder_home, everything_config(server='sampling = "allow"\nsampling_max_tokens = 10'))
    script = [{"tool_calls": [tool("trigger-sampling-request", prompt=f"{MARKER} hi", maxTokens=500)]}, {"text": "done"}]
    runtime, _ = everything_runtime(workspace, script, interactive=False)
    try:
        [result] = await run_one(runtime)
        assert result.is_error
        assert "asked for 500 tokens, more than this server's limit of 10" in result.text
    finally:
        await runtime.close()


# --------------------------------------------------------------------------- elicitation


async def test_form_elicitation_is_asked_through_user_input(workspace: Path, roder_home: Path) -> None:
    write_config(roder_home, everything_config())
    script = [{"tool_calls": [tool("trigger-elicitation-request")]}, {"text": "done"}]
    runtime, _ = everything_runtime(workspace, script, interactive=True)
    approving(runtime, [])
    asked: list[list[dict[str, Any]]] = []

    def answer(event: object) -> None:
        if isinstance(event, UserInputRequested):
            asked.append(event.questions)
            answers: dict[str, Any] = {}
            for q in event.questions:
                if q["id"] == "name":
                    answers["name"] = "Ada Lovelace"
                elif q["id"] == "check":
                    answers["check"] = "Yes"
                elif q["id"] == "integer":
                    answers["integer"] = "7"
                elif q["id"] == "legacyTitledEnum":
                    answers["legacyTitledEnum"] = "Dogs"
            runtime.resolve_user_input(event.request_id, answers)

    runtime.bus.add_listener(answer)
    try:
        [result] = await run_one(runtime)
        assert not result.is_error, result.text
        questions = [q for part in asked for q in part]
        assert "MCP server 'everything': Please provide inputs" in questions[0]["question"]
        assert all(len(part) <= 4 for part in asked)
        assert "accept" in result.text
        assert "Ada Lovelace" in result.text
        assert '"check": true' in result.text
        assert '"integer": 7' in result.text  # typed as the schema says
        assert '"legacyTitledEnum": "pet-2"' in result.text  # the label chosen, the value sent
        assert '"number": 3.14' in result.text  # left blank: the default
    finally:
        await runtime.close()


async def test_elicitation_declined_by_the_user_and_in_headless_runs(workspace: Path, roder_home: Path) -> None:
    write_config(roder_home, everything_config())
    script = [{"tool_calls": [tool("trigger-elicitation-request")]}, {"text": "done"}]
    runtime, _ = everything_runtime(workspace, script, interactive=True)
    approving(runtime, [])
    runtime.bus.add_listener(
        lambda ev: runtime.resolve_user_input(ev.request_id, {}) if isinstance(ev, UserInputRequested) else None
    )
    try:
        [result] = await run_one(runtime)
        assert "decline" in result.text
        assert "Ada" not in result.text
    finally:
        await runtime.close()

    runtime, ext = everything_runtime(workspace, script, interactive=False)
    outputs: list[str] = []
    runtime.bus.add_listener(lambda ev: outputs.append(ev.delta) if isinstance(ev, ToolOutputDelta) else None)
    try:
        [result] = await run_one(runtime)
        assert "decline" in result.text
        assert "elicitation declined: nobody can answer in this headless run" in "".join(outputs)
        assert ext.manager.connections["everything"].features.declined == 1
    finally:
        await runtime.close()


async def test_url_elicitation_shows_the_address(workspace: Path, roder_home: Path) -> None:
    write_config(roder_home, everything_config())
    script = [{"tool_calls": [tool("trigger-url-elicitation", url="http://127.0.0.1:9/consent")]}, {"text": "done"}]
    runtime, _ = everything_runtime(workspace, script, interactive=True)
    approving(runtime, [])
    asked: list[dict[str, Any]] = []

    def answer(event: object) -> None:
        if isinstance(event, UserInputRequested):
            asked.extend(event.questions)
            [question] = event.questions
            runtime.resolve_user_input(event.request_id, {question["id"]: question["options"][0]["label"]})

    runtime.bus.add_listener(answer)
    try:
        [result] = await run_one(runtime)
        assert not result.is_error, result.text
        [question] = asked
        assert "http://127.0.0.1:9/consent" in question["question"]
        assert "accept" in result.text
    finally:
        await runtime.close()


async def test_url_elicitation_required_error_asks_then_calls_again(workspace: Path, roder_home: Path) -> None:
    """The error path (-32042): the address is shown; once the user went there the call is made again."""
    write_config(roder_home, everything_config())
    call_args = {"url": "http://127.0.0.1:9/authorize", "errorPath": True}
    script = [{"tool_calls": [tool("trigger-url-elicitation", **call_args)]}, {"text": "done"}]
    runtime, _ = everything_runtime(workspace, script, interactive=True)
    approving(runtime, [])
    asked: list[str] = []

    def answer(event: object) -> None:
        if isinstance(event, UserInputRequested):
            [question] = event.questions
            asked.append(question["question"])
            runtime.resolve_user_input(event.request_id, {question["id"]: question["options"][0]["label"]})

    runtime.bus.add_listener(answer)
    try:
        [result] = await run_one(runtime)
        assert not result.is_error, result.text
        first, again = asked  # the error's address, then the retried call's own elicitation
        assert "Open this address in your browser: https://modelcontextprotocol.io" in first
        assert "http://127.0.0.1:9/authorize" in again
    finally:
        await runtime.close()


# --------------------------------------------------------------------------- progress, logging, templates


async def test_progress_reaches_the_tool_card(workspace: Path, roder_home: Path) -> None:
    write_config(roder_home, everything_config())
    script = [{"tool_calls": [tool("trigger-long-running-operation", duration=0.3, steps=3)]}, {"text": "done"}]
    runtime, _ = everything_runtime(workspace, script, interactive=False)
    outputs: list[ToolOutputDelta] = []
    runtime.bus.add_listener(lambda ev: outputs.append(ev) if isinstance(ev, ToolOutputDelta) else None)
    try:
        [result] = await run_one(runtime)
        assert not result.is_error, result.text
        text = "".join(o.delta for o in outputs)
        assert "progress 1/3" in text
        assert "progress 3/3" in text
        assert {o.call_id for o in outputs} == {result.call_id}
    finally:
        await runtime.close()


async def test_log_messages_are_logged(workspace: Path, roder_home: Path) -> None:
    """``log_level = "debug"`` is sent with logging/setLevel (the server filters by it), and the
    server's notifications/message lines land in its log file."""
    write_config(roder_home, everything_config(server='log_level = "debug"'))
    script = [{"tool_calls": [tool("toggle-simulated-logging")]}, {"text": "done"}]
    runtime, _ = everything_runtime(workspace, script, interactive=False)
    try:
        [result] = await run_one(runtime)
        assert not result.is_error, result.text
        log_file = runtime.options.paths.cache_dir / "mcp-logs" / "everything.log"
        await until(lambda: log_file.exists() and "-level message" in log_file.read_text(), timeout=30)
        assert "notifications/message [" in log_file.read_text()
    finally:
        await runtime.close()


async def test_resource_templates_are_listed_and_offered_as_mentions(workspace: Path, roder_home: Path) -> None:
    write_config(roder_home, everything_config())
    runtime, ext = everything_runtime(workspace, [{"text": "hi"}], interactive=False)
    try:
        await ext.manager.wait_ready(60)
        connection = ext.manager.connections["everything"]
        templates = [t.uri_template for t in connection.resource_templates]
        assert templates, "the everything server offers resource templates"
        mentions = ext.contributor.mentions()
        assert f"everything:{templates[0]}" in mentions
        listing = await LocalAppClient.for_runtime(runtime).request("mcp/list", {"waitMs": 60_000})
        [server] = listing.servers
        assert f"@everything:{templates[0]}" in server.resource_templates
        assert server.sampling == "ask"
        listed = subprocess.run(
            ["roder", "mcp", "list"], cwd=workspace, capture_output=True, text=True, timeout=120, check=True
        ).stdout
        assert f"@everything:{templates[0]}  (resource template" in listed
        # A template filled in is read like any resource.
        uri = templates[0].split("{")[0] + "1"
        attachment = await ext.contributor.read_mention("everything", uri)
        assert attachment.text or attachment.data_base64
    finally:
        await runtime.close()
