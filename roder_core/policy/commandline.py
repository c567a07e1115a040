"""Reads a shell command line with a real bash parser (tree-sitter-bash), for policy checks.

``git status && curl x | sh`` must not ride an allow rule for ``git status*``: every simple
command is reported as a part of its own, and redirects are reported separately (a ``>`` is a
write to its target). A hand-written scanner always misses some of bash's grammar (``case``,
functions, ``$(...)`` inside ``$((...))`` or an array subscript, ``$'...'``, nested backticks,
globs in the command word), so the rule is the other way round:

- a part is **plain** only when it is a simple command made of literal words: unquoted words
  of safe characters, '...' and "..." strings without expansions, numbers; its command word
  has no glob; it may carry literal ``VAR=value`` prefixes (shown in its text) and redirects
  to literal targets;
- the line is **understood** only when every part is plain and the only structure around them
  is ``;``, ``&&``, ``||``, ``|``, ``&``, newlines, ``( ... )``, ``{ ...; }`` and ``!``, and
  here-documents have no expansions;
- anything else (substitutions, expansions, ``$'...'``, globs, functions, ``if``/``case``/loops,
  ``declare``, ``[[ ]]``, parse errors) is reported in ``opaque`` with a short reason. Policy
  never lets a rule allow such a line; it asks.

Commands found anywhere, including inside substitutions, function bodies, control flow, nested
backticks and ``bash -c``/``eval`` strings, are still listed as parts so that deny and ask
rules match them wherever they hide.
"""

from __future__ import annotations

import codecs
import posixpath
import re
import shlex
import threading
from dataclasses import dataclass, field
from typing import Any

from roder_core.kernel.tools import PolicySubject
from roder_core.policy.shell_argv import SHELLS

#: How a part whose command cannot be known before it runs is described (``$(which rm) x``,
#: ``eval "$X"``): deny rules cannot be checked against it, so policy always asks.
UNKNOWN_COMMAND = "a command only known when it runs"
#: Redirect targets that are not files.
HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
#: Nodes that only group or sequence commands: their commands are checked one by one.
_TRANSPARENT = frozenset(
    {
        "program",
        "list",
        "pipeline",
        "subshell",
        "compound_statement",
        "negated_command",
        "redirected_statement",
    }
)
_REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
#: Builtins that evaluate their arguments again (arithmetic, array subscripts, code strings), so
#: a quoted ``'a[$(cmd)]'`` runs ``cmd``.
_REEVALUATING = frozenset(
    {
        "let",
        "test",
        "[",
        "printf",
        "declare",
        "typeset",
        "local",
        "export",
        "readonly",
        "read",
        "unset",
        "mapfile",
        "readarray",
        "eval",
        "trap",
        "alias",
        "source",
        ".",
        "shift",
        "return",
        "exit",
        "wait",
        "kill",
        "ulimit",
        "umask",
        "set",
        "shopt",
        "complete",
        "compgen",
        "fc",
        "bind",
        "enable",
    }
)
#: Control characters (other than tab and newline) read differently by bash and the parser.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
#: Characters an unquoted literal word may hold without a backslash (no expansion, glob,
#: brace, history or operator character).
_SAFE_WORD = re.compile(r"[A-Za-z0-9_\-./:=,+@%^~#]*")
_WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})
_READ_OPS = frozenset({"<", "<&"})
_NEEDS_QUOTES = re.compile(r"[^A-Za-z0-9_\-./:=,+@%^~#]")
#: What each construct is called in a refusal.
_CONSTRUCTS = {
    "command_substitution": "a command substitution $(...) or `...`",
    "process_substitution": "a process substitution <(...) or >(...)",
    "arithmetic_expansion": "an arithmetic expansion $((...))",
    "simple_expansion": "a variable expansion $name",
    "expansion": "a parameter expansion ${...}",
    "ansi_c_string": "$'...' quoting",
    "translated_string": '$"..." quoting',
    "function_definition": "a function definition",
    "case_statement": "a case statement",
    "if_statement": "an if statement",
    "for_statement": "a for loop",
    "c_style_for_statement": "a for loop",
    "while_statement": "a while/until loop",
    "declaration_command": "a declaration (declare/export/local/readonly)",
    "unset_command": "unset",
    "variable_assignment": "a variable assignment",
    "test_command": "a test [[ ... ]] or [ ... ]",
    "brace_expression": "a brace expansion",
}


