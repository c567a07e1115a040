"""How Roder itself runs git: with every config-driven program switched off.

A repository's config can name programs git runs on its own: ``core.fsmonitor`` on every
``status``, hooks (``core.hooksPath``), the pager, external diff and textconv drivers, clean/
smudge filters, ``core.sshCommand``, credential helpers. If a model managed to plant such
config, the next ``git status`` Roder runs for its environment block or changes view would run
the model's code outside any sandbox. So every git command Roder runs (the environment block,
the changes methods, batch workspaces) is built here:

- ``-c`` overrides for fsmonitor, hooks, the pager and ``ext::`` transports, plus empty
  clean/smudge/process commands for every filter the repository's config defines (git skips a
  filter whose command is empty). The names come from git itself (``git config`` with the
  command's own global options, so the same repository, ``config.worktree``, includes and
  every spelling git accepts), joined with this module's own reading of the config files (for
  when that listing fails or takes too long);
- ``--no-ext-diff --no-textconv`` for commands that render diffs, and
  ``--ignore-submodules=dirty`` for those that look at the working tree: a submodule's status
  is a git run inside it, under the submodule's own config and filters, which the overrides
  here do not name;
- an environment without ``GIT_DIR``, ``GIT_CONFIG*``, ``GIT_EXTERNAL_DIFF`` or any other
  ``GIT_*`` from outside, no system config, no prompts, no optional locks;
- on this machine, the system's git (``host_git``), not a program named git in a workspace
  folder on the PATH.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from roder_core.brokers.git_dirs import config_includes, follow_includes, read_git_file
from roder_core.brokers.host_programs import system_program

#: Overrides for every program-valued setting git consults without being asked to.
_NEUTRAL = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "protocol.ext.allow=never",
)
#: Subcommands that may render a diff (and so run external diff or textconv drivers).
_DIFFING = frozenset(
    {"diff", "log", "show", "whatchanged", "format-patch", "diff-files", "diff-index", "diff-tree", "blame", "annotate", "grep"}
)
_NO_DRIVERS = {"grep": ("--no-textconv",), "blame": ("--no-textconv",), "annotate": ("--no-textconv",)}
#: Subcommands that look at submodules' working trees (by running git inside them).
_SUBMODULE_STATUS = frozenset({"status", "diff", "diff-files", "diff-index"})
#: How long the listing of filter names may take before the config files' own reading alone is used.
LISTING_TIMEOUT = 3.0
#: Config scopes that are not the repository's: the user's own files and Roder's own ``-c``.
_NOT_REPOSITORY = frozenset({"global", "system", "command"})
_FILTER = re.compile(r'^\s*\[\s*filter\s+"((?:[^"\\]|\\.)*)"\s*\]', re.IGNORECASE | re.MULTILINE)
#: Variables passed to git unchanged; every other GIT_* is dropped.
_SAFE_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
}


def _git_dir(cwd: Path) -> Path | None:
    for folder in (cwd, *cwd.parents):
        dot_git = folder / ".git"
        if dot_git.is_dir():
            return dot_git
        if dot_git.is_file():
            text = read_git_file(dot_git, 4096).strip()
            if text.lower().startswith("gitdir:"):
                return Path(os.path.normpath(folder / text[7:].strip()))
            return None
    return None


def _listed_filters(global_options: Sequence[str], cwd: Path) -> list[str]:
    """Filter names the repository defines, as git itself reads its config (the same global
    options, so the same git dir): every scope but the user's own files. Empty when the
    listing fails or takes too long (a FIFO included as config); ``_read_filters`` still holds."""
    git = host_git()
    if git is None:
        return []
    argv = [git, *global_options, "config", "--show-scope", "--null", "--get-regexp", r"^filter\..*\.(clean|smudge|process)$"]
    try:
        done = subprocess.run(
            argv, cwd=cwd, env=git_env(), stdin=subprocess.DEVNULL, capture_output=True, timeout=LISTING_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    fields = done.stdout.decode("utf-8", errors="surrogateescape").split("\0")
    names: list[str] = []
    for scope, entry in zip(fields[0::2], fields[1::2], strict=False):
        key = entry.split("\n", 1)[0]
        name = key[len("filter.") : key.rfind(".")]
        if scope not in _NOT_REPOSITORY and name and name not in names:
            names.append(name)
    return names


def _read_filters(cwd: Path) -> list[str]:
    """Names of the filter drivers the repository's own config (its common dir's, and every
    file they include, as deep as git follows includes) define, read from the files here."""
    git_dir = _git_dir(Path(cwd))
    if git_dir is None:
        return []
    configs = [git_dir / "config"]
    common = read_git_file(git_dir / "commondir", 4096).strip()
    if common:
        configs.append(Path(os.path.normpath(git_dir / common)) / "config")
    names: list[str] = []
    for config in follow_includes(configs, lambda config: config_includes(read_git_file(config), config)):
        names.extend(n for n in _FILTER.findall(read_git_file(config)) if n not in names)
    return names


def host_git() -> str | None:
    """The git Roder runs on this machine itself (unconfined): the system's, never one the
    agent's commands left in a workspace folder on the PATH (``host_programs``)."""
    return system_program("git")


def git_argv(args: Sequence[str], *, cwd: Path | None = None, git: str = "git") -> list[str]:
    """``git <neutralizing -c options> <args>``, with ``--no-ext-diff --no-textconv`` after a
    subcommand that renders diffs. ``cwd`` is where git will run (to find filter names).
    ``git``: the program; on this machine ``host_git()``, through a runner its own ``git``."""
    argv = [git]
    for setting in _NEUTRAL:
        argv += ["-c", setting]
    rest = list(args)
    index = _subcommand(rest)
    if cwd is not None:
        names = _read_filters(Path(cwd))
        names += [n for n in _listed_filters(rest[:index], Path(cwd)) if n not in names]
        for name in names:
            for key in ("clean", "smudge", "process"):
                argv += ["-c", f"filter.{name}.{key}="]
    if index is not None:
        command = rest[index]
        extra = list(_NO_DRIVERS.get(command, ("--no-ext-diff", "--no-textconv") if command in _DIFFING else ()))
        if command in _SUBMODULE_STATUS:
            extra.append("--ignore-submodules=dirty")
        rest[index + 1 : index + 1] = extra
    return argv + rest


def _subcommand(args: list[str]) -> int | None:
    """Index of the subcommand, past global options (``-c k=v`` and ``-C dir`` take a value)."""
    i = 0
    while i < len(args):
        if args[i] in ("-c", "-C"):
            i += 2
        elif args[i].startswith("-"):
            i += 1
        else:
            return i
    return None


def git_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) without any ``GIT_*`` variable from
    outside, plus the safe settings above."""
    source = os.environ if base is None else base
    env = {k: v for k, v in source.items() if not k.startswith("GIT_")}
    env.update(_SAFE_ENV)
    return env


def env_argv_prefix(base: Mapping[str, str]) -> list[str]:
    """For a git run through a broker that builds its own environment: ``env -u ...`` that
    drops every ``GIT_*`` variable ``base`` holds, then sets the safe settings."""
    argv = ["env"]
    for name in sorted(k for k in base if k.startswith("GIT_") and k not in _SAFE_ENV):
        argv += ["-u", name]
    return argv + [f"{k}={v}" for k, v in _SAFE_ENV.items()]
