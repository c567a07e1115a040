"""``!`command``` in a slash command: the command's output replaces it before the model sees it.

Claude Code commands gather context this way (``Current git status: !`git status```). Finding
them is pure text work and lives here; running them is the caller's (through policy and the
process broker, see ``slash_commands``), so a preview can list exactly what would run.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

#: ``!`cmd``` not preceded by a word character or another backtick (so ``a!`b``` inside code
#: spans and Markdown like `` `!` `` stay text).
INJECTION = re.compile(r"(?<![\w`])!`([^`\n]+)`")


def injected_commands(text: str) -> list[str]:
    """The commands a template would run, in order."""
    return [match.group(1).strip() for match in INJECTION.finditer(text) if match.group(1).strip()]


async def render(template: str, fill: Callable[[str], str], run: Callable[[str], Awaitable[str]]) -> str:
    """``template`` with each of its own ``!`cmd``` lines replaced by what ``run(cmd)`` returns
    (one by one, in order) and ``fill`` applied to the text between them.

    The lines are found in the template before anything is filled in: what fills the
    placeholders (the user's arguments, text the user may not have written: a pasted snippet, an
    editor's selection) is never searched for ``!`...```, and ``run`` gets the template's line
    itself, placeholders and all, to run with the values as data (``slash_commands``)."""
    parts: list[str] = []
    last = 0
    for match in INJECTION.finditer(template):
        command = match.group(1).strip()
        if not command:
            continue
        parts.append(fill(template[last : match.start()]))
        parts.append(await run(command))
        last = match.end()
    parts.append(fill(template[last:]))
    return "".join(parts)