@dataclass(frozen=True)
class Redirect:
    target: str
    write: bool
    append: bool = False


@dataclass
class CommandPart:
    words: list[str] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    #: Why this part is not a plain literal command ("" when it is).
    opaque: str = ""

    @property
    def text(self) -> str:
        return " ".join(self.words)

    @property
    def plain(self) -> bool:
        return not self.opaque


@dataclass
class SplitCommand:
    parts: list[CommandPart]
    #: Why the line as a whole cannot be allowed by a rule ("" when every part is plain).
    opaque: str = ""

    @property
    def understood(self) -> bool:
        return not self.opaque

    @property
    def commands(self) -> list[str]:
        return [p.text for p in self.parts if p.text]

    @property
    def redirects(self) -> list[Redirect]:
        return [r for p in self.parts for r in p.redirects]


_local = threading.local()


def _parser() -> Any:
    """One tree-sitter parser per thread, built on first use (keeps startup fast)."""
    parser = getattr(_local, "parser", None)
    if parser is None:
        import tree_sitter
        import tree_sitter_bash

        parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))
        _local.parser = parser
    return parser


def _text(node: Any) -> str:
    raw: bytes = node.text
    return raw.decode("utf-8", errors="surrogateescape")


def _unescape_word(raw: str) -> str | None:
    """An unquoted word's value, or None when it is not a literal (expansions, globs...)."""
    if _SAFE_WORD.fullmatch(raw):
        return raw
    out: list[str] = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == "\\":
            if i + 1 < len(raw):
                if raw[i + 1] != "\n":
                    out.append(raw[i + 1])
                i += 2
                continue
            return None
        if not _SAFE_WORD.fullmatch(ch):
            return None
        out.append(ch)
        i += 1
    return "".join(out)


def _double_quoted(node: Any) -> str | None:
    pieces: list[str] = []
    for child in node.children:
        if child.type == '"':
            continue
        if child.type != "string_content":
            return None
        value = _unescape_double(_text(child))
        if value is None:
            return None
        pieces.append(value)
    return "".join(pieces)


def _unescape_double(content: str) -> str | None:
    """Text inside "...": a backslash escapes only $ ` " \\ and newline; an unescaped $ or `
    means an expansion (None)."""
    out: list[str] = []
    i = 0
    while i < len(content):
        ch = content[i]
        if ch == "\\" and i + 1 < len(content) and content[i + 1] in '$`"\\\n':
            if content[i + 1] != "\n":
                out.append(content[i + 1])
            i += 2
            continue
        if ch in "$`":
            return None
        out.append(ch)
        i += 1
    return "".join(out)


def _ansi_c(raw: str) -> str:
    """Best-effort value of ``$'...'`` (for deny matching only; such words never count as literal)."""
    body = raw[2:-1] if raw.endswith("'") else raw[2:]
    try:
        return codecs.decode(body.encode("latin-1", "backslashreplace"), "unicode_escape")
    except (UnicodeDecodeError, ValueError):
        return body


def literal(node: Any) -> str | None:
    """The value of a word node when it is a literal, else None."""
    kind = node.type
    if kind == "word":
        return _unescape_word(_text(node))
    if kind == "number":
        return _unescape_word(_text(node))
    if kind == "raw_string":
        return _text(node)[1:-1]
    if kind == "string":
        return _double_quoted(node)
    if kind == "concatenation":
        pieces = [literal(child) for child in node.children]
        return None if any(p is None for p in pieces) else "".join(pieces)  # type: ignore[arg-type]
    return None


def _shown(node: Any) -> str:
    """A word as the policy sees it: its value when literal (quoted if needed), else its text."""
    value = literal(node)
    if value is None:
        return _ansi_c(_text(node)) if node.type == "ansi_c_string" else _text(node)
    return shlex.quote(value) if value == "" or _NEEDS_QUOTES.search(value) else value


def _why(node: Any) -> str:
    """Name the first construct in ``node`` that keeps it from being a literal."""
    if node.type in _CONSTRUCTS:
        return _CONSTRUCTS[node.type]
    for child in node.children:
        if child.type in _CONSTRUCTS:
            return _CONSTRUCTS[child.type]
    for child in node.children:
        found = _why(child)
        if found:
            return found
    return ""


