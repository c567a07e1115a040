"""The one reader of project content for Roder itself.

Roder reads project files on its own account, outside any tool call: AGENTS.md/CLAUDE.md,
skills, slash commands, agents, hooks, workflow files, ``.mcp.json``, plugin folders, the
project's config. A cloned repository (or a model, from inside the sandbox) can make any of them
a symlink to ``/proc/self/environ``, ``~/.ssh/id_ed25519`` or Roder's ``credentials.json``, a
hard link to a file elsewhere, a FIFO that blocks, or a file of gigabytes. So every such read
goes through ``ProjectReader``, which applies the file broker's rules whether or not the folder
is trusted:

- the path must lie inside the reader's root, before and after resolving links (a link to a
  file inside the project, ``CLAUDE.md -> AGENTS.md``, is fine; one that leaves it is refused);
- the file is opened through directory fds with ``O_NOFOLLOW`` (``fs.WorkspaceFileSystem``), so
  a folder flipped into a link after the check is refused, not followed; only regular files
  with one name (no hard links, FIFOs or devices) are read;
- ``content_gate`` decides whether the content may reach the model: secret masks and the
  ``[policy]`` read rules;
- files are read up to a size limit, never past it.

A refused file raises ``ProjectFileRefused`` naming it and why; callers skip it with a notice
(``notice``) and never read it another way. ``tests/security/test_project_reads.py`` fails when a
module outside its list opens files, so a new reader cannot go around this one.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import stat as stat_mod
from collections.abc import Iterable, Mapping
from pathlib import Path

from roder_core.brokers import BrokerDenied
from roder_core.brokers.content_gate import ContentGate, ReadRules, shared_gate
from roder_core.brokers.fs import WorkspaceFileSystem
from roder_core.brokers.secret_paths import default_deny_read, expand
from roder_core.settings.paths import RoderPaths

log = logging.getLogger(__name__)

#: Larger project files are refused: instructions, definitions and config are small.
MAX_PROJECT_FILE_BYTES = 4 * 1024 * 1024


class ProjectFileRefused(BrokerDenied):
    """A project file Roder will not read; the message names it and says why."""


class ProjectReader:
    """Reads files under ``root`` for Roder itself, with the file broker's rules."""

    def __init__(self, root: Path, *, gate: ContentGate | None = None, max_bytes: int = MAX_PROJECT_FILE_BYTES) -> None:
        self.root = Path(os.path.realpath(root))
        self.max_bytes = max_bytes
        self._fs = WorkspaceFileSystem(self.root, capabilities=frozenset({"fs.read.workspace"}), gate=gate, extension_id="roder")

    def _key(self, path: Path) -> str:
        return str(path if path.is_absolute() else self.root / path)

    def _refused(self, path: Path, exc: Exception) -> ProjectFileRefused:
        """The refusal naming ``path`` once, in words meant for a person: these reads are
        Roder's own, so an OS error says what happened (``permission denied``), not its errno,
        and a folder is not answered with the tools' hint to list it."""
        shown = str(path)
        if isinstance(exc, IsADirectoryError):
            text = "it is a folder, not a file"
        elif isinstance(exc, OSError) and exc.strerror:
            text = exc.strerror.lower()
        else:
            text = str(exc)
        return ProjectFileRefused(text if text.startswith(shown) else f"{shown}: {text}")

    def read_bytes(self, path: Path, *, max_bytes: int | None = None) -> bytes:
        """The file's bytes; ``ProjectFileRefused`` when it may not be read (outside the root,
        through a link that leaves it, masked or withheld, not a regular file, too large) and
        ``FileNotFoundError`` when it does not exist."""
        limit = self.max_bytes if max_bytes is None else max_bytes
        try:
            with self._fs.open_read(self._key(path)) as handle:
                data = handle.read(limit + 1)
        except FileNotFoundError:
            raise
        except (BrokerDenied, OSError) as exc:
            raise self._refused(path, exc) from None
        if len(data) > limit:
            raise ProjectFileRefused(f"{path}: larger than {limit} bytes, which Roder does not read")
        return data

    def read_text(self, path: Path, *, max_bytes: int | None = None, errors: str = "strict") -> str:
        """The file as UTF-8 text (a leading BOM dropped); see ``read_bytes``. Bad UTF-8 raises
        ``UnicodeDecodeError`` unless ``errors`` says otherwise."""
        return self.read_bytes(path, max_bytes=max_bytes).decode("utf-8", errors=errors).removeprefix("\ufeff")

    def _lstat(self, path: Path) -> os.stat_result | None:
        try:
            return os.lstat(self._key(path))
        except OSError:
            return None

    def exists(self, path: Path) -> bool:
        """Whether an entry exists at ``path`` (a link counts, whatever it points at: reading it
        decides)."""
        return self._lstat(path) is not None

    def is_file(self, path: Path) -> bool:
        """Whether ``path`` names an entry other than a folder: a file to read, or one that
        ``read_bytes`` refuses with the reason (a link out of the root, a FIFO, a device), so
        that it is skipped with a notice rather than in silence."""
        st = self._lstat(path)
        return st is not None and not stat_mod.S_ISDIR(st.st_mode)

    def is_dir(self, path: Path) -> bool:
        """Whether ``path`` is a folder that may be listed: reached inside the root (no link
        leaving it) and not withheld."""
        try:
            real = self._fs.resolve(self._key(path))
        except (BrokerDenied, OSError):
            return False
        return real.is_dir()

    def names(self, folder: Path) -> list[str]:
        """The entries of ``folder`` (sorted), listed through a directory fd; empty when it is
        missing or may not be listed. Entries the content gate withholds are left out."""
        if not self.is_dir(folder):
            return []
        try:
            return sorted(i.path.name for i in self._fs.list_dir(self._key(folder), respect_gitignore=False))
        except (BrokerDenied, OSError):
            return []

    def files(self, folder: Path, pattern: str, *, recursive: bool = False, skipped: list[str] | None = None) -> list[Path]:
        """Entries below ``folder`` whose path relative to it matches ``pattern`` (``fnmatch``,
        ``/``-separated; ``*/SKILL.md``), sorted. Folders are descended without following links:
        a linked folder is not entered, and is named in ``skipped``; linked files are listed and
        checked when read."""
        if not self.is_dir(folder):
            if skipped is not None and self.exists(folder):
                try:
                    self._fs.resolve(self._key(folder))
                except (BrokerDenied, OSError) as exc:
                    skipped.append(str(self._refused(folder, exc)))
            return []
        base = Path(os.path.realpath(self._key(folder)))
        found: list[Path] = []
        depth = pattern.count("/")
        withheld: list[str] = []
        try:
            for info in self._fs.walk(str(base), respect_gitignore=False, withheld=withheld):
                relative = info.path.relative_to(base).as_posix()
                if not recursive and relative.count("/") > depth:
                    continue
                if fnmatch.fnmatchcase(relative, pattern) or (
                    pattern.startswith("**/") and fnmatch.fnmatchcase(relative, pattern[3:])
                ):
                    found.append(Path(folder) / relative)
                elif info.kind == "symlink" and skipped is not None and os.path.isdir(info.path):
                    skipped.append(f"{Path(folder) / relative}: a link to a folder, which Roder does not follow")
        except (BrokerDenied, OSError) as exc:
            if skipped is not None:
                skipped.append(f"{folder}: {exc}")
        if skipped is not None:
            skipped.extend(f"{self.root / shown}: withheld by read rules or secret masks" for shown in withheld)
        return sorted(found)


