"""audit/verify and audit/tail over the server's audit log.

``verify_log`` and ``tail_log`` are the handlers' whole work, as functions of the log's path:
``roder audit`` calls them without starting a runtime (reading a file needs none, and the
command stays as quick as reading it), and on the file ``--file`` names.
"""

from __future__ import annotations

import json
from pathlib import Path

from roder_core.policy.audit import verify
from roder_core.server.dispatcher import CallContext, Dispatcher, handles
from roder_core.server.protocol import NoParams
from roder_core.server.protocol_audit import (
    AUDIT_TAIL,
    AUDIT_VERIFY,
    AuditLine,
    AuditTailParams,
    AuditTailResult,
    AuditVerifyResult,
)


def verify_log(path: Path) -> AuditVerifyResult:
    report = verify(path)
    return AuditVerifyResult(
        path=str(path), ok=report.ok, records=report.records, head_hash=report.head_hash, problems=report.problems
    )


def _line(raw: str) -> AuditLine:
    try:
        record = json.loads(raw)
    except ValueError:
        return AuditLine(raw=raw)
    return AuditLine(raw=raw, record=record if isinstance(record, dict) else None)


def tail_log(path: Path, limit: int) -> AuditTailResult:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()[-limit:]
    except FileNotFoundError:
        return AuditTailResult(path=str(path), exists=False)
    return AuditTailResult(path=str(path), exists=True, lines=[_line(raw) for raw in lines])


@handles(AUDIT_VERIFY)
async def audit_verify(app: Dispatcher, params: NoParams, ctx: CallContext) -> AuditVerifyResult:
    return verify_log(app.runtime.options.paths.audit_file)


@handles(AUDIT_TAIL)
async def audit_tail(app: Dispatcher, params: AuditTailParams, ctx: CallContext) -> AuditTailResult:
    return tail_log(app.runtime.options.paths.audit_file, params.limit)