class _Reader:
    def __init__(self, depth: int) -> None:
        self.parts: list[CommandPart] = []
        self.opaque: list[str] = []
        self.depth = depth

    def note(self, reason: str) -> None:
        if reason not in self.opaque:
            self.opaque.append(reason)

    # ------------------------------------------------------------------ structure

    def statement(self, node: Any, redirects: list[Redirect] | None = None) -> None:
        kind = node.type
        if kind == "comment" or not node.is_named:
            return
        if kind == "command":
            self.command(node, redirects or [])
        elif kind in _TRANSPARENT:
            own = list(redirects or [])
            if kind == "redirected_statement":
                for child in node.children:
                    if child.type in _REDIRECTS:
                        self.redirect(child, own)
            body = [c for c in node.children if c.type not in _REDIRECTS]
            owner = self._first_command(body) if own else None
            for child in body:
                self.statement(child, own if child is owner else None)
            if own and owner is None:
                self.parts.append(CommandPart(redirects=own))
        elif kind in _REDIRECTS:
            own = list(redirects or [])
            self.redirect(node, own)
            self.parts.append(CommandPart(redirects=own))
        else:
            self.note(_CONSTRUCTS.get(kind, f"shell syntax the parser reports as {kind!r}"))
            self.descend(node)

    def _first_command(self, nodes: list[Any]) -> Any:
        return next((n for n in nodes if n.is_named and n.type != "comment"), None)

    def descend(self, node: Any) -> None:
        """Collect every command below a construct that is not plain (for deny/ask rules)."""
        for child in node.children:
            if child.type == "command_substitution" and _text(child).startswith("`"):
                self.backticks(child)
            elif child.type in ("command", *_TRANSPARENT):
                self.statement(child)
            elif child.type in _REDIRECTS:
                own: list[Redirect] = []
                self.redirect(child, own)
                self.parts.append(CommandPart(redirects=own, opaque="inside " + _why(node)))
            else:
                self.descend(child)

    def backticks(self, node: Any) -> None:
        """Bash removes one level of backslashes inside `...` before running it; read it so."""
        inner = _text(node)[1:-1]
        inner = re.sub(r"\\([`$\\])", r"\1", inner)
        self.sub_line(inner)

    def sub_line(self, script: str) -> None:
        if self.depth > 8:
            self.note("commands nested too deep to read")
            return
        inner = _read(script, self.depth + 1)
        self.parts.extend(inner.parts)
        if inner.opaque:
            self.note(inner.opaque)

    # ------------------------------------------------------------------ commands

    def command(self, node: Any, redirects: list[Redirect]) -> None:
        words: list[str] = []
        reasons: list[str] = []
        name_seen = False
        for child in node.children:
            kind = child.type
            if kind in _REDIRECTS:
                self.redirect(child, redirects)
                continue
            if kind == "command_name":
                name_seen = True
                word = child.children[0] if child.children else child
                value = literal(word)
                words.append(_shown(word))
                if value is None:
                    found = _why(word) or ("a glob" if any(c in _text(word) for c in "*?[") else "a non-literal word")
                    reasons.append(f"{UNKNOWN_COMMAND} ({found} in the command name)")
                elif any(c in value for c in "*?[") or not value or any(c.isspace() for c in value):
                    reasons.append(f"{UNKNOWN_COMMAND} (a glob or odd characters in the command name)")
                elif "/" in value and _odd_path(value):
                    reasons.append(f"the command path {value!r} is not a plain path")
                self.descend(child)
                continue
            if kind == "variable_assignment":
                value = _assignment(child)
                words.append(value if value is not None else _text(child))
                if value is None:
                    reasons.append(_why(child) or "a non-literal variable assignment")
                self.descend(child)
                continue
            if not child.is_named:
                reasons.append(f"the token {_text(child)!r}, which the parser does not read as a word")
                continue
            value = literal(child)
            words.append(_shown(child))
            if value is None:
                reasons.append(_why(child) or f"the word {_text(child)!r} is not a literal")
                if child.type == "command_substitution" and _text(child).startswith("`"):
                    self.backticks(child)
                else:
                    self.descend(child)
        if not name_seen:
            reasons.append("a command without a command name")
        elif words and words[0] in _REEVALUATING and any("$" in w or "`" in w for w in words[1:]):
            reasons.append(f"{words[0]} with '$' or '`' in an argument (it expands them again)")
            self.reevaluated(node)
        unknown = self.inline_script(node)
        if unknown:
            reasons.insert(0, unknown)
        part = CommandPart(words=words, redirects=redirects, opaque="; ".join(dict.fromkeys(reasons)))
        self.parts.append(part)
        if part.opaque:
            self.note(part.opaque)

    def reevaluated(self, node: Any) -> None:
        """Read the substitutions a re-evaluating builtin would run (``let 'a[$(cmd)]'``), so
        deny and ask rules see ``cmd``."""
        for child in node.children:
            value = literal(child) if child.is_named and child.type != "command_name" else None
            if value and ("$(" in value or "`" in value):
                self.sub_line(value)

    def inline_script(self, node: Any) -> str | None:
        """``bash -c 'a; b'`` and ``eval 'a; b'`` run their string as commands: read it too.
        Returns a reason when that string is not a literal (its commands are unknowable)."""
        values = [
            literal(c.children[0] if c.type == "command_name" and c.children else c)
            for c in node.children
            if c.is_named and c.type not in _REDIRECTS
        ]
        if not values:
            return None
        for index, value in enumerate(values):
            if value is not None and posixpath.basename(value) in SHELLS and "-c" in values[index + 1 :]:
                at = values.index("-c", index + 1)
                if at + 1 < len(values) and values[at + 1] is None:
                    return f"{UNKNOWN_COMMAND} (a {value} -c script that is not a literal)"
                script = values[at + 1] if at + 1 < len(values) else None
                if script:
                    self.sub_line(script)
                return None
        if values[0] == "eval":
            if any(v is None for v in values[1:]):
                return f"{UNKNOWN_COMMAND} (an eval string that is not a literal)"
            self.sub_line(" ".join(v for v in values[1:] if v is not None))
        return None

    # ------------------------------------------------------------------ redirects

    def redirect(self, node: Any, into: list[Redirect]) -> None:
        kind = node.type
        if kind == "heredoc_redirect":
            for child in node.children:
                if child.type == "heredoc_body" and any(c.type != "heredoc_content" for c in child.named_children):
                    self.note("a here-document with expansions")
                    self.descend(child)
                elif child.type in _REDIRECTS:
                    self.redirect(child, into)
            return
        if kind == "herestring_redirect":
            target = node.named_children[-1] if node.named_children else None
            if target is not None and literal(target) is None:
                self.note(_why(target) or "a non-literal here-string")
                self.descend(target)
            return
        ops = [c for c in node.children if not c.is_named]
        op = _text(ops[0]) if ops else ""
        targets = [c for c in node.named_children if c.type != "file_descriptor"]
        if op == ">&-" or op == "<&-" or not targets:
            return
        target = targets[-1]
        value = literal(target)
        if op in (">&", "<&") and value is not None and (value.isdigit() or value == "-"):
            return
        if value is None:
            self.note(f"{_why(target) or 'a non-literal word'} in a redirect target")
            self.descend(target)
            value = _text(target)
        if op in _WRITE_OPS or op in _READ_OPS:
            into.append(Redirect(value, write=op in _WRITE_OPS, append=op in (">>", "&>>")))
        else:
            self.note(f"the redirect {op!r}")


