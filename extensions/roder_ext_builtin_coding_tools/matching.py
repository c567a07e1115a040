"""Finding text a model quoted imperfectly, and fitting the replacement to what was found.

Models copy code with the wrong indentation (4 spaces where the file has 8, spaces where it has
tabs) and with typographic punctuation (curly quotes, dashes, non-breaking spaces) where the file
has ASCII, or the reverse. ``edit`` and ``apply_patch`` both match through this module so that a
tolerant match never writes broken code:

- an indentation-tolerant match re-indents the replacement with the same mapping that turns the
  quoted lines' indentation into the file's (relative indentation kept, tabs or spaces as the
  file has them), and refuses when no single mapping explains every matched line;
- a punctuation-tolerant match keeps the file's own characters in the text the replacement does
  not change.
"""

from __future__ import annotations

import difflib
import functools
import itertools
import posixpath
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

#: Characters a model writes where a file has ASCII (or the reverse), with their ASCII form.
_PUNCTUATION: dict[str, str] = {
    **dict.fromkeys("\u2018\u2019\u201a\u201b\u2032\u00b4", "'"),
    **dict.fromkeys("\u201c\u201d\u201e\u201f\u2033\u00ab\u00bb", '"'),
    **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
    **dict.fromkeys("\u00a0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000", " "),
    "\u2026": "...",
    "\ufeff": "",
    "\u200b": "",
}
_TAB_WIDTH = 4


class IndentMismatch(ValueError):
    """The quoted lines match the file only up to indentation, and no single re-indentation maps
    the quoted lines onto the file's lines; the message says which line disagrees."""


@functools.cache
def _fold(char: str) -> str:
    """One character as the tolerant passes compare it: typographic punctuation in its ASCII
    form, and any other character decomposed (NFD), so ``é`` typed as one character matches
    ``e`` + a combining accent in a file (macOS file names, text pasted from some editors), and
    the reverse. Decomposing character by character keeps a map from each folded character
    back to the original one."""
    folded = _PUNCTUATION.get(char)
    if folded is not None:
        return folded
    return char if char < "\x80" else unicodedata.normalize("NFD", char)


def normalize_punctuation(text: str) -> str:
    """``text`` with typographic quotes, dashes, special spaces and ellipses in their ASCII form,
    and its accented letters decomposed (``_fold``)."""
    return "".join(_fold(char) for char in text)


def has_special_punctuation(text: str) -> bool:
    """Whether ``text`` has anything ``_fold`` changes: typographic punctuation, or a character
    that Unicode writes in two ways (composed or decomposed), either way."""
    return any(char in _PUNCTUATION or (char >= "\x80" and (_fold(char) != char or unicodedata.combining(char))) for char in text)


@dataclass
class _Normalized:
    """A text in ASCII punctuation, with where each of its characters came from."""

    text: str
    #: origin[i]: index in the original text of normalized character i; origin[len(text)] is the
    #: original's length.
    origin: list[int]
    #: start[j]: index in ``text`` where original character j's normalized form begins.
    start: list[int]

    @classmethod
    def of(cls, original: str) -> _Normalized:
        chars: list[str] = []
        origin: list[int] = []
        start: list[int] = []
        for index, char in enumerate(original):
            start.append(len(chars))
            for out in _fold(char):
                chars.append(out)
                origin.append(index)
        start.append(len(chars))
        origin.append(len(original))
        return cls("".join(chars), origin, start)


def punctuation_spans(text: str, needle: str) -> list[tuple[int, int]]:
    """Spans of ``text`` equal to ``needle`` once both are in ASCII punctuation."""
    norm_text, norm_needle = _Normalized.of(text), normalize_punctuation(needle)
    if not norm_needle:
        return []
    spans: list[tuple[int, int]] = []
    at = norm_text.text.find(norm_needle)
    while at >= 0:
        spans.append((norm_text.origin[at], norm_text.origin[at + len(norm_needle)]))
        at = norm_text.text.find(norm_needle, at + len(norm_needle))
    return spans


def keep_file_characters(found: str, old: str, new: str) -> str:
    """``new`` with the parts it shares with ``old`` spelled as the file spells them in ``found``
    (the file's text that ``old`` matched up to punctuation)."""
    norm_found, norm_old = _Normalized.of(found), _Normalized.of(old)

    def in_found(position: int) -> int:
        return norm_found.origin[norm_old.start[position]]

    out: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        out.append(found[in_found(i1) : in_found(i2)] if tag == "equal" else new[j1:j2])
    return "".join(out)