def notice(problem: Exception | str) -> str:
    """Log a skipped project file and return the line to show for it."""
    line = f"skipped {problem}"
    log.warning("%s", line)
    return line


def repository_root(cwd: Path) -> Path | None:
    """The nearest folder at or above ``cwd`` holding ``.git`` (a folder, or a worktree's file).

    A ``.git`` owned by someone else is no repository of this session's, as git says ("dubious
    ownership"): anyone can make ``/tmp/.git``, which would otherwise make every ``AGENTS.md``
    from ``/tmp`` down project instructions of a session started in ``/tmp/work``. The search
    ends there with None. Owners that count: this user, root (who can change anything anyway)
    and the owner of ``cwd`` itself (root working in a user's checkout; whoever owns ``cwd``
    already decides what is in it)."""
    start = Path(os.path.realpath(cwd))
    try:
        owners = {os.geteuid(), 0, os.stat(start).st_uid}
    except OSError:
        return None
    for folder in (start, *start.parents):
        try:
            owner = os.lstat(folder / ".git").st_uid
        except OSError:
            continue
        return folder if owner in owners else None
    return None


def project_root(cwd: Path) -> Path:
    """The folder project content is read from: the repository holding ``cwd``, or ``cwd``
    itself outside a repository."""
    return repository_root(cwd) or Path(os.path.realpath(cwd))


def project_reader(
    root: Path,
    *,
    paths: RoderPaths | None = None,
    env: Mapping[str, str] | None = None,
    deny_read: Iterable[str] = (),
    rules: ReadRules | None = None,
) -> ProjectReader:
    """A reader of ``root`` with the secret masks (the built-in list for this home folder and
    Roder's folders, plus ``deny_read`` entries) and ``rules`` (``[policy]`` read rules:
    ``settings.config.config_reader`` passes a config's, the runtime its live ones)."""
    environ = os.environ if env is None else env
    home = Path(environ.get("HOME") or os.path.expanduser("~"))
    where = paths or RoderPaths.from_env(dict(environ))
    masked = [*default_deny_read(home, where.data_dir, where.config_file), *expand(deny_read, home)]
    return ProjectReader(root, gate=shared_gate(root, rules=rules, masked=masked))
