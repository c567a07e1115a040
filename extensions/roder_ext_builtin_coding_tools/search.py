"""``grep``, ``glob`` and ``ls``: finding things in the workspace, respecting .gitignore.

grep runs ripgrep through the process broker when it is installed and the extension may spawn
processes (as a read-only command: under the sandbox the workspace is then read-only to it, and
the tree is not walked before and after it as for a command that may write), and a Python
search over the broker's file walk otherwise. glob asks the file broker
(``find_files``: ripgrep's walker from the pattern's literal folder). All three skip ignored
files and ``.git``, cap their results in total and say what they left out.

grep's results are numbered in path order, so a long result can be paged with ``offset``;
ripgrep's output goes through ``awk``, which prints only the requested page and counts the
rest, so the command's output stays small whatever the number of matches. Counting stops at
``COUNT_CAP`` lines past the page (the text then says "at least").

What a listing may show is decided in one place, the file broker's ``find_files`` and ``walk``
(ignore rules, Roder's own folders); ``ls`` goes through ``list_dir``.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Iterator
from pathlib import PurePath
from typing import Any

from pydantic import Field

from roder_core.brokers import BrokerDenied, FileInfo, FileSystemBroker
from roder_core.brokers.file_glob import ripgrep_query
from roder_core.kernel.tool_args import NonBlank, PathText, ToolArguments, parse_arguments
from roder_core.kernel.tools import PolicySubject, ToolCall, ToolExecutionContext, ToolKind, ToolResult

from .backtracking import explosive
from .common import BuiltinTool, ToolInputError, looks_binary, path_subject
from .grep_readings import needs_pcre, other_readings

MAX_MATCHES = 200
MAX_LINE_CHARS = 400
#: A page of grep results stays under the process broker's 50 KB output limit.
MAX_PAGE_BYTES = 45_000
#: How many matching lines past the page grep counts before saying "at least".
COUNT_CAP = 100_000
#: A glob grep cannot hand to ripgrep as a folder and a file name is resolved to a file list
#: first; at most this many files.
MAX_GLOB_FILES = 5_000
MAX_FILES = 500
MAX_ENTRIES = 500
MAX_SCAN_BYTES = 2_000_000
RG_TIMEOUT = 60.0
#: Files with matches the content gate may sift on one ripgrep command line; past it, the Python
#: search (which asks the gate file by file as it walks) runs instead.
MAX_GATED_FILES = 20_000
#: What every ripgrep run of grep shares: ignore rules as git applies them, path order, no colours.
RG_BASE = (
    "rg",
    "--no-config",
    "--line-number",
    "--no-heading",
    "--with-filename",
    "--color=never",
    "--hidden",
    "--no-require-git",
    "--no-ignore-dot",
    "--no-ignore-global",
    "--no-messages",
    "--sort=path",
    "--glob=!.git",
    f"--max-columns={MAX_LINE_CHARS}",
    "--max-columns-preview",
)
#: Starts the count line awk prints after the page (a control character no path begins with).
_COUNT_MARK = "\x1eroder-grep-count "


class GrepArguments(ToolArguments):
    habit_names = {"include": "glob", "-i": "case_insensitive", "ignore_case": "case_insensitive"}
    pattern: NonBlank = Field(description="regular expression to search for")
    path: PathText | None = Field(None, description="folder or file to search (default: the workspace)")
    glob: str | None = Field(None, description="only search files matching this glob")
    case_insensitive: bool = Field(False, description="ignore case (default false)")
    offset: int = Field(0, ge=0, description="skip this many matching lines, to page through a long result (default 0)")


class GlobArguments(ToolArguments):
    pattern: NonBlank = Field(description="glob pattern, e.g. '**/*.py' or 'test_*.py'")
    path: PathText | None = Field(None, description="folder to search (default: the workspace)")


class LsArguments(ToolArguments):
    path: PathText | None = Field(None, description="folder to list (default: the workspace)")


class _SearchTool(BuiltinTool):
    kind: ToolKind = "search"
    read_only = True

    def policy_subjects(self, arguments: dict[str, Any], workspace: PurePath) -> list[PolicySubject]:
        return [path_subject(self.name, str(arguments.get("path") or "."), writes=False)]


_LINE_NUMBER = re.compile(r":\d+:")


def _files_of(lines: list[str], fs: FileSystemBroker) -> set[str]:
    """The files ripgrep's ``path:line:text`` lines name (a name holding ``:12:`` is told apart
    by which prefix exists)."""
    files: set[str] = set()
    for line in lines:
        for mark in _LINE_NUMBER.finditer(line):
            if fs.exists(line[: mark.start()]):
                files.add(line[: mark.start()])
                break
    return files


class _Page:
    """One page of grep's matching lines and what is known of the rest."""

    def __init__(self, lines: list[str], total: int, complete: bool) -> None:
        self.lines = lines
        self.total = total
        #: False when counting stopped at ``COUNT_CAP``: ``total`` is a lower bound.
        self.complete = complete


