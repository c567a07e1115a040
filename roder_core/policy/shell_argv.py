"""Which argument of a command's argv is a shell script (``sh -c SCRIPT``, ``bash -lc SCRIPT``).

A value filled into an ordinary argument stays one argument, whatever it holds. Filled into the
script of a shell's ``-c``, it becomes code: a path or an option holding ``$(...)``, a backtick
or ``;`` would run. Whoever fills placeholders into argv (MCP server definitions) asks here and,
for the script, leaves the values to the shell as environment variables.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "rbash", "ash", "mksh"})
#: Shell options that take the next argument as their value.
_OPTION_WITH_VALUE = frozenset({"-o", "+o", "-O", "+O"})


def script_index(argv: Sequence[str]) -> int | None:
    """The index of the ``-c`` script in ``argv`` (``argv[0]`` the program), or None when the
    program is not a shell or runs no ``-c`` script."""
    if not argv or posixpath.basename(argv[0]) not in SHELLS:
        return None
    index = 1
    while index < len(argv):
        arg = argv[index]
        if arg in _OPTION_WITH_VALUE:
            index += 2
            continue
        if arg == "--" or not arg.startswith(("-", "+")) or len(arg) < 2:
            return None  # a script file (or nothing): the rest are its arguments, data
        if arg.startswith("-") and arg[1:].isalpha() and "c" in arg[1:]:
            return index + 1 if index + 1 < len(argv) else None
        index += 1
    return None
