"""Names that are protected wherever they appear in a workspace, and how git dirs are recognised.

One list for the file tools, the policy and the sandbox: a folder or file with one of these names
makes another program run code or trust something (git, Roder's own project folder, direnv, MCP
clients, editors, agent tools, commit hook managers), or holds credentials. They are protected at
any depth (``sub/.envrc`` as much as ``.envrc``), because those programs look for them in
sub-folders too (nested repositories, monorepo packages, editors opening a sub-folder). Names
compare case-insensitively, as they do on macOS and Windows file systems.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from roder_core.brokers.git_dirs import LOCAL, config_references, read_git_file

#: Folders whose contents tools never write.
PROTECTED_DIRS = frozenset(
    {
        ".git",
        ".roder",
        ".ssh",
        ".gnupg",
        ".aws",
        ".kube",
        ".docker",
        ".vscode",
        ".idea",
        ".claude",
        ".codex",
        ".cursor",
        ".agents",
        ".husky",
        ".devcontainer",
    }
)
#: Files other programs execute or trust (shells, git, package managers, MCP clients).
PROTECTED_FILES = frozenset(
    {
        ".bashrc",
        ".bash_profile",
        ".bash_login",
        ".bash_logout",
        ".profile",
        ".zshrc",
        ".zshenv",
        ".zprofile",
        ".zlogin",
        ".zlogout",
        ".cshrc",
        ".tcshrc",
        ".kshrc",
        ".inputrc",
        ".envrc",
        ".gitconfig",
        ".gitmodules",
        ".git-credentials",
        ".netrc",
        ".npmrc",
        ".yarnrc",
        ".yarnrc.yml",
        ".pypirc",
        ".mcp.json",
        ".ripgreprc",
        ".curlrc",
        ".wgetrc",
        ".pdbrc",
        ".pythonrc",
    }
)
PROTECTED_NAMES = PROTECTED_DIRS | PROTECTED_FILES
_DIRS = frozenset(name.casefold() for name in PROTECTED_DIRS)
_FILES = frozenset(name.casefold() for name in PROTECTED_FILES)


def protected_reason(parts: Iterable[str]) -> str | None:
    """Why a path with these components (relative to a root) is protected, or None."""
    parts = [p for p in parts if p not in ("", ".")]
    for index, part in enumerate(parts):
        folded = part.casefold()
        if folded in _DIRS:
            where = "/".join(parts[: index + 1])
            return f"{where}/ is protected" if index else f"{part}/ is protected"
        if index == len(parts) - 1 and folded in _FILES:
            return f"{'/'.join(parts)} is a protected file" if index else f"{part} is a protected file"
    return None


def looks_like_git_dir(path: Path) -> bool:
    """A folder git would accept as a repository: ``HEAD``, ``objects/`` and ``refs/`` (what
    git's own discovery checks), whatever the folder is called."""
    try:
        return os.path.isfile(path / "HEAD") and os.path.isdir(path / "objects") and os.path.isdir(path / "refs")
    except OSError:
        return False


def gitdir_pointer(path: Path) -> Path | None:
    """Where a ``.git`` *file* (worktree, submodule) points: ``gitdir: <path>``."""
    first = read_git_file(path, 4096).partition("\n")[0].strip()
    if not first.startswith("gitdir:"):
        return None
    target = Path(first.removeprefix("gitdir:").strip())
    return Path(os.path.normpath(path.parent / target))


def config_paths(git_dir: Path, worktree: Path) -> list[Path]:
    """Files and folders a repository's config makes git use for code or more config
    (``git_dirs.config_references``): the ``core.hooksPath`` folder, the scripts program-valued
    keys name (``core.fsmonitor``, filters, textconv, merge drivers, ...), and every file it
    includes, in turn. The user's global and system configs count as much as the repository's:
    ``core.hooksPath = .githooks`` there names a folder of every repository."""
    return [path for path, _why in config_references([git_dir / "config", *LOCAL.user_configs()], worktree)]


def referenced_git_dirs(git_dir: Path) -> list[Path]:
    """Git dirs and pointer files a repository refers to: its ``commondir`` and every linked
    worktree's ``.git`` file (``worktrees/*/gitdir``)."""
    found: list[Path] = []
    common = read_git_file(git_dir / "commondir", 65536)
    if common and common.strip():
        found.append(Path(os.path.normpath(git_dir / common.strip())))
    worktrees = git_dir / "worktrees"
    try:
        entries = list(os.scandir(worktrees))
    except OSError:
        entries = []
    for entry in entries:
        pointer = read_git_file(Path(entry.path) / "gitdir", 65536)
        if pointer and pointer.strip():
            found.append(Path(os.path.normpath(Path(entry.path) / pointer.strip())))
    return found