def collapse(line: str) -> str:
    """A line compared without its indentation and with every run of whitespace as one space."""
    return " ".join(line.split())


def indentation(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _width(indent: str) -> int:
    return len(indent.expandtabs(_TAB_WIDTH))


def _unit(widths: Sequence[int]) -> int | None:
    """The indentation unit of consecutive non-blank lines: the most common positive change of
    width from one line to the next (the smaller on a tie), so aligned continuation lines do not
    count for more than they are."""
    changes = Counter(abs(b - a) for a, b in itertools.pairwise(widths) if a != b)
    if not changes:
        return None
    return min(changes, key=lambda gap: (-changes[gap], gap))


class Reindenter:
    """Maps the model's indentation onto the file's, learned from lines known to correspond.

    The mapping keeps relative indentation: a line one level deeper than the model's first quoted
    line becomes one of the file's levels deeper than the file's first matched line, in the
    file's unit (a tab, or its number of spaces)."""

    def __init__(self, quoted: Sequence[str], found: Sequence[str], new: Sequence[str], whole_file: Sequence[str]) -> None:
        pairs = [(q, f) for q, f in zip(quoted, found, strict=True) if q.strip()]
        self._model_base = _width(indentation(pairs[0][0])) if pairs else 0
        self._file_base = indentation(pairs[0][1]) if pairs else ""
        model_widths = [_width(indentation(line)) for line in quoted if line.strip()]
        model_widths += [_width(indentation(line)) for line in new if line.strip()]
        self._model_unit = _unit(model_widths) or _TAB_WIDTH
        file_indents = [indentation(line) for line in whole_file if line.strip()]
        if any(indent.startswith("\t") for indent in file_indents) or "\t" in self._file_base:
            self._file_unit = "\t"
        else:
            self._file_unit = " " * (_unit([_width(i) for i in file_indents]) or self._model_unit)
        for number, (model_line, file_line) in enumerate(pairs, start=1):
            mapped = self.map(indentation(model_line))
            if mapped != indentation(file_line):
                raise IndentMismatch(
                    f"line {number} of old_string is indented {_describe(indentation(model_line))} and the matching "
                    f"file line {_describe(indentation(file_line))}, which does not fit how the other lines map"
                )

    def map(self, indent: str) -> str | None:
        """The file's indentation for a model line indented ``indent``; None when the line would
        sit left of where the file allows (dedented past the matched block's base)."""
        delta = _width(indent) - self._model_base
        levels, extra = divmod(delta, self._model_unit)
        if levels >= 0:
            return self._file_base + self._file_unit * levels + " " * extra
        cut = self._file_unit * -levels
        if not self._file_base.endswith(cut):
            return None
        return self._file_base[: len(self._file_base) - len(cut)] + " " * extra

    def lines(self, new: Sequence[str]) -> list[str]:
        out: list[str] = []
        for line in new:
            if not line.strip():
                out.append("")
                continue
            mapped = self.map(indentation(line))
            if mapped is None:
                raise IndentMismatch(f"new_string's line {line.strip()!r} is dedented past the start of the matched lines")
            out.append(mapped + line.lstrip(" \t"))
        return out


def _describe(indent: str) -> str:
    if not indent:
        return "not at all"
    tabs, spaces = indent.count("\t"), indent.count(" ")
    parts = [f"{tabs} tab{'s' if tabs != 1 else ''}"] if tabs else []
    parts += [f"{spaces} space{'s' if spaces != 1 else ''}"] if spaces else []
    return "with " + " and ".join(parts)


def line_blocks(lines: Sequence[str], quoted: Sequence[str], *, loose: bool = False) -> list[int]:
    """Indexes of ``lines`` where ``quoted`` starts, comparing lines without indentation and with
    collapsed whitespace (``loose`` also in ASCII punctuation)."""
    if not quoted:
        return []

    def key(line: str) -> str:
        return collapse(normalize_punctuation(line) if loose else line)

    wanted = [key(line) for line in quoted]
    keys = [key(line) for line in lines]
    return [i for i in range(len(lines) - len(wanted) + 1) if keys[i : i + len(wanted)] == wanted]


def whitespace_spans(text: str, needle: str) -> list[tuple[int, int]]:
    """Spans of ``text`` equal to ``needle`` up to the amount and kind of whitespace (used for a
    fragment inside one line, where no indentation is involved)."""
    tokens = needle.split()
    if not tokens:
        return []
    pattern = re.compile(r"[ \t]+".join(re.escape(token) for token in tokens))
    return [(m.start(), m.end()) for m in pattern.finditer(text)]


def already_there(lines: Sequence[str], produced: Sequence[str]) -> int | None:
    """The index of the first line where the lines an edit or hunk would produce already
    stand, compared up to indentation, spacing and punctuation; None when they do not (or
    when they are only blank lines, which say nothing)."""
    produced = list(produced)
    while produced and not produced[-1].strip():
        produced.pop()
    if not any(line.strip() for line in produced):
        return None
    found = line_blocks(lines, produced, loose=True)
    return found[0] if found else None


def _style(lines: Sequence[str]) -> str | None:
    """ "tabs" or "spaces" when the indented lines are mostly indented so (a tab-indented file's
    `` * `` comment lines aside), else None."""
    tabs = sum(1 for line in lines if line.startswith("\t"))
    spaces = sum(1 for line in lines if line.startswith("  ") and line.strip())
    if tabs > 3 * spaces:
        return "tabs"
    if spaces > 3 * tabs:
        return "spaces"
    return None


#: Files whose leading tabs are syntax, not indentation: a makefile's recipe lines
#: (``Makefile``, ``GNUmakefile``, ``Makefile.am``, ``rules.mk``).
_MAKEFILE = re.compile(r"^(?:gnu)?makefile(?:\..*)?$|\.(?:mk|mak)$", re.IGNORECASE)


def _leading(line: str, char: str) -> int:
    return len(line) - len(line.lstrip(char))


def in_file_style(text: str, old: str, new: str, name: str) -> tuple[str, str] | None:
    """``new`` indented in the file's style when it replaces ``old`` (found as written) but is
    indented with spaces where the rest of the file uses tabs, or the reverse (a model that writes every
    indentation with spaces), with the words saying so; None when the styles agree.

    Tabs become the file's own unit of spaces. Spaces become tabs at the width the first lines
    of ``old`` and ``new`` show (8 spaces for two tabs: 4 a tab), else ``new``'s own unit; when
    a line's spaces are no whole number of tabs, ``new`` stays as written, and the words say
    to check the indentation. Tabs that are syntax stay tabs: in a makefile (``name``) a recipe
    line starts with one, and a ``<<-`` here-document strips tabs only."""
    # The file's style is that of the lines the edit keeps: replacing every indented line is a
    # change of style, which is the model's to make.
    file_lines, new_lines = text.replace(old, "", 1).split("\n"), new.split("\n")
    file_style, new_style = _style(file_lines), _style(new_lines)
    if file_style is None or new_style is None or file_style == new_style:
        return None
    if file_style == "spaces" and (_MAKEFILE.search(posixpath.basename(name)) or "<<-" in new):
        return None
    if file_style == "spaces":
        unit = _unit([_width(indentation(line)) for line in file_lines if line.strip()]) or _TAB_WIDTH
        spaced = [" " * (unit * _leading(line, "\t")) + line.lstrip("\t") for line in new_lines]
        return "\n".join(spaced), f"new_string's tab indentation was written as the file's {unit} spaces a level"
    old_first = next((line for line in old.split("\n") if line.strip()), "")
    new_first = next((line for line in new_lines if line.strip()), "")
    tabs, spaces = _leading(old_first, "\t"), _leading(new_first, " ")
    width = spaces // tabs if tabs and spaces and spaces % tabs == 0 else None
    width = width or _unit([_leading(line, " ") for line in new_lines if line.strip()]) or _TAB_WIDTH
    tabbed: list[str] = []
    for line in new_lines:
        levels, extra = divmod(_leading(line, " "), width)
        if extra and line.strip():
            return (
                new,
                "new_string is indented with spaces and the file with tabs, in no whole number of tabs; it was written as sent",
            )
        tabbed.append("\t" * levels + line.lstrip(" "))
    return "\n".join(tabbed), f"new_string's space indentation was written as the file's tabs ({width} spaces a tab)"
