"""Regular expressions that Python's backtracking engine can take forever on.

``grep`` searches with ripgrep, whose engine is linear. Without ripgrep (not installed, or the
process capability not granted) it searches with Python's ``re``, which backtracks: a pattern
like ``(a+)+$`` takes time exponential in the line's length, and the search runs on the event
loop, so one such call would freeze the whole session. ``explosive`` finds the two shapes that
cause it, before any file is read:

- an unbounded repeat inside another (``(a+)+``, ``(\\w*)*``, ``(a+b?)*``);
- an unbounded repeat of alternatives that can start with the same character (``(a|aa)+``,
  ``(\\d|1)*``), which can match one text in exponentially many ways.

One nesting is linear, and common: a repeated group of single characters holding one repeat of
a character class and a literal character that class cannot match (``(\\.\\w+)*``, ``(\\d+,)*``,
``(/[^/]+)+``, ``(?:\\w+::)*``): the literal fences each repeat in, so the text splits into the
group's turns in one way only. It is allowed. Otherwise it errs on the side of refusing: the
model is told to simplify the pattern.
"""

from __future__ import annotations

import re
import re._compiler as compiler  # type: ignore[import-not-found]  # compiles a parsed character class
import re._constants as sre  # type: ignore[import-not-found]  # the parser's opcodes (3.11+; no public API)
import re._parser as parser  # type: ignore[import-not-found]
from typing import Any

_REPEATS = frozenset({sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT})
_ANY = frozenset({"any"})


def explosive(pattern: str, flags: int = 0) -> str | None:
    """Why ``pattern`` can take exponential time in Python's engine, or None (also for a
    pattern that does not compile: compiling reports that)."""
    try:
        parsed = parser.parse(pattern, flags)
    except parser.error:
        return None
    return _scan(list(parsed), inside_repeat=False, state=parsed.state)


def _scan(items: list[Any], *, inside_repeat: bool, state: Any) -> str | None:
    for op, value in items:
        if op in _REPEATS:
            _low, high, body = value
            unbounded = high == sre.MAXREPEAT
            if unbounded and op is not sre.POSSESSIVE_REPEAT:
                if not inside_repeat and _fenced(list(body), state):
                    continue
                if inside_repeat:
                    return "it repeats a repeat (like (a+)+)"
                branch = _branch_of(list(body))
                if branch is not None and _first_sets_overlap(branch):
                    return "it repeats alternatives that can start alike (like (a|ab)+)"
            found = _scan(list(body), inside_repeat=inside_repeat or unbounded, state=state)
            if found:
                return found
        elif op is sre.SUBPATTERN:
            found = _scan(list(value[-1]), inside_repeat=inside_repeat, state=state)
            if found:
                return found
        elif op is sre.BRANCH:
            for alternative in value[1]:
                found = _scan(list(alternative), inside_repeat=inside_repeat, state=state)
                if found:
                    return found
    return None


#: Items that match exactly one character.
_ONE_CHAR = frozenset({sre.LITERAL, sre.NOT_LITERAL, sre.IN, sre.ANY, sre.CATEGORY})


def _fenced(body: list[Any], state: Any) -> bool:
    """Whether a repeated ``body`` is, through its groups, single characters and one unbounded
    repeat of a single character, with a literal among them that the repeated one cannot match
    (``\\.\\w+``): then each turn of the outer repeat ends where it must, and it is linear."""
    items: list[Any] = []
    while body:
        op, value = body.pop(0)
        if op is sre.SUBPATTERN:
            body[:0] = list(value[-1])
        else:
            items.append((op, value))
    repeats = [value for op, value in items if op in _REPEATS]
    singles = [(op, value) for op, value in items if op in _ONE_CHAR]
    if len(repeats) != 1 or len(singles) != len(items) - 1 or repeats[0][1] != sre.MAXREPEAT:
        return False
    repeated = list(repeats[0][2])
    if len(repeated) != 1 or repeated[0][0] not in _ONE_CHAR:
        return False
    try:
        one = compiler.compile(parser.SubPattern(state, repeated), state.flags)
    except (re.error, TypeError, ValueError, RecursionError):
        return False
    return any(op is sre.LITERAL and one.fullmatch(chr(value)) is None for op, value in singles)


def _branch_of(body: list[Any]) -> list[Any] | None:
    """The alternatives in a repeat's body (``(a|b)``; also ``(a|aa)``, which the parser writes
    as ``a`` then ``(|a)``), else None."""
    while len(body) == 1 and body[0][0] is sre.SUBPATTERN:
        body = list(body[0][1][-1])
    return next((list(value[1]) for op, value in body if op is sre.BRANCH), None)


def _first_chars(alternative: Any) -> frozenset[Any]:
    """The characters an alternative can start with (``_ANY`` when that is not simple)."""
    items = list(alternative)
    if not items:
        return _ANY
    op, value = items[0]
    if op is sre.LITERAL:
        return frozenset({value})
    if op is sre.IN and all(kind is sre.LITERAL for kind, _ in value):
        return frozenset(code for _, code in value)
    if op is sre.SUBPATTERN:
        return _first_chars(value[-1])
    return _ANY


def _first_sets_overlap(alternatives: list[Any]) -> bool:
    seen: set[Any] = set()
    for alternative in alternatives:
        first = _first_chars(alternative)
        if first is _ANY or seen & first:
            return True
        seen |= first
    return False
