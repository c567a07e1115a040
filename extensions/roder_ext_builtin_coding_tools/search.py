"""``grep``, ``glob`` and ``ls``: finding things in the workspace, respecting .gitignore.

grep runs ripgrep through the process broker when it is installed and the extension may spawn
processes, and a Python search over the broker's file walk otherwise; both skip ignored files and
``.git`` and cap their results.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any

from pydantic import Field

from roder_core.brokers import BrokerDenied, FileInfo, FileSystemBroker
from roder_core.brokers.gitignore import glob_to_regex
from roder_core.kernel.tool_args import NonBlank, ToolArguments, parse_arguments
from roder_core.kernel.tools import PolicySubject, ToolCall, ToolExecutionContext, ToolKind, ToolResult

from .common import BuiltinTool, ToolInputError, looks_binary, path_subject

MAX_MATCHES = 200
MAX_LINE_CHARS = 400
MAX_FILES = 500
MAX_ENTRIES = 500
MAX_SCAN_BYTES = 2_000_000
RG_TIMEOUT = 60.0


def name_glob(pattern: str) -> re.Pattern[str]:
    """A gitignore-style glob: without ``/`` it matches a name at any depth, ``**`` spans folders."""
    body = pattern.strip().removeprefix("./")
    head = "^" if "/" in body else "^(?:.*/)?"
    return re.compile(head + glob_to_regex(body) + "$", re.DOTALL)


class GrepArguments(ToolArguments):
    pattern: NonBlank = Field(description="regular expression to search for")
    path: str | None = Field(None, description="folder or file to search (default: the workspace)")
    glob: str | None = Field(None, description="only search files matching this glob")
    case_insensitive: bool = Field(False, description="ignore case (default false)")


class GlobArguments(ToolArguments):
    pattern: NonBlank = Field(description="glob pattern, e.g. '**/*.py' or 'test_*.py'")
    path: str | None = Field(None, description="folder to search (default: the workspace)")


class LsArguments(ToolArguments):
    path: str | None = Field(None, description="folder to list (default: the workspace)")


class _SearchTool(BuiltinTool):
    kind: ToolKind = "search"
    read_only = True

    def policy_subjects(self, arguments: dict[str, Any], workspace: PurePath) -> list[PolicySubject]:
        return [path_subject(self.name, str(arguments.get("path") or "."), writes=False)]


class GrepTool(_SearchTool):
    name = "grep"
    description = (
        "Search file contents with a regular expression (ripgrep syntax). Returns path:line:text for up "
        f"to {MAX_MATCHES} matching lines, skipping .gitignored files and .git. Optional: path (folder or "
        "file to search, default the workspace), glob (only files matching it, e.g. '*.py' or 'src/**/*.ts'), "
        "case_insensitive."
    )
    arguments_model = GrepArguments

    async def run(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        args = parse_arguments(GrepArguments, call)
        pattern, path, file_glob, ignore_case = args.pattern, args.path or ".", args.glob or "", args.case_insensitive
        fs = ctx.brokers.fs
        root = fs.resolve(path)
        shown = fs.display(root)
        engine = "ripgrep"
        withheld: list[str] = []
        try:
            lines = await self._ripgrep(ctx, pattern, shown, file_glob, ignore_case, withheld)
        except BrokerDenied:
            lines = None
        if lines is None:
            engine = "python"
            lines = self._python(fs, path, pattern, file_glob, ignore_case, withheld)
        more = len(lines) - MAX_MATCHES
        shown_lines = [_cut(line) for line in lines[:MAX_MATCHES]]
        if not shown_lines:
            text = f"no matches for {pattern!r} in {shown}"
        else:
            text = "\n".join(shown_lines)
            if more > 0:
                text += f"\n\n[{more} more matching lines not shown; narrow the pattern, path or glob]"
        text += withheld_note(withheld)
        return ToolResult(
            id=call.id,
            name=call.name,
            text=text,
            data={"matches": len(lines), "shown": len(shown_lines), "engine": engine, "withheld": len(set(withheld))},
        )

    async def _ripgrep(
        self, ctx: ToolExecutionContext, pattern: str, target: str, file_glob: str, ignore_case: bool, withheld: list[str]
    ) -> list[str] | None:
        process = ctx.brokers.process
        if process.which("rg") is None:
            return None
        argv = [
            "rg",
            "--line-number",
            "--no-heading",
            "--with-filename",
            "--null",
            "--color=never",
            "--hidden",
            "--no-require-git",
            "--sort=path",
            "--glob=!.git",
            f"--max-columns={MAX_LINE_CHARS}",
            "--max-columns-preview",
            f"--max-count={MAX_MATCHES}",
        ]
        if ignore_case:
            argv.append("--ignore-case")
        if file_glob:
            argv.append(f"--glob={file_glob}")
        argv += ["--regexp", pattern, "--", target]
        result = await process.run(argv, cwd=ctx.workspace, timeout=RG_TIMEOUT)
        if result.exit_code == 1 and not result.output.strip():
            return []
        if result.exit_code not in (0, 1):
            message = result.output.strip() or f"ripgrep failed (exit code {result.exit_code})"
            if result.timed_out:
                message = f"the search took longer than {RG_TIMEOUT:.0f} s; narrow the path or glob"
            raise ToolInputError(message)
        found: list[str] = []
        for line in result.output.splitlines():
            name, nul, rest = line.partition("\0")
            if not nul:  # not a match line (a note of the broker's)
                continue
            name = name.removeprefix("./")
            if ctx.brokers.fs.withheld(name) is not None:
                withheld.append(name)
                continue
            found.append(f"{name}:{rest}")
        return found

    def _python(
        self, fs: FileSystemBroker, path: str, pattern: str, file_glob: str, ignore_case: bool, withheld: list[str]
    ) -> list[str]:
        try:
            regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as exc:
            raise ToolInputError(f"invalid regular expression {pattern!r}: {exc}") from None
        matcher = name_glob(file_glob) if file_glob else None
        found: list[str] = []
        for info in fs.walk(path, withheld=withheld):
            if info.kind != "file" or info.size > MAX_SCAN_BYTES:
                continue
            if matcher is not None and not matcher.match(info.display):
                continue
            try:
                data = fs.read_bytes(info.display)
            except (BrokerDenied, OSError):
                continue
            if looks_binary(data):
                continue
            for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
                if regex.search(line):
                    found.append(f"{info.display}:{number}:{line}")
                    if len(found) > MAX_MATCHES:
                        return found
        return found


def withheld_note(withheld: list[str]) -> str:
    """Say that files were left out by the content gate (read rules, secret masks), so the
    model never takes a withheld file for a missing one."""
    count = len(set(withheld))
    if not count:
        return ""
    files = "file was" if count == 1 else "files were"
    return f"\n\n[{count} {files} left out: withheld from the model by read rules or secret masks]"


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
        pattern, path = args.pattern, args.path or "."
        fs = ctx.brokers.fs
        root = fs.resolve(path)
        base = fs.display(root)
        prefix = "" if base == "." else base.rstrip("/") + "/"
        matcher = name_glob(pattern)
        hits: list[FileInfo] = []
        withheld: list[str] = []
        for info in fs.walk(path, withheld=withheld):
            relative = info.display[len(prefix) :] if prefix and info.display.startswith(prefix) else info.display
            if matcher.match(relative):
                hits.append(info)
        hits.sort(key=lambda i: (-i.mtime, i.display))
        shown = hits[:MAX_FILES]
        if not shown:
            text = f"no files match {pattern!r} in {base}"
        else:
            text = "\n".join(i.display for i in shown)
            if len(hits) > MAX_FILES:
                text += f"\n\n[{len(hits) - MAX_FILES} more files not shown; narrow the pattern]"
        text += withheld_note([w for w in withheld if matcher.match(w[len(prefix) :] if prefix and w.startswith(prefix) else w)])
        return ToolResult(id=call.id, name=call.name, text=text, data={"count": len(hits)})


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
