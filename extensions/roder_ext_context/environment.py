"""The environment block: working directory, OS, shell, date, git branch and dirty state, and
what the turn's tools may do (sandbox level, network, approval mode).

It changes between turns (any edit changes the git state), so it is a turn block: recorded with
the turn's user message, never in the system prompt, whose bytes must not change for provider
prompt caches to hold. Computed once per turn (cached by thread and prompt). Git state comes from one
``git status --porcelain --branch`` with a scrubbed environment (no secrets reach the child) and a
short timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
import platform
from collections import OrderedDict
from pathlib import Path

from roder_core.brokers.command_conditions import CommandConditions
from roder_core.brokers.project_reader import repository_root
from roder_core.brokers.safe_git import git_argv, git_env, host_git
from roder_core.kernel.services import ContextBlock, ContextQuery

GIT_TIMEOUT = 3.0
_CACHE_SIZE = 64
#: The only variables the git child sees.
_GIT_ENV_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "USER")


def _git_env() -> dict[str, str]:
    return git_env({k: v for k, v in os.environ.items() if k in _GIT_ENV_KEEP})


def describe_git_status(output: str) -> str:
    """``git status --porcelain=v1 --branch`` output as one line for the model."""
    lines = [line for line in output.splitlines() if line.strip()]
    head = lines[0][3:] if lines and lines[0].startswith("## ") else ""
    changed = len(lines) - (1 if head or (lines and lines[0].startswith("##")) else 0)
    if head.startswith("No commits yet on "):
        branch = f"branch {head.removeprefix('No commits yet on ')} (no commits yet)"
    elif head.startswith("HEAD (no branch)"):
        branch = "detached HEAD"
    else:
        name, _, rest = head.partition("...")
        upstream, _, state = rest.partition(" ")
        branch = f"branch {name or '?'}"
        if upstream:
            branch += f", tracking {upstream}"
        if state:
            branch += f" {state}"
    dirty = f"{changed} uncommitted change(s)" if changed else "clean working tree"
    return f"{branch}; {dirty}"


async def git_state(cwd: Path) -> str:
    if repository_root(cwd) is None:
        return "not a git repository"
    git = host_git()
    if git is None:
        return "a git repository (git is not installed)"
    try:
        # git_argv asks git for the repository's filter names: off the event loop
        argv = await asyncio.to_thread(git_argv, ["status", "--porcelain=v1", "--branch"], cwd=cwd, git=git)
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=_git_env(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
    except OSError as exc:
        return f"a git repository (git failed: {exc})"
    try:
        async with asyncio.timeout(GIT_TIMEOUT):
            out, _ = await proc.communicate()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        return "a git repository (git status timed out)"
    if proc.returncode != 0:
        return "a git repository (git status failed)"
    return describe_git_status(out.decode("utf-8", errors="replace"))


#: What each policy mode lets tools do without a person's approval.
MODES = {
    "plan": "plan: reading only; file changes and commands are refused",
    "ask": "ask: reading runs; file changes and commands need the user's approval",
    "auto-edit": "auto-edit: reading and file changes run; commands need the user's approval",
    "bypass": "bypass: every tool call runs without asking",
}


def limits_lines(query: ContextQuery) -> list[str]:
    """What the turn's tools may do: the sandbox, the network, the approval mode."""
    lines = []
    if query.sandbox:
        conditions = CommandConditions(query.sandbox, bool(query.network))
        lines.append(f"- Sandbox: {conditions.sandbox_text()}")
        lines.append(f"- Network: {conditions.network_text()}")
    if query.mode:
        mode = MODES.get(query.mode, query.mode)
        if not query.approver and query.mode != "bypass":
            mode += "; nobody can approve in this run, so calls that need approval are denied"
        lines.append(f"- Approval mode: {mode}")
    return lines


class Environment:
    def __init__(self) -> None:
        self._cache: OrderedDict[tuple[str, str, str, str, bool, str, bool | None], ContextBlock] = OrderedDict()

    def id(self) -> str:
        return "environment"

    async def load_context(self, query: ContextQuery) -> list[ContextBlock]:
        """The block for a turn's start (``turn_start``), recorded with its user message; nothing
        for the queries of its model calls, which read only "system" blocks: they would build
        (and run ``git status`` for) a block that is thrown away."""
        if not query.turn_start:
            return []
        key = (query.thread_id, str(query.cwd), query.prompt, query.mode, query.approver, query.sandbox, query.network)
        block = self._cache.get(key)
        if block is None:
            block = await self._build(query)
            self._cache[key] = block
            while len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)
        return [block]

    async def _build(self, query: ContextQuery) -> ContextBlock:
        cwd = query.cwd.resolve()
        today = datetime.date.today().isoformat()
        system = f"{platform.system()} {platform.release()} ({platform.machine()})"
        shell = os.environ.get("SHELL") or os.environ.get("COMSPEC") or "unknown"
        lines = [
            "# Environment",
            f"- Working directory: {cwd}",
            f"- Operating system: {system}",
            f"- Shell: {shell}",
            f"- Date: {today}",
            f"- Git: {await git_state(cwd)}",
        ]
        lines += limits_lines(query)
        return ContextBlock(source="environment", kind="environment", text="\n".join(lines), priority=60, placement="turn")
