"""``!`command``` in a slash command: the command's output replaces it before the model sees it.

Claude Code commands gather context this way (``Current git status: !`git status```). Finding
them is pure text work and lives here; running them is the caller's (through policy and the
process broker, see ``slash_commands``), so a preview can list exactly what would run.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence

#: ``!`cmd``` not preceded by a word character or another backtick (so ``a!`b``` inside code
#: spans and Markdown like `` `!` `` stay text).
INJECTION = re.compile(r"(?<![\w`])!`([^`\n]+)`")


def injected_commands(text: str) -> list[str]:
    """The commands a template would run, in order."""
    return [match.group(1).strip() for match in INJECTION.finditer(text) if match.group(1).strip()]


async def expand_injections(text: str, commands: Sequence[str], run: Callable[[str], Awaitable[str]]) -> str:
    """``text`` with each ``!`cmd``` replaced by what ``run(cmd)`` returns (run one by one, in order).

    Only ``commands`` run, in their order: the lines of the template itself. ``text`` also holds
    what was filled in for ``$ARGUMENTS``, text the user may not have written (a pasted snippet,
    an editor's selection); a ``!`...``` in there stays text."""
    expected = list(commands)
    parts: list[str] = []
    last = 0
    for match in INJECTION.finditer(text):
        command = match.group(1).strip()
        if not expected or command != expected[0]:
            continue
        expected.pop(0)
        parts.append(text[last : match.start()])
        parts.append(await run(command))
        last = match.end()
    parts.append(text[last:])
    return "".join(parts)
