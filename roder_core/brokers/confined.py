"""Long-running helper processes Roder starts on its own behalf (language servers, process
extensions), confined the way commands are: bubblewrap with the workspace read-only or
read-write as granted, no network unless granted, Roder's folders and the user's secrets
hidden, and an environment without secrets.

Commands go through the process broker, which collects their output; these processes instead
talk to Roder over their stdin and stdout for as long as they run, so they get the same
confinement as a command line to start, and their caller owns the pipes.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from roder_core.brokers.secrets import SecretRedactor


@dataclass(frozen=True)
class ConfinedCommand:
    """How to start the process: its argv (wrapped in bubblewrap where it runs) and environment."""

    argv: list[str]
    env: dict[str, str]
    sandboxed: bool


#: Files that mark a package's root: a program's imports reach anywhere in its package (a
#: script in ``examples/`` imports the SDK one folder up; Node.js resolves ``node_modules`` upwards).
PACKAGE_MARKERS = ("package.json", "pyproject.toml", "setup.py", "setup.cfg", ".git")


def program_folders(argv: list[str], env: Mapping[str, str], needs: Iterable[Path] = ()) -> list[Path]:
    """Folders the process needs to see to run at all, bound read-only: the packages its program
    and the files named on its command line, in its ``env`` or in ``needs`` belong to (the
    sandbox's private /tmp would otherwise hide a program kept under /tmp, say in a clone there),
    and a virtualenv's root for its interpreter. A file that is a link counts where it is named
    and where it leads: npm's ``node_modules/.bin/NAME`` is a link into its own package."""
    tmp = Path("/tmp")
    folders: set[Path] = set()
    for value in [*argv, *env.values(), *map(str, needs)]:
        if not value.startswith("/"):
            continue
        path = Path(value)
        if path.is_dir():
            folders.add(path.resolve())
        elif path.exists():
            folders.add(_package_root(path.parent.resolve(), tmp))
            folders.add(_package_root(path.resolve().parent, tmp))
            if path.parent.name == "bin" and (path.parent.parent / "pyvenv.cfg").exists():
                folders.add(_package_root(path.parent.parent.resolve(), tmp))
    return sorted(f for f in folders if f.is_relative_to(tmp))


def _package_root(folder: Path, tmp: Path) -> Path:
    """The nearest folder at or above ``folder`` (below /tmp) that holds a package marker, else
    ``folder`` itself."""
    for candidate in (folder, *folder.parents):
        if candidate == tmp or not candidate.is_relative_to(tmp):
            break
        if any((candidate / marker).exists() for marker in PACKAGE_MARKERS):
            return candidate
    return folder


def confine(
    argv: list[str],
    workspace: Path,
    env: Mapping[str, str],
    *,
    known: SecretRedactor,
    reads: bool,
    writes: bool,
    network: bool,
    passed_env: Iterable[str] = (),
    extra_env: Mapping[str, str] | None = None,
    hidden: Iterable[Path] = (),
    needs: Iterable[Path] = (),
) -> ConfinedCommand:
    """The command line and environment that give the process exactly these grants.

    ``argv[0]`` is looked up on the PATH of the environment it gets; ``hidden`` are Roder's own
    folders (``own_folders``); ``needs`` are other files or folders the program reads to run
    (a language server's TypeScript named in its initialization options); ``known`` is the
    run's redactor (``HostContext.secrets``), whose secrets leave the environment by name and by
    value, whatever the variable is called. Where bubblewrap is
    not available the process runs unconfined, with the environment still scrubbed, and
    ``sandboxed`` says so.
    """
    from roder_core.brokers.sandbox import Confinement, bubblewrap_argv, sandbox_status
    from roder_core.brokers.secret_paths import default_deny_read, masks
    from roder_core.brokers.secrets import scrubbed_env

    child_env, _ = scrubbed_env(env, known, passed_env)
    child_env.update(extra_env or {})
    argv = list(argv)
    if not os.path.isabs(argv[0]) and os.sep in argv[0]:
        argv[0] = str((workspace / argv[0]).resolve())
    elif not os.path.isabs(argv[0]):
        argv[0] = shutil.which(argv[0], path=child_env.get("PATH")) or argv[0]
    status = sandbox_status(None)
    if status.effective == "off" or status.bwrap is None:
        return ConfinedCommand(argv, child_env, sandboxed=False)
    sees = reads or writes
    shown = tuple(p for p in program_folders(argv, extra_env or {}, needs) if not p.is_relative_to(workspace))
    home = Path(env.get("HOME") or Path.home())
    plan = Confinement(
        level="workspace-write" if writes else "read-only",
        roots=(workspace,) if sees else (),
        cwd=workspace if sees else Path("/"),
        masked=tuple(masks(default_deny_read(home), (workspace,) if sees else ())),
        # Roder's own folders, and the workspace itself unless reading it was granted.
        hidden=tuple(hidden) + (() if sees else (workspace,)),
        network=network,
        shown=shown,
    )
    return ConfinedCommand(bubblewrap_argv(status.bwrap, status.probe, plan) + argv, child_env, sandboxed=True)
