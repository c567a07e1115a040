"""JSON from outside Roder, parsed with a depth limit: the one parser for every boundary.

Models (tool-call arguments, stream events), MCP servers and control-plane clients send JSON that
Roder parses and then walks (validation, redaction, storage, encoding). ``json.loads`` itself
gives up on deep nesting with ``RecursionError``, and data that is merely very deep (a few
thousand levels) parses and then breaks whatever walks it next. ``loads`` refuses anything nested
deeper than ``MAX_DEPTH`` before parsing, with a ``JSONDecodeError`` (so every caller's handler
for malformed JSON covers it) whose message says what the limit is.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: Deepest nesting of arrays and objects accepted. Real tool arguments, MCP results and
#: protocol messages stay under 20; Python's own limits start to bite in the hundreds.
MAX_DEPTH = 128
#: A string literal (skipped whole) or a bracket.
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


class JSONTooDeep(json.JSONDecodeError):
    """JSON nested deeper than the limit (refused before parsing)."""


def depth_problem(text: str, max_depth: int = MAX_DEPTH) -> JSONTooDeep | None:
    """The error for ``text`` if its nesting goes deeper than ``max_depth``, else None. Linear
    in the size of ``text``; text with fewer brackets than the limit is not even scanned."""
    if text.count("[") + text.count("{") <= max_depth:
        return None
    depth = 0
    for token in _TOKENS.finditer(text):
        char = token.group()
        if char in "[{":
            depth += 1
            if depth > max_depth:
                return JSONTooDeep(f"JSON nested deeper than {max_depth} levels", text, token.start())
        elif char in "]}":
            depth -= 1
    return None


def loads(text: str | bytes, max_depth: int = MAX_DEPTH, **options: Any) -> Any:
    """``json.loads`` for untrusted text, refusing nesting deeper than ``max_depth``."""
    decoded = text.decode("utf-8") if isinstance(text, bytes) else text
    problem = depth_problem(decoded, max_depth)
    if problem is not None:
        raise problem
    return json.loads(decoded, **options)