def _odd_path(value: str) -> bool:
    """A command path with ``..``, ``.`` (other than a leading ``./``) or ``//`` in it."""
    body = value[2:] if value.startswith("./") else value
    return any(p in ("", ".", "..") for p in body.lstrip("/").split("/")) or "//" in value


def _assignment(node: Any) -> str | None:
    names = [c for c in node.named_children]
    if not names or names[0].type != "variable_name":
        return None
    values = names[1:]
    if not values:
        return _text(names[0]) + "="
    value = literal(values[0]) if len(values) == 1 else None
    return None if value is None else f"{_text(names[0])}={_shown(values[0]) if value else ''}"


def _read(command: str, depth: int) -> SplitCommand:
    tree = _parser().parse(command.encode("utf-8", errors="surrogateescape"))
    reader = _Reader(depth)
    root = tree.root_node
    if _CONTROL.search(command):
        reader.note("control characters (such as a carriage return) that bash and the parser may read differently")
    if root.has_error:
        reader.note("shell syntax the parser cannot read (unbalanced quotes or brackets?)")
    reader.statement(root)
    return SplitCommand(reader.parts, "; ".join(reader.opaque))


def split_command(command: str) -> SplitCommand:
    """The parts of ``command``; ``opaque`` says why it cannot be allowed by a rule, if so."""
    return _read(command, 0)