_GLOB_CHARS = frozenset("*?[{")


def split_glob_path(fs: FileSystemBroker, value: str) -> tuple[str, str]:
    """A path with glob characters, or an absolute or ``~`` glob, as (".", the glob relative to
    the workspace): its literal leading folders are resolved (refused outside the workspace) and
    shown relative to the workspace, so ``/abs/ws/src/*.py`` and ``src/*.py`` match the same
    files, at the same depth."""
    parts = value.split("/")
    cut = next((i for i, part in enumerate(parts) if _GLOB_CHARS.intersection(part)), len(parts))
    folder = "/".join(parts[:cut]) or ("/" if value.startswith("/") else ".")
    shown = fs.display(fs.resolve(folder))
    rest = "/".join(parts[cut:])
    return ".", rest if shown == "." else f"{shown}/{rest}"


def _absolute(pattern: str) -> bool:
    return pattern.startswith(("/", "~"))


class BadPatternError(ToolInputError):
    """The pattern is not a valid regular expression (the message is the engine's reason)."""


#: A character class (``[^\n]`` matches within a line: it is no line break).
_CHARACTER_CLASS = re.compile(r"\[(?:\\.|[^\]\\])*\]")
#: ``\n`` written as a regular-expression escape (an odd number of backslashes before ``n``).
_NEWLINE_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\n")
#: Characters that make a pattern mean something else as a regular expression than as text.
_REGEX_SPECIAL = frozenset("\\.^$*+?()[]{}|")


