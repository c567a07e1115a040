"""The in-process client over a real runtime (mock engine + test tools): typed calls, typed events."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from roder_core.ir import ToolResultItem
from roder_core.server.client import LocalAppClient
from roder_core.server.errors import INVALID_PARAMS, METHOD_NOT_FOUND, RUNTIME_ERROR, RpcError
from roder_core.server.fanout import ClientFellBehind
from roder_core.server.protocol import (
    INITIALIZE,
    MODEL_LIST,
    PROVIDERS_LIST,
    PROVIDERS_SELECT,
    SESSION_GET,
    SESSION_RESOLVE_APPROVAL,
    SESSION_SET_MODE,
    THREAD_LIST,
    THREAD_READ,
    THREAD_START,
    TOOLS_LIST,
    TURN_INTERRUPT,
    TURN_START,
    TURN_STEER,
    ClientInfo,
    InitializeParams,
    InputItem,
    ModelListParams,
    ProvidersSelectParams,
    ResolveApprovalParams,
    SessionGetParams,
    SessionSetModeParams,
    ThreadListParams,
    ThreadReadParams,
    ThreadStartParams,
    ToolsListParams,
    TurnInterruptParams,
    TurnStartParams,
    TurnSteerParams,
)
from roder_core.threads.events import (
    AgentMessageDelta,
    ApprovalRequested,
    ItemCompleted,
    ThreadStarted,
    TurnCompleted,
    TurnStarted,
)
from tests.core.harness import SleepTool, call, make_runtime


async def until_completed(events, turn_id: str) -> tuple[TurnCompleted, list]:
    seen = []
    async for event in events:
        seen.append(event)
        if isinstance(event, TurnCompleted) and event.turn.id == turn_id:
            return event, seen
    raise AssertionError("stream ended before the turn completed")


async def test_thread_and_turn_with_typed_events(workspace: Path) -> None:
    client = LocalAppClient.for_runtime(make_runtime(workspace, [{"reasoning": "hmm", "text": "Hello there"}]))
    info = await client.call(INITIALIZE, InitializeParams(client_info=ClientInfo(name="test")))
    assert info.provider == "mock"
    assert info.cwd == str(workspace)
    assert {g.name for g in info.method_groups if g.available} >= {"threads", "session", "discovery"}
    assert any(g.name == "teams" and g.available for g in info.method_groups)
    assert any(g.name == "planReview" and g.available for g in info.method_groups)
    assert any(g.name == "media" and g.available for g in info.method_groups)
    assert any(g.name == "workflows" and g.available for g in info.method_groups)
    assert any(g.name == "workflowImports" and g.available for g in info.method_groups)
    assert any(g.name == "auth" and g.available for g in info.method_groups)
    events = client.subscribe()
    thread = (await client.call(THREAD_START, ThreadStartParams(cwd=str(workspace)))).thread
    turn = (await client.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="hi"))).turn
    assert turn.status == "inProgress"
    async with asyncio.timeout(10):
        done, seen = await until_completed(events, turn.id)
    assert done.turn.status == "completed"
    assert isinstance(seen[0], ThreadStarted)
    assert any(isinstance(e, TurnStarted) for e in seen)
    deltas = [e for e in seen if isinstance(e, AgentMessageDelta)]
    assert "".join(d.delta for d in deltas if d.kind == "text") == "Hello there"
    assert any(d.kind == "reasoning" for d in deltas)
    read = (await client.call(THREAD_READ, ThreadReadParams(thread_id=thread.id, include_turns=True))).thread
    assert [i.type for i in read.turns[0].items] == ["userMessage", "reasoning", "agentMessage"]
    assert (await client.call(THREAD_READ, ThreadReadParams(thread_id=thread.id, include_turns=False))).thread.turns == []
    listed = (await client.call(THREAD_LIST, ThreadListParams())).threads
    assert [t.id for t in listed] == [thread.id]
    await client.close()


async def test_input_items_become_attachments(workspace: Path) -> None:
    client = LocalAppClient.for_runtime(make_runtime(workspace))
    events = client.subscribe()
    thread = (await client.call(THREAD_START, ThreadStartParams())).thread
    items = [InputItem(type="text", text="look at"), InputItem(type="file", name="log", text="E: boom")]
    turn = (await client.call(TURN_START, TurnStartParams(thread_id=thread.id, input=items))).turn
    async with asyncio.timeout(10):
        await until_completed(events, turn.id)
    user = (await client.call(THREAD_READ, ThreadReadParams(thread_id=thread.id, include_turns=True))).thread.turns[0].items[0]
    assert user.text == "look at"
    assert user.attachments[0].text == "E: boom"
    with pytest.raises(RpcError) as err:
        await client.call(TURN_START, TurnStartParams(thread_id=thread.id))
    assert err.value.code == INVALID_PARAMS


async def test_approval_flow_and_session(workspace: Path) -> None:
    runtime = make_runtime(workspace, [{"tool_calls": [call("sleep", seconds=0.01)]}, {"text": "done"}], mode="ask")
    client = LocalAppClient.for_runtime(runtime)
    events = client.subscribe()
    thread = (await client.call(THREAD_START, ThreadStartParams())).thread
    turn = (await client.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="go"))).turn
    request = None
    async for event in events:
        if isinstance(event, ApprovalRequested):
            request = event.request
            break
    assert request is not None
    assert request.tool == "sleep"
    session = await client.call(SESSION_GET, SessionGetParams())
    assert [r.approval_id for r in session.pending_approvals] == [request.approval_id]
    assert session.active_turns == {thread.id: turn.id}
    with pytest.raises(RpcError) as err:
        await client.call(SESSION_RESOLVE_APPROVAL, ResolveApprovalParams(approval_id="appr_nope", approved=True))
    assert err.value.code == INVALID_PARAMS
    approve = ResolveApprovalParams(approval_id=request.approval_id, approved=True)
    assert (await client.call(SESSION_RESOLVE_APPROVAL, approve)).resolved
    async with asyncio.timeout(10):
        done, seen = await until_completed(events, turn.id)
    results = [e.item for e in seen if isinstance(e, ItemCompleted) and isinstance(e.item, ToolResultItem)]
    assert done.turn.status == "completed"
    assert results
    assert not results[0].is_error
    assert (await client.call(SESSION_SET_MODE, SessionSetModeParams(mode="plan"))).mode == "plan"
    assert (await client.call(SESSION_GET, SessionGetParams())).mode == "plan"


async def test_steer_and_interrupt(workspace: Path) -> None:
    sleep = SleepTool()
    steps = [{"tool_calls": [call("sleep", seconds=0, hold=True)]}, {"text": "after steer"}]
    client = LocalAppClient.for_runtime(make_runtime(workspace, steps, tools=[sleep]))
    events = client.subscribe()
    thread = (await client.call(THREAD_START, ThreadStartParams())).thread
    turn = (await client.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="go"))).turn
    with pytest.raises(RpcError) as err:
        await client.call(TURN_STEER, TurnSteerParams(thread_id=thread.id, expected_turn_id="turn_other", prompt="x"))
    assert err.value.code == RUNTIME_ERROR
    await sleep.wait_started(1)  # the tool holds the turn open until the steer is in
    steered = await client.call(TURN_STEER, TurnSteerParams(thread_id=thread.id, expected_turn_id=turn.id, prompt="also this"))
    assert steered.turn_id == turn.id
    sleep.release()
    async with asyncio.timeout(10):
        _done, _ = await until_completed(events, turn.id)
    items = (await client.call(THREAD_READ, ThreadReadParams(thread_id=thread.id, include_turns=True))).thread.turns[0].items
    assert any(getattr(i, "steer", False) and i.text == "also this" for i in items)
    turn2 = (await client.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="again"))).turn
    assert (await client.call(TURN_INTERRUPT, TurnInterruptParams(thread_id=thread.id, turn_id=turn2.id))).interrupted
    async with asyncio.timeout(10):
        done2, _ = await until_completed(events, turn2.id)
    assert done2.turn.status in {"interrupted", "completed"}


async def test_errors_are_typed(workspace: Path) -> None:
    client = LocalAppClient.for_runtime(make_runtime(workspace))
    for method, code in [
        ("no/such", METHOD_NOT_FOUND),
        ("auth/codex/login", INVALID_PARAMS),
        ("team/start", INVALID_PARAMS),
        ("thread/read", INVALID_PARAMS),
    ]:
        with pytest.raises(RpcError) as err:
            await client.request(method, {})
        assert err.value.code == code
    with pytest.raises(RpcError) as err:
        await client.request("auth/codex/login", {})
    assert "set issuer and client_id under [auth.codex]" in err.value.message
    with pytest.raises(RpcError) as err:
        await client.request("turn/start", {"threadId": "thr_missing", "prompt": "x"})
    assert err.value.code == INVALID_PARAMS
    with pytest.raises(RpcError) as err:
        await client.call(PROVIDERS_SELECT, ProvidersSelectParams(provider="nope"))
    assert err.value.code == INVALID_PARAMS


async def test_providers_and_models(workspace: Path) -> None:
    client = LocalAppClient.for_runtime(make_runtime(workspace))
    providers = await client.call(PROVIDERS_LIST)
    assert [p.id for p in providers.providers] == ["mock"]
    assert providers.providers[0].selected
    models = await client.call(MODEL_LIST, ModelListParams())
    assert [m.id for m in models.models] == ["mock", "mock-large"]
    selected = await client.call(PROVIDERS_SELECT, ProvidersSelectParams(provider="mock", model="mock-large"))
    assert selected.model == "mock-large"
    assert not selected.persisted
    thread = (await client.call(THREAD_START, ThreadStartParams())).thread
    assert thread.model == "mock-large"
    tools = await client.call(TOOLS_LIST, ToolsListParams())
    assert {t.name for t in tools.tools} == {"sleep", "peek"}


async def test_slow_subscriber_gets_an_error_not_back_pressure(workspace: Path) -> None:
    client = LocalAppClient.for_runtime(make_runtime(workspace, [{"text": "x" * 400, "chunk_size": 1}]))
    slow = client.subscribe(maxsize=20)
    fast = client.subscribe()
    thread = (await client.call(THREAD_START, ThreadStartParams())).thread
    turn = (await client.call(TURN_START, TurnStartParams(thread_id=thread.id, prompt="go"))).turn
    async with asyncio.timeout(10):
        done, _ = await until_completed(fast, turn.id)
    assert done.turn.status == "completed"
    with pytest.raises(ClientFellBehind):
        async for _event in slow:
            pass
