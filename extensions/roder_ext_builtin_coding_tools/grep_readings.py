"""What a grep pattern that matches nothing may have meant, and which patterns need PCRE2.

Models write patterns for the tools they learned on: GNU grep's basic syntax (``foo\\|bar``,
``\\(ab\\)\\{2\\}``, where ripgrep reads ``\\|`` as a literal bar), grep's options typed into the
pattern (``-i foo``), or a JavaScript literal (``/foo/i``). Each of those is a valid regular
expression that silently matches nothing, so ``grep`` tries these readings only after the
pattern as written found nothing, and says which one it used. Look-around and
backreferences are valid PCRE that ripgrep's default engine refuses; ``needs_pcre`` tells grep
to hand them to PCRE2 (or to Python's engine) instead of searching them as text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: ``-i``, ``-rn``, ``-E -i``: grep options that change nothing here but case (``i``); options
#: with another meaning (``-v``, ``-w``, ``-l``...) are not read away.
_OPTIONS = re.compile(r"^(?:-(?P<letters>[inrREHsP]+)\s+)+")
#: ``/foo/`` or ``/foo/gi``: a JavaScript regular-expression literal.
_SLASHED = re.compile(r"^/(?P<body>.+)/(?P<flags>[gimsuy]*)$")
#: grep's basic-syntax escapes: ``\|``, ``\(``, ``\)``, ``\{``, ``\}``, ``\+``, ``\?``.
_BASIC_ESCAPE = re.compile(r"\\[|(){}+?]")
#: ``(?=``, ``(?!``, ``(?<=``, ``(?<!`` or a backreference ``\1``: PCRE, not ripgrep's default.
_PCRE_ONLY = re.compile(r"\(\?<?[=!]|(?<!\\)(?:\\\\)*\\[1-9]")


@dataclass(frozen=True)
class Reading:
    """Another reading of a pattern: the pattern to search, whether case is ignored, and the
    words the result's first line uses for it."""

    pattern: str
    case_insensitive: bool
    said: str


def other_readings(pattern: str, case_insensitive: bool) -> list[Reading]:
    """The readings of ``pattern`` other than as written, most specific first (none when it has
    no such form)."""
    readings: list[Reading] = []
    options = _OPTIONS.match(pattern)
    if options is not None and pattern[options.end() :].strip():
        rest = _unquoted(pattern[options.end() :])
        ignore = case_insensitive or "i" in "".join(re.findall(r"-([A-Za-z]+)", options.group(0)))
        said = f"with {options.group(0).strip()!r} read as grep's options"
        readings.append(Reading(rest, ignore, said))
        pattern, case_insensitive = rest, ignore
    slashed = _SLASHED.match(pattern)
    if slashed is not None:
        ignore = case_insensitive or "i" in slashed["flags"]
        readings.append(Reading(slashed["body"], ignore, "as the regular expression between the slashes"))
    if _BASIC_ESCAPE.search(pattern):
        basic = _from_basic(pattern)
        readings.append(Reading(basic, case_insensitive, f"read in grep's basic syntax, as {basic!r}"))
    return readings


def needs_pcre(pattern: str) -> bool:
    """Whether ``pattern`` uses look-around or backreferences, which only PCRE2 (or Python's
    engine) takes."""
    return _PCRE_ONLY.search(pattern) is not None


def _unquoted(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _from_basic(pattern: str) -> str:
    """A basic-syntax pattern in extended syntax: ``\\|``, ``\\(``, ``\\{``, ``\\+``, ``\\?`` become
    operators, and the bare characters, literal in basic syntax, are escaped."""
    out: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            following = pattern[index + 1]
            out.append(following if following in "|(){}+?" else char + following)
            index += 2
            continue
        out.append("\\" + char if char in "|(){}+?" else char)
        index += 1
    return "".join(out)
