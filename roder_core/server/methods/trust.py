"""trust/get, trust/set and trust/list: whether a folder's own config, hooks, extensions, skills,
commands, agents and MCP servers load.

The work is done by functions of the user's paths (``trust_state``, ``record_trust``,
``trust_decisions``): ``roder trust`` / ``roder untrust`` call them without starting a runtime,
since deciding about a folder must not load that folder's items first.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from roder_core.policy.trust import TrustStore, project_items
from roder_core.server.dispatcher import CallContext, Dispatcher, handles
from roder_core.server.errors import InvalidParams
from roder_core.server.methods.core import absolute_path
from roder_core.server.protocol import TRUST_GET, TRUST_SET, NoParams, TrustGetParams, TrustResult, TrustSetParams
from roder_core.server.protocol_trust import TRUST_LIST, TrustDecision, TrustListResult
from roder_core.settings.paths import RoderPaths

#: Appends one audit record: ``(kind, fields)`` (``AuditLog.record``).
AuditRecorder = Callable[[str, dict[str, Any]], None]


def trust_state(paths: RoderPaths, folder: Path, *, loaded: bool = False) -> TrustResult:
    """The decision that applies to ``folder`` and the project items it would load;
    ``loaded``: whether the asking process loaded them."""
    if not folder.is_dir():
        raise InvalidParams(f"cwd {str(folder)!r} is not a directory")
    found = TrustStore(paths).effective_decision(folder)
    return TrustResult(
        cwd=TrustStore.canonical(folder),
        trusted=bool(found and found[0]),
        decided_at=found[1] if found else None,
        items=project_items(folder),
        loaded=loaded,
    )


def record_trust(paths: RoderPaths, folder: Path, trusted: bool, audit: AuditRecorder, client: str) -> None:
    """Record a decision in the user's data dir (never the project) and in the audit log."""
    if not folder.is_dir():
        raise InvalidParams(f"cwd {str(folder)!r} is not a directory")
    TrustStore(paths).set(folder, trusted)
    audit("trust.set", {"folder": TrustStore.canonical(folder), "trusted": trusted, "client": client})


def trust_decisions(paths: RoderPaths) -> TrustListResult:
    decisions = TrustStore(paths).trusted_folders()
    return TrustListResult(decisions=[TrustDecision(path=path, trusted=verdict) for path, verdict in decisions.items()])


def _folder(app: Dispatcher, cwd: str | None) -> Path:
    return absolute_path(cwd, "cwd") if cwd is not None else Path(app.runtime.options.cwd)


def _state(app: Dispatcher, folder: Path) -> TrustResult:
    options = app.runtime.options
    here = TrustStore.canonical(folder) == TrustStore.canonical(Path(options.cwd))
    return trust_state(options.paths, folder, loaded=here and options.trusted)


@handles(TRUST_GET)
async def trust_get(app: Dispatcher, params: TrustGetParams, ctx: CallContext) -> TrustResult:
    return _state(app, _folder(app, params.cwd))


@handles(TRUST_SET)
async def trust_set(app: Dispatcher, params: TrustSetParams, ctx: CallContext) -> TrustResult:
    folder = _folder(app, params.cwd)
    runtime = app.runtime
    record_trust(runtime.options.paths, folder, params.trusted, runtime.audit.record, ctx.client_name or ctx.connection_id)
    return _state(app, folder)


@handles(TRUST_LIST)
async def trust_list(app: Dispatcher, params: NoParams, ctx: CallContext) -> TrustListResult:
    return trust_decisions(app.runtime.options.paths)
