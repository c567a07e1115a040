"""Which program Roder itself starts on this machine, outside any sandbox.

bubblewrap, ``nsenter`` and Roder's own ``git`` (its environment block, batch baselines, plugin
fetches) run unconfined, and Roder's PATH may put a folder of the workspace first (direnv's
``PATH_add bin`` or ``layout python``, ``./node_modules/.bin``, ``.``), where the agent's
commands can leave a program of the same name. So these are taken from the system's folders
first; the PATH is searched only on a system that keeps programs elsewhere (such as NixOS).
"""

from __future__ import annotations

import os
import shutil

#: The system's program folders.
SYSTEM_FOLDERS = ("/usr/bin", "/bin", "/usr/sbin", "/sbin")


def system_program(*names: str) -> str | None:
    """The first of ``names`` in the system's folders, else the first through the PATH (so an
    alternative the system has wins over a preferred one only the PATH has)."""
    system = os.pathsep.join(SYSTEM_FOLDERS)
    for where in (system, None):
        for name in names:
            found = shutil.which(name, path=where)
            if found:
                return found
    return None
