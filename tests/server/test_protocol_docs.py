"""The protocol models are the single source of truth: docs, schema and handlers agree."""

from __future__ import annotations

from pathlib import Path

from roder_core.server.dispatcher import HANDLERS
from roder_core.server.docs import render
from roder_core.server.schema import load_methods, protocol_schema

#: Every method the issue and seed 004 name for this release.
OFFERED = """auth/codex/login auth/codex/status auth/codex/logout auth/supergrok/login auth/supergrok/status
auth/supergrok/logout initialize extensions/list providers/list model/list tools/list agents/list thread/start thread/list
thread/read thread/fork turn/start turn/steer turn/interrupt session/get session/set_mode session/resolve_approval
session/resolve_user_input session/exit_plan providers/select providers/configure settings/get
settings/set_web_search settings/set_default_mode fs/readFile fs/readDirectory command/exec commands/list
commands/expand commands/run tools/call memory/list memory/read memory/save memory/update memory/delete memory/query
memory/provider/list memory/provider/set memory/recall/preview git/changes/list git/changes/read
workspace/changes/list hunk/list hunk/read hunk/rollback tasks/submit tasks/list tasks/get tasks/cancel
tasks/subscribe runners/list runners/select runners/session runners/snapshot runners/delete runners/ports
media/list media/read media/thumbnail media/delete media/attachToTurn
marketplaces/list marketplaces/install_default marketplaces/add marketplaces/remove
marketplaces/refresh marketplaces/search marketplaces/plugin plugins/preview_install plugins/install
plugins/install_all_variants plugins/list_installed plugins/disable plugins/uninstall
team/start team/list team/read team/member/start team/member/message team/member/interrupt
team/member/focus team/cleanup team/pane/focus team/pane/cleanup plan/review/read plan/review/comment
plan/review/rewrite plan/review/approve plan/review/reject
workflow/scan workflow/preview workflow/enable workflow/ignore workflow/refresh workflow/remove
workflows/plan workflows/approve workflows/list workflows/get workflows/pause workflows/resume
workflows/stop workflows/restartAgent"""
OFFERED_METHODS = OFFERED.split()


def test_docs_are_generated_from_the_models() -> None:
    docs = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
    assert docs.read_text(encoding="utf-8") == render(), "regenerate: python -m roder_core.server.docs > docs/protocol.md"


def test_every_method_has_models_and_a_handler() -> None:
    methods = load_methods()
    assert set(OFFERED_METHODS) <= set(methods)
    assert set(methods) <= set(HANDLERS)
    schema = protocol_schema()
    for name in methods:
        ref = schema["methods"][name]["params"]["$ref"].rsplit("/", 1)[-1]
        assert ref in schema["$defs"], name