class GrepTool(_SearchTool):
    name = "grep"
    description = (
        "Search file contents with a regular expression (ripgrep syntax). Returns path:line:text for up "
        f"to {MAX_MATCHES} matching lines in all, in path order, skipping .gitignored files and .git; says "
        "how many more there are, and offset pages through them. Optional: path (folder or file to search, "
        "default the workspace), glob (only files matching it, relative to path, e.g. '*.py' or "
        "'src/**/*.ts'), case_insensitive, offset."
    )
    arguments_model = GrepArguments

    async def run(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        """A pattern that is not a valid regular expression, or that has regular-expression
        characters and matches nothing, is searched for as literal text (models often mean
        ``foo(bar)`` or ``a.b[0]`` as written); the result's first line says so."""
        args = parse_arguments(GrepArguments, call)
        fs = ctx.brokers.fs
        head = ""
        if args.glob and _absolute(args.glob):
            path, glob = split_glob_path(fs, args.glob)
            args = args.model_copy(update={"path": path, "glob": glob})
        elif args.path and not fs.exists(args.path):
            if not _GLOB_CHARS.intersection(args.path) or args.glob:
                raise FileNotFoundError(f"{args.path}: no such file or folder")
            path, glob = split_glob_path(fs, args.path)
            head = f"(path {args.path!r} is a glob: searched the files matching {glob!r})\n"
            args = args.model_copy(update={"path": path, "glob": glob})
        if "\n" in args.pattern or _NEWLINE_ESCAPE.search(_CHARACTER_CLASS.sub("", args.pattern)):
            first = next((part for part in re.split(r"\n|\\n", args.pattern) if part.strip()), "")
            raise ToolInputError(
                "grep matches one line at a time, so a pattern with a line break (\\n) never matches; search for "
                f"one line of it ({first.strip()!r}) and read the lines around the match"
            )
        shown = fs.display(fs.resolve(args.path or "."))
        withheld: list[str] = []
        literal = False
        try:
            page, engine = await self._search(ctx, args, shown, withheld, literal=False)
            if not page.total:
                page, engine, said = await self._other_reading(ctx, args, shown, withheld, (page, engine))
                head += said
            if not page.total and _REGEX_SPECIAL.intersection(args.pattern):
                withheld.clear()
                as_text, engine_text = await self._search(ctx, args, shown, withheld, literal=True)
                if as_text.total:
                    page, engine, literal = as_text, engine_text, True
                    head += f"no matches for the regular expression {args.pattern!r}; as literal text it matches:\n"
        except BadPatternError as exc:
            withheld.clear()
            page, engine = await self._search(ctx, args, shown, withheld, literal=True)
            literal = True
            head += f"{args.pattern!r} is not a valid regular expression ({exc}); searched for it as literal text:\n"
        lines = [_cut(line) for line in page.lines]
        if lines:
            text = "\n".join(lines) + _page_notice(page, args.offset, len(lines))
        elif page.total:
            text = f"no matching lines past offset {args.offset}; there are {_count(page)} in all (offsets 0-{page.total - 1})"
        else:
            text = f"no matches for {args.pattern!r} in {shown}" + (f" (files matching {args.glob!r})" if args.glob else "")
        text = head + text
        text += withheld_note(withheld)
        return ToolResult(
            id=call.id,
            name=call.name,
            text=text,
            data={
                "matches": page.total,
                "complete": page.complete,
                "offset": args.offset,
                "shown": len(lines),
                "engine": engine,
                "literal": literal,
                "withheld": len(set(withheld)),
            },
        )

    async def _other_reading(
        self, ctx: ToolExecutionContext, args: GrepArguments, shown: str, withheld: list[str], found: tuple[_Page, str]
    ) -> tuple[_Page, str, str]:
        """The first of the pattern's other readings (``grep_readings``) that matches, with the
        line saying so; ``found`` (nothing) when none does."""
        as_written = list(withheld)
        for reading in other_readings(args.pattern, args.case_insensitive):
            other = args.model_copy(update={"pattern": reading.pattern, "case_insensitive": reading.case_insensitive})
            withheld.clear()
            try:
                page, engine = await self._search(ctx, other, shown, withheld, literal=False)
            except ToolInputError:
                continue
            if page.total:
                return page, engine, f"no matches for {args.pattern!r} as written; {reading.said}, it matches:\n"
        withheld[:] = as_written  # what the search as written withheld is still said
        return *found, ""

    async def _search(
        self, ctx: ToolExecutionContext, args: GrepArguments, shown: str, withheld: list[str], *, literal: bool
    ) -> tuple[_Page, str]:
        """One page of matches and the engine that found them: ripgrep, else Python."""
        try:
            page = await self._ripgrep(ctx, args, shown, withheld, literal)
        except BrokerDenied:
            page = None
        if page is not None:
            return page, "ripgrep"
        withheld.clear()
        return self._python(ctx.brokers.fs, shown, args, withheld, literal), "python"

    def _targets(self, fs: FileSystemBroker, base: str, args: GrepArguments, withheld: list[str]) -> tuple[list[str], list[str]]:
        """What ripgrep searches (absolute paths: ripgrep 13 drops anchored rules of ignore files
        above a relative folder) and the options that narrow it to ``glob``. A glob ripgrep cannot
        take as a folder, a depth and a file-name type (its ``--glob`` would override the ignore
        rules) becomes the list of files ``find_files`` matches. ``base`` is the folder as shown."""
        root = fs.resolve(base)
        kind = fs.stat(base).kind
        if kind not in ("dir", "file"):
            # ripgrep reads a file it is named whatever it is: a FIFO waits for a writer, a
            # device (/dev/zero) never ends; read refuses them, and so does grep
            raise ToolInputError(f"{base}: not a regular file (device, socket or pipe); grep searches files and folders")
        if not args.glob or kind != "dir":
            return [str(root)], []
        query = ripgrep_query(args.glob)
        if query.exact and query.name is not None:
            if query.literal and not _folders_listed(fs, base, query.literal):
                return [], []
            options = [f"--type-add=roderglob:{query.name}", "--type=roderglob"]
            if query.max_depth is not None:
                options.append(f"--max-depth={query.max_depth}")
            return [str(PurePath(root, query.literal))], options
        infos, total = fs.find_files(base, args.glob, limit=MAX_GLOB_FILES, withheld=withheld)
        if total > MAX_GLOB_FILES:
            raise ToolInputError(
                f"the glob {args.glob!r} matches {total} files, more than the {MAX_GLOB_FILES} grep takes as a list; "
                "use a glob of a folder and a file name ('src/**/*.ts', '*.py') or a narrower path"
            )
        return [str(info.path) for info in sorted(infos, key=lambda i: i.display.split("/"))], []

    async def _ripgrep(
        self,
        ctx: ToolExecutionContext,
        args: GrepArguments,
        base: str,
        withheld: list[str],
        literal: bool,
        *,
        gated: bool = False,
    ) -> _Page | None:
        process, fs = ctx.brokers.process, ctx.brokers.fs
        if process.which("rg") is None or process.which("awk") is None:
            return None
        targets, options = self._targets(fs, base, args, withheld)
        if not targets:
            return _Page([], 0, True)
        gated = gated or fs.may_withhold()
        if gated:
            # The content gate decides per file: the files with matches are asked first, and the
            # page is then cut from the ones it lets through (counts stay true).
            allowed = await self._gated_files(ctx, args, targets, options, withheld, literal)
            if allowed is None:
                return None  # too many files for one command line: the Python search gates as it goes
            if not allowed:
                return _Page([], 0, True)
            targets, options = allowed, [o for o in options if not o.startswith(("--type", "--max-depth"))]
        argv = [*RG_BASE, *options, *_rg_pattern(args, literal), "--", *targets]
        stop = args.offset + MAX_MATCHES + COUNT_CAP
        page = (
            f"NR > {args.offset} && n < {MAX_MATCHES} && size + length($0) < {MAX_PAGE_BYTES} "
            "{ print; n++; size += length($0) + 1 } "
            f"NR >= {stop} {{ exit }} "
            f'END {{ printf "{_COUNT_MARK}%d %d\\n", NR, (NR >= {stop}) }}'
        )
        command = f"{shlex.join(argv)} | LC_ALL=C awk {shlex.quote(page)}"
        result = await process.run(command, cwd=ctx.workspace, timeout=RG_TIMEOUT, separate_stderr=True, read_only=True)
        if result.timed_out:
            raise ToolInputError(f"the search took longer than {RG_TIMEOUT:.0f} s; narrow the path or glob")
        body, _, count = result.output.rstrip("\n").rpartition(_COUNT_MARK)
        total, stopped = (int(field) for field in count.split()) if count else (0, 0)
        if not count or (total == 0 and result.stderr.strip()):  # a bad pattern: rg says why on stderr
            if _without_pcre2(result.stderr or result.output):
                return None
            raise _rg_failure(result.stderr.strip() or result.output.strip())
        prefix = str(fs.resolve(".")).rstrip("/") + "/"
        lines = [line.removeprefix(prefix) for line in body.splitlines() if line]
        if not gated and any(fs.withheld(path) is not None for path in _files_of(lines, fs)):
            # nothing was to be refused by rule, yet a file on this page is (a hard link whose
            # other names may lie outside): search again, asking the content gate file by file
            withheld.clear()
            return await self._ripgrep(ctx, args, base, withheld, literal, gated=True)
        return _Page(lines, total, not stopped)

    async def _gated_files(
        self,
        ctx: ToolExecutionContext,
        args: GrepArguments,
        targets: list[str],
        options: list[str],
        withheld: list[str],
        literal: bool,
    ) -> list[str] | None:
        """The files with matches that the content gate lets through (the refused ones named in
        ``withheld``); None when they are too many to pass on one command line."""
        argv = [*RG_BASE, *options, "--files-with-matches", "--null", *_rg_pattern(args, literal), "--", *targets]
        result = await ctx.brokers.process.run(argv, cwd=ctx.workspace, timeout=RG_TIMEOUT, separate_stderr=True, read_only=True)
        if result.timed_out:
            raise ToolInputError(f"the search took longer than {RG_TIMEOUT:.0f} s; narrow the path or glob")
        files = [name for name in result.output.split("\0") if name.strip()]
        if not files and result.stderr.strip():
            if _without_pcre2(result.stderr):
                return None
            raise _rg_failure(result.stderr.strip())
        if result.truncated or len(files) > MAX_GATED_FILES:
            return None
        fs = ctx.brokers.fs
        prefix = str(fs.resolve(".")).rstrip("/") + "/"
        allowed = []
        for name in files:
            shown = name.strip("\n").removeprefix(prefix)
            if fs.withheld(shown) is not None:
                withheld.append(shown)
            else:
                allowed.append(name.strip("\n"))
        return allowed

    def _python(self, fs: FileSystemBroker, path: str, args: GrepArguments, withheld: list[str], literal: bool) -> _Page:
        pattern = re.escape(args.pattern) if literal else args.pattern
        flags = re.IGNORECASE if args.case_insensitive else 0
        try:
            regex = re.compile(pattern, flags)
        except re.error as exc:
            raise BadPatternError(str(exc)) from None
        why = explosive(pattern, flags)
        if why is not None:
            raise ToolInputError(
                f"the pattern {args.pattern!r} can take exponential time without ripgrep (not available here), as {why}; "
                "write it without the nested repeat or overlapping alternatives (a+ for (a+)+, a|b for (a|ab)*)"
            )
        stop = args.offset + MAX_MATCHES + COUNT_CAP
        lines: list[str] = []
        size = total = 0
        for info in self._python_files(fs, path, args.glob, withheld):
            for match in _matching_lines(fs, info, regex):
                total += 1
                if total > args.offset and len(lines) < MAX_MATCHES and size + len(match) < MAX_PAGE_BYTES:
                    lines.append(match)
                    size += len(match) + 1
                if total >= stop:
                    return _Page(lines, total, False)
        return _Page(lines, total, True)

    def _python_files(self, fs: FileSystemBroker, path: str, file_glob: str | None, withheld: list[str]) -> Iterator[FileInfo]:
        if not file_glob:
            yield from fs.walk(path, withheld=withheld)
            return
        infos, _total = fs.find_files(path, file_glob, limit=2**31, withheld=withheld)
        yield from sorted(infos, key=lambda info: info.display.split("/"))


def _rg_failure(why: str) -> ToolInputError:
    """What ripgrep's complaint means: a bad pattern (then searched as text), or a plain failure."""
    if "regex" in why:
        return BadPatternError(why.splitlines()[-1].removeprefix("error: "))
    return ToolInputError(why or "ripgrep failed")


def _without_pcre2(why: str) -> bool:
    """ripgrep was built without PCRE2: Python's engine searches look-around instead."""
    return "PCRE2 is not available" in why


def _rg_pattern(args: GrepArguments, literal: bool) -> list[str]:
    """ripgrep's options for the pattern: as a regular expression (PCRE2 for look-around and
    backreferences, which ripgrep's own engine refuses), or as literal text."""
    return [
        *(["--ignore-case"] if args.case_insensitive else []),
        *(["--fixed-strings"] if literal else ["--pcre2"] if needs_pcre(args.pattern) else []),
        "--regexp",
        args.pattern,
    ]


def _folders_listed(fs: FileSystemBroker, base: str, literal: str) -> bool:
    """Whether each folder of ``literal`` below ``base`` is listed there: it exists, is a real
    folder (not a symlink) and no ignore rule leaves it out."""
    here = base
    for part in literal.split("/"):
        if not any(info.kind == "dir" and info.path.name == part for info in fs.list_dir(here)):
            return False
        here = part if here == "." else f"{here}/{part}"
    return True


def _matching_lines(fs: FileSystemBroker, info: FileInfo, regex: re.Pattern[str]) -> Iterator[str]:
    if info.kind != "file" or info.size > MAX_SCAN_BYTES:
        return
    try:
        data = fs.read_bytes(info.display)
    except (BrokerDenied, OSError):
        return
    if looks_binary(data):
        return
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
        if regex.search(line):
            yield f"{info.display}:{number}:{line}"


def _count(page: _Page) -> str:
    return f"{page.total}" if page.complete else f"at least {page.total}"


def _page_notice(page: _Page, offset: int, shown: int) -> str:
    """What the page leaves out, in numbers, and how to get the rest; empty when it is all."""
    after = offset + shown
    where = f"lines {offset + 1}-{after} of {_count(page)} shown"
    if page.complete and after >= page.total:
        return "" if offset == 0 else f"\n\n[{where}; this is the last page]"
    rest = f"{page.total - after}" if page.complete else f"at least {page.total - after}"
    return (
        f"\n\n[{rest} more matching lines not shown ({where}); to see them call grep again with "
        f"offset={after}, or narrow the pattern, path or glob]"
    )


def _cut(line: str) -> str:
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " [...]"


class GlobTool(_SearchTool):
    name = "glob"
    description = (
        "Find files by name pattern, newest first. '*' matches within a folder, '**' across folders; a "
        "pattern without '/' matches file names at any depth ('*.py'), one with '/' is relative to path "
        f"('src/**/*.ts'). Skips .gitignored files and .git; at most {MAX_FILES} results."
    )
    arguments_model = GlobArguments

    async def run(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        args = parse_arguments(GlobArguments, call)
        fs = ctx.brokers.fs
        if _absolute(args.pattern):
            path, pattern = split_glob_path(fs, args.pattern)
            args = args.model_copy(update={"path": path, "pattern": pattern})
        base = fs.display(fs.resolve(args.path or "."))
        withheld: list[str] = []
        found, total = fs.find_files(args.path or ".", args.pattern, limit=MAX_FILES, withheld=withheld)
        head = ""
        folder = None if found else _folder_named(fs, args.path or ".", args.pattern)
        if folder is not None:  # "src": the model means the files in it, as ls -R would list them
            inside = "**" if folder == "." else f"{folder}/**"
            found, total = fs.find_files(args.path or ".", inside, limit=MAX_FILES, withheld=withheld)
            head = f"({args.pattern!r} names a folder, not files; the files in it ({inside!r}):)\n"
        if not found:
            text = f"no files match {args.pattern!r} in {base}"
        else:
            text = "\n".join(info.display for info in found)
            if total > MAX_FILES:
                text += f"\n\n[{total - MAX_FILES} more files not shown; narrow the pattern]"
        text = head + text + withheld_note(withheld)
        return ToolResult(id=call.id, name=call.name, text=text, data={"count": total})


def _folder_named(fs: FileSystemBroker, base: str, pattern: str) -> str | None:
    """The folder below ``base`` that a glob without glob characters names (``src``, ``src/``,
    ``.``), as the pattern of its files should start; None when it names none."""
    name = pattern.strip().rstrip("/").removeprefix("./") or "."
    if _GLOB_CHARS.intersection(name) or name.startswith("!"):
        return None
    try:
        is_folder = fs.stat(posixpath.join(base, name)).kind == "dir"
    except (BrokerDenied, OSError):
        return None
    return name if is_folder else None


class LsTool(_SearchTool):
    name = "ls"
    kind = "read"
    description = (
        "List a folder (default: the workspace root): folders first with a trailing '/', then files with "
        f"their sizes. .gitignored entries and .git are left out; at most {MAX_ENTRIES} entries."
    )
    arguments_model = LsArguments

    async def run(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        path = parse_arguments(LsArguments, call).path or "."
        fs = ctx.brokers.fs
        withheld: list[str] = []
        entries = fs.list_dir(path, withheld=withheld)
        lines = []
        for info in entries[:MAX_ENTRIES]:
            name = info.path.name
            if info.kind == "dir":
                lines.append(f"{name}/")
            elif info.kind == "symlink":
                lines.append(f"{name}@ (symlink)")
            else:
                lines.append(f"{name}  ({_size(info.size)})")
        folder = fs.display(fs.resolve(path))
        if not lines:
            text = f"{folder} is empty (or holds only ignored files)"
        else:
            text = f"{folder}:\n" + "\n".join(lines)
            if len(entries) > MAX_ENTRIES:
                text += f"\n\n[{len(entries) - MAX_ENTRIES} more entries not shown; use glob to narrow down]"
        text += withheld_note(withheld)
        return ToolResult(id=call.id, name=call.name, text=text, data={"count": len(entries)})


def _size(size: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024  # type: ignore[assignment]
    return f"{size} B"


def withheld_note(withheld: list[str]) -> str:
    """Say that files were left out by the content gate (read rules, secret masks), so the
    model never takes a withheld file for a missing one."""
    count = len(set(withheld))
    if not count:
        return ""
    files = "file was" if count == 1 else "files were"
    return f"\n\n[{count} {files} left out: withheld from the model by read rules or secret masks]"
