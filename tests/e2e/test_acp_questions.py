"""``ask_user`` through `roder acp`: an editor with form elicitation gets one
``elicitation/create`` form; any other editor gets one permission request per question."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from acp import text_block
from acp.schema import (
    AcceptElicitationResponse,
    ClientCapabilities,
    DeclineElicitationResponse,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    ToolCallProgress,
)

from tests.e2e.test_acp import EditorClient, agent
from tests.server.support import call, trusted_workspace

pytestmark = pytest.mark.e2e

QUESTIONS = [
    {
        "question": "Which database?",
        "header": "Database",
        "options": [{"label": "SQLite", "description": "one file"}, {"label": "Postgres", "description": "a server"}],
    },
    {
        "question": "Which extras?",
        "options": [{"label": "Metrics"}, {"label": "Tracing"}],
        "multi_select": True,
        "allow_free_text": False,
    },
]
STEPS = [{"tool_calls": [call("ask_user", questions=QUESTIONS)]}, {"text": "noted"}]


class FormEditor(EditorClient):
    def __init__(self, answer: Any) -> None:
        super().__init__()
        self.answer = answer
        self.forms: list[tuple[str, Any]] = []

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Any:
        self.forms.append((message, mode))
        return self.answer


def ask_user_result(client: EditorClient) -> str:
    finished = [p for p in client.of(ToolCallProgress) if p.status == "completed" and p.raw_output]
    return str(finished[-1].raw_output["text"])


async def run(tmp_path: Path, client: EditorClient, caps: ClientCapabilities | None) -> None:
    workspace, env = trusted_workspace(tmp_path, STEPS)
    async with agent(workspace, env, client) as (conn, _proc):
        await conn.initialize(protocol_version=1, client_capabilities=caps)
        session = await conn.new_session(cwd=str(workspace))
        async with asyncio.timeout(60):
            result = await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])
        assert result.stop_reason == "end_turn"


async def test_an_editor_with_forms_gets_one_form(tmp_path: Path) -> None:
    answer = AcceptElicitationResponse(
        action="accept", content={"q1": "Postgres", "q1_own_words": "with pgvector", "q2": ["Metrics", "Tracing"]}
    )
    client = FormEditor(answer)
    caps = ClientCapabilities(elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities()))
    await run(tmp_path, client, caps)
    [(message, mode)] = client.forms
    assert message == "The agent has 2 questions for you."
    schema = mode.requested_schema.model_dump(by_alias=True, exclude_none=True)
    q1 = schema["properties"]["q1"]
    assert q1["type"] == "string" and q1["title"] == "Database" and q1["description"] == "Which database?"
    assert q1["oneOf"] == [
        {"const": "SQLite", "title": "SQLite", "description": "one file"},
        {"const": "Postgres", "title": "Postgres", "description": "a server"},
    ]
    assert schema["properties"]["q2"]["items"]["anyOf"][1]["const"] == "Tracing"
    assert "q1_own_words" in schema["properties"] and "q2_own_words" not in schema["properties"]
    assert client.permissions == []
    text = ask_user_result(client)
    assert '"Which database?" → Postgres, (their own words) with pgvector' in text
    assert '"Which extras?" → Metrics, Tracing' in text


async def test_a_declined_form_tells_the_model(tmp_path: Path) -> None:
    client = FormEditor(DeclineElicitationResponse(action="decline"))
    caps = ClientCapabilities(elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities()))
    await run(tmp_path, client, caps)
    assert "declined to answer" in ask_user_result(client)


async def test_an_editor_without_forms_gets_a_permission_request_per_question(tmp_path: Path) -> None:
    client = EditorClient(["option-1", "option-0"])
    await run(tmp_path, client, ClientCapabilities())
    (first, first_kinds), (second, _kinds) = client.permissions
    assert first.title == "Which database?" and first.kind == "think"
    assert first_kinds == ["allow_once", "allow_once", "reject_once"]
    assert second.title == "Which extras?"
    text = ask_user_result(client)
    assert '"Which database?" → Postgres' in text and '"Which extras?" → Metrics' in text
