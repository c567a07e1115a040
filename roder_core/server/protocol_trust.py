"""``trust/list``: every recorded trust decision (``roder trust --list``). ``trust/get`` and
``trust/set`` are seed-era methods of ``protocol.py``."""

from __future__ import annotations

from roder_core.server.protocol import MethodSpec, NoParams, ProtocolModel, register


class TrustDecision(ProtocolModel):
    #: The canonical folder the decision was recorded for (it covers its subfolders too).
    path: str
    trusted: bool


class TrustListResult(ProtocolModel):
    #: Sorted by path.
    decisions: list[TrustDecision]


TRUST_LIST = register(MethodSpec("trust/list", "trust", NoParams, TrustListResult, "Every recorded trust decision, by folder."))
