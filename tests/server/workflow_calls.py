"""Every workflow/* and workflows/* method through ``client.call`` with its typed result, on a
client of its own: the mock's first answer in every thread is a planned workflow, so
``workflows/plan`` gets one and its agent step answers with that text."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from roder_core.runtime.bootstrap import StartSettings
from roder_core.server.client import LocalAppClient
from roder_core.server.protocol import MethodSpec, ProtocolModel
from roder_core.server.protocol_workflows import (
    WORKFLOW_ENABLE,
    WORKFLOW_IGNORE,
    WORKFLOW_PREVIEW,
    WORKFLOW_REFRESH,
    WORKFLOW_REMOVE,
    WORKFLOW_SCAN,
    WORKFLOWS_APPROVE,
    WORKFLOWS_CREATE,
    WORKFLOWS_GET,
    WORKFLOWS_LIST,
    WORKFLOWS_PAUSE,
    WORKFLOWS_PLAN,
    WORKFLOWS_RESTART_AGENT,
    WORKFLOWS_RESUME,
    WORKFLOWS_STOP,
    WorkflowIdParams,
    WorkflowPathParams,
    WorkflowsApproveParams,
    WorkflowScanParams,
    WorkflowsCreateParams,
    WorkflowsListParams,
    WorkflowsPlanParams,
    WorkflowsRestartAgentParams,
    WorkflowUpdated,
)
from roder_core.workflows.model import WorkflowDefinition

PLANNED = {
    "name": "typed",
    "steps": [
        {"id": "greet", "prompt": "Say hello."},
        {"id": "count", "run": "printf %s {step.greet} | wc -c", "depends_on": ["greet"], "score": ["test -n {output}"]},
    ],
}
SLOW = WorkflowDefinition.model_validate({"name": "slow", "steps": [{"id": "wait", "run": "sleep 60"}]})
FILE = 'name = "from-file"\n[[steps]]\nid = "one"\nrun = "echo one"\n'


async def _finished(events: Any, workflow_id: str) -> WorkflowUpdated:
    async def find() -> WorkflowUpdated:
        async for event in events:
            if isinstance(event, WorkflowUpdated) and event.workflow.id == workflow_id and event.change == "completed":
                return event
        raise AssertionError("the notification stream ended")

    async with asyncio.timeout(60):
        return await find()


async def workflow_calls(called: set[str], root: Path, env: dict[str, str]) -> None:
    workspace = root / "wf-ws"
    (workspace / ".roder" / "workflows").mkdir(parents=True)
    (workspace / ".roder" / "workflows" / "check.toml").write_text(FILE)
    script = root / "wf-script.json"
    script.write_text(json.dumps({"steps": [{"text": json.dumps(PLANNED)}]}))
    settings = StartSettings(
        cwd=workspace, provider="mock", trust=True, env={**env, "RODER_MOCK_SCRIPT": str(script)}, mode="bypass", sandbox="off"
    )
    client = LocalAppClient.start(settings)

    async def typed(spec: MethodSpec[Any, Any], params: ProtocolModel) -> Any:
        result = await client.call(spec, params)
        assert type(result) is spec.result, spec.name
        called.add(spec.name)
        return result

    async with client:
        events = client.subscribe()
        scan = await typed(WORKFLOW_SCAN, WorkflowScanParams())
        assert scan.trusted and [f.decision for f in scan.files] == ["undecided"]
        preview = await typed(WORKFLOW_PREVIEW, WorkflowPathParams(path="check"))
        assert preview.graph.levels == [["one"]]
        assert (await typed(WORKFLOW_ENABLE, WorkflowPathParams(path="check"))).file.decision == "enabled"
        from_file = (await typed(WORKFLOWS_CREATE, WorkflowsCreateParams(path="check"))).workflow
        assert from_file.source.kind == "file" and from_file.status == "draft"
        assert (await typed(WORKFLOW_IGNORE, WorkflowPathParams(path="check"))).file.decision == "ignored"
        assert (await typed(WORKFLOW_REFRESH, WorkflowScanParams())).files[0].decision == "ignored"
        assert (await typed(WORKFLOW_REMOVE, WorkflowPathParams(path="check"))).removed

        planned = (await typed(WORKFLOWS_PLAN, WorkflowsPlanParams(goal="greet and count"))).workflow
        assert planned.status == "draft" and [s.id for s in planned.definition.steps] == ["greet", "count"]
        await typed(WORKFLOWS_APPROVE, WorkflowsApproveParams(workflow_id=planned.id))
        done = await _finished(events, planned.id)
        count = done.workflow.state("count")
        assert int(count.output.strip()) == len(done.workflow.state("greet").output)
        listed = (await typed(WORKFLOWS_LIST, WorkflowsListParams(limit=5))).workflows
        assert planned.id in [w.id for w in listed]
        assert (await typed(WORKFLOWS_GET, WorkflowIdParams(workflow_id=planned.id))).workflow.status == "completed"
        await typed(WORKFLOWS_RESTART_AGENT, WorkflowsRestartAgentParams(workflow_id=planned.id, step_id="count"))
        again = await _finished(events, planned.id)
        assert again.workflow.state("count").attempts == 2

        slow = (await typed(WORKFLOWS_CREATE, WorkflowsCreateParams(workflow=SLOW))).workflow
        await typed(WORKFLOWS_APPROVE, WorkflowsApproveParams(workflow_id=slow.id))
        assert (await typed(WORKFLOWS_PAUSE, WorkflowIdParams(workflow_id=slow.id))).workflow.status == "paused"
        assert (await typed(WORKFLOWS_RESUME, WorkflowIdParams(workflow_id=slow.id))).workflow.status == "running"
        assert (await typed(WORKFLOWS_STOP, WorkflowIdParams(workflow_id=slow.id))).workflow.status == "stopped"
        events.close()
