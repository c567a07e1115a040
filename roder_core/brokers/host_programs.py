"""Which program Roder itself starts on this machine, outside any sandbox.

bubblewrap, ``nsenter``, Roder's own ``git`` (its environment block, batch baselines, plugin
fetches), the ``rg`` that lists files for ``glob`` and ``@file`` completion, the clipboard
readers, the container engines and the browser a sign-in opens run unconfined, and Roder's PATH
may put a folder of the workspace first (direnv's ``PATH_add bin`` or ``layout python``,
``./node_modules/.bin``, ``.``), where the agent's commands can leave a program of the same
name. So these are taken from the system's folders first; the PATH is searched only on a system
that keeps programs elsewhere (such as NixOS).
"""

from __future__ import annotations

import os
import shutil

#: The system's program folders.
SYSTEM_FOLDERS = ("/usr/bin", "/bin", "/usr/sbin", "/sbin")


def system_program(*names: str) -> str | None:
    """The first of ``names`` in the system's folders, else the first through the PATH (so an
    alternative the system has wins over a preferred one only the PATH has). The PATH search
    skips relative folders and folders inside the working folder: the agent's commands can
    write there, and this program runs outside their sandbox."""
    system = os.pathsep.join(SYSTEM_FOLDERS)
    for where in (system, outside_working_folder(os.environ.get("PATH", os.defpath))):
        for name in names:
            found = shutil.which(name, path=where)
            if found:
                return found
    return None


def outside_working_folder(path: str) -> str:
    """``path`` (a PATH value) without relative entries and entries inside the working folder."""
    here = os.path.realpath(os.getcwd())
    kept = []
    for entry in path.split(os.pathsep):
        real = os.path.realpath(entry) if os.path.isabs(entry) else None
        if real is not None and real != here and not real.startswith(here.rstrip(os.sep) + os.sep):
            kept.append(entry)
    return os.pathsep.join(kept)