def background_jobs(command: str) -> list[str]:
    """The commands ``command`` sends to the background with ``&`` (``npm run dev &``, ``(sleep 9
    &)``), none when it also ``wait``s for them: what is still running when a foreground command
    ends is stopped then, which a model that wrote ``&`` does not expect."""
    jobs: list[str] = []
    waits = False
    pending = [_parser().parse(command.encode("utf-8", "surrogateescape")).root_node]
    while pending:
        node = pending.pop()
        if node.type == "&" and node.prev_named_sibling is not None:
            jobs.append(_text(node.prev_named_sibling))
        elif node.type == "command_name" and _text(node) == "wait":
            waits = True
        pending.extend(reversed(node.children))
    return [] if waits else jobs


def shell_subjects(tool: str, command: str, workdir: str = "") -> list[PolicySubject]:
    """What policy checks for one shell command line: every part as a command subject, every
    redirect as a path subject (relative to ``workdir``), and, when the line is not fully
    understood, the whole line as one opaque subject that no rule can allow."""
    split = split_command(command)
    subjects = [
        PolicySubject(tool=tool, value=part.text, kind="command", writes=True, opaque=part.opaque)
        for part in split.parts
        if part.text
    ]
    for redirect in split.redirects:
        target = redirect.target
        if workdir and not target.startswith(("/", "~", "$")):
            target = posixpath.normpath(posixpath.join(workdir, target))
        subjects.append(PolicySubject(tool=tool, value=target, kind="path", writes=redirect.write))
    if split.opaque or not subjects:
        whole = PolicySubject(
            tool=tool, value=command.strip(), kind="command", writes=True, opaque=split.opaque or "an empty command"
        )
        subjects.insert(0, whole)
    return subjects


#: Commands that never change a file, whatever their arguments (no output option, no subcommand
#: that writes): a shell line made only of these, with no redirect into a file, changes nothing.
_PURE_COMMANDS = frozenset(
    [
        "echo",
        "printf",
        "true",
        "false",
        ":",
        "pwd",
        "ls",
        "cat",
        "head",
        "tail",
        "wc",
        "grep",
        "egrep",
        "fgrep",
        "rg",
        "which",
        "type",
        "date",
        "sleep",
        "test",
        "[",
        "whoami",
        "id",
        "uname",
        "basename",
        "dirname",
        "realpath",
        "readlink",
        "stat",
        "du",
        "df",
        "diff",
        "cmp",
        "nproc",
        "printenv",
    ]
)
#: git subcommands that only read.
_PURE_GIT = frozenset(["status", "log", "diff", "show", "rev-parse", "ls-files", "blame", "describe", "shortlog"])
#: Options that make an otherwise pure command run another program or write a file.
_IMPURE_OPTIONS = {"rg": ("--pre",), "git": ("--output", "--ext-diff", "--textconv")}


def changes_nothing(command: str) -> bool:
    """Whether a shell line certainly changes no file: fully understood, every part a pure
    command (``_PURE_COMMANDS``, or git with a reading subcommand), every redirect a read or
    ``/dev/null``. In doubt, False: a rewind then names it as not restorable."""
    split = split_command(command)
    if not split.understood or not split.parts:
        return False
    for part in split.parts:
        words = part.words
        if not words:
            return False
        name = words[0].rsplit("/", 1)[-1]
        if any(w.startswith(_IMPURE_OPTIONS.get(name, ())) for w in words[1:]):
            return False
        if name == "git":
            if len(words) < 2 or words[1] not in _PURE_GIT:
                return False
        elif name not in _PURE_COMMANDS:
            return False
    return all(not r.write or r.target == "/dev/null" for r in split.redirects)
