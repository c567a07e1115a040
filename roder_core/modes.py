"""The policy modes, in a module of their own: ``roder --help`` and ``--version`` build the
command line's parser, whose ``--mode`` names them, without importing pydantic and the IR."""

from __future__ import annotations

from enum import StrEnum


class Mode(StrEnum):
    """Policy modes, strictest first."""

    PLAN = "plan"
    ASK = "ask"
    AUTO_EDIT = "auto-edit"
    BYPASS = "bypass"
