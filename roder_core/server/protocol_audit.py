"""Protocol models of the audit log (``roder audit``): checking its hash chain and reading its
last records. Both read the server's own log (``audit.jsonl`` in the data dir), never a path a
client names."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from roder_core.ir import empty_list
from roder_core.server.protocol import MethodSpec, NoParams, ProtocolModel, register


class AuditVerifyResult(ProtocolModel):
    path: str
    ok: bool
    records: int
    #: Hash of the last intact record (the chain's head).
    head_hash: str
    #: One line per problem, each naming its line number; empty when ``ok``.
    problems: list[str] = Field(default_factory=empty_list)


class AuditTailParams(ProtocolModel):
    limit: int = Field(default=20, ge=1, le=10_000)


class AuditLine(ProtocolModel):
    #: The line as stored.
    raw: str
    #: The record it holds; None for a line that is not JSON.
    record: dict[str, Any] | None = None


class AuditTailResult(ProtocolModel):
    path: str
    #: False when there is no audit log yet.
    exists: bool
    lines: list[AuditLine] = Field(default_factory=empty_list)


AUDIT_VERIFY = register(
    MethodSpec(
        "audit/verify",
        "audit",
        NoParams,
        AuditVerifyResult,
        "Check the audit log's hash chain; every problem names its line.",
    )
)

AUDIT_TAIL = register(
    MethodSpec("audit/tail", "audit", AuditTailParams, AuditTailResult, "The audit log's last records, oldest first.")
)
