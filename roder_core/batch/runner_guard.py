"""What the score's test runner reads besides the tests, kept at the task's base version.

A score is only worth something if nothing the agent leaves in the workspace changes *how* it
runs. The agent may change the code under test; it may not configure or extend the runner.
Before the agent starts, :class:`RunnerGuard` records every file of the workspace and copies the
ones of that class; after the agent, before the score, it puts them back:

- whole files that configure or extend a runner (``RUNNER_FILES``: ``conftest.py`` at any depth,
  ``pytest.ini``, ``sitecustomize.py``, ``*.pth``, ``entry_points.txt``, ``.env``, JavaScript
  test configs...) are restored to their base content, or removed when the agent created them;
- files that mix runner settings with other settings (``pyproject.toml``'s ``[tool.pytest*]`` and
  entry points, ``setup.cfg``'s ``[tool:pytest]``, ``tox.ini``'s ``[pytest]``, ``package.json``'s
  ``scripts`` and ``jest``) are restored whole when those settings changed, and removed when new
  and holding them;
- Python environments inside the workspace (a folder with ``pyvenv.cfg``, or a ``site-packages``)
  are the runner's own installation: one changed file and the whole environment is put back;
- what git ignores of the base (a vendored module, ``node_modules``) is in no prediction, so it
  is put back the same way; an environment or ignored entry too large to copy
  (``KEPT_COPY_*``) is kept as its stamps, what the agent added to it is removed, and any other
  change to it fails the score closed (``UnscorableChange``): it is never scored as left;
- a new module or package that would shadow the runner or the standard library (``pytest.py``,
  ``pytest/``, ``_pytest``, ``pluggy``, ``unittest/``...) in a folder that can be on ``sys.path``
  (one that is not a package) is removed;
- files the score command names (``./tests/runtests.py``, the ``Makefile`` of ``make test``) are
  restored like runner files.

A task lists the files that are the agent's to change in ``agent_files`` (globs); those are left
alone, and ``["**"]`` turns the guard off. Everything it resets is left out of the prediction
(``model.patch``), so an external grader sees the workspace Roder scored.
"""

from __future__ import annotations

import configparser
import contextlib
import json
import os
import re
import shlex
import shutil
import stat
import struct
import sys
import tomllib
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from importlib.machinery import all_suffixes
from pathlib import Path, PurePosixPath
from typing import Any

from roder_core.batch.globs import files_under, matches, remove_file
from roder_core.brokers import repairs

#: Files that configure or extend a test runner, at any depth.
RUNNER_FILES = (
    "conftest.py",
    "pytest.ini",
    ".pytest.ini",
    "pytest.toml",
    ".pytest.toml",
    "sitecustomize.py",
    "usercustomize.py",
    "*.pth",
    "*.egg-link",
    "entry_points.txt",
    ".env",
    "pyvenv.cfg",
    "jest.config.*",
    "vitest.config.*",
    "vitest.workspace.*",
    ".mocharc*",
    "karma.conf.*",
    "phpunit.xml",
    "phpunit.xml.dist",
    ".rspec",
)

#: Module names a test runner imports on its own: a new module by one of these names (or a
#: standard library name) in a folder on ``sys.path`` would replace it.
RUNNER_MODULES = frozenset(
    {"pytest", "_pytest", "pluggy", "py", "iniconfig", "nose", "nose2", "xdist", "hypothesis", "coverage", "tox", "nox"}
)


def _toml_sections(text: str) -> Any:
    data = tomllib.loads(text)
    tool = data.get("tool", {})
    project = data.get("project", {})
    return {
        "tool.pytest": tool.get("pytest"),
        "project.entry-points": project.get("entry-points"),
        "tool.setuptools.entry-points": tool.get("setuptools", {}).get("entry-points"),
    }


def _ini_sections(*names: str) -> Callable[[str], Any]:
    def read(text: str) -> Any:
        parser = configparser.RawConfigParser(strict=False, interpolation=None)
        parser.read_string(text)
        return {name: dict(parser.items(name)) if parser.has_section(name) else None for name in names}

    return read


def _package_json(text: str) -> Any:
    data = json.loads(text)
    if not isinstance(data, dict):
        return None
    return {key: data.get(key) for key in ("scripts", "jest", "mocha", "ava", "vitest")}


#: Files that mix runner settings with others: the function returns just the runner settings.
MIXED_FILES: dict[str, Callable[[str], Any]] = {
    "pyproject.toml": _toml_sections,
    "setup.cfg": _ini_sections("tool:pytest", "pytest", "options.entry_points"),
    "tox.ini": _ini_sections("pytest", "tool:pytest"),
    "package.json": _package_json,
}


def _runner_settings(name: str, data: bytes) -> Any:
    """The runner settings of a mixed file; a file that does not parse counts as all settings."""
    try:
        settings = MIXED_FILES[name](data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, configparser.Error):
        return ("unparseable", data)
    if isinstance(settings, dict) and not any(v is not None for v in settings.values()):
        return None
    return settings


#: Programs that run the file named by their first argument.
_INTERPRETER = re.compile(r"(python[\d.]*|pypy[\d.]*|bash|sh|dash|zsh|node|ruby|perl|php)")


def named_by(command: str | None) -> list[str]:
    """Workspace files a score command runs (``./run_tests.sh``, ``python tests/runtests.py``)
    and the Makefiles of a ``make`` command: they decide how the score runs as much as a config
    file does. A file the command only reads (``grep x calc.py``) is not one."""
    if not command:
        return []
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        words = command.split()
    named: list[str] = []
    simple: list[str] = []
    for word in [*words, ";"]:
        if word and set(word) <= set(";&|()<>\n"):
            named += _runs(simple)
            simple = []
        else:
            simple.append(word)
    return named


def _runs(words: list[str]) -> list[str]:
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        words = words[1:]  # VAR=value before the program
    if not words:
        return []
    program, arguments = words[0], words[1:]
    name = PurePosixPath(program).name
    if name in {"env", "exec", "nice", "timeout", "time", "xvfb-run"}:  # runs the command after it
        rest = [w for w in arguments if not w.startswith("-")]
        return _runs(rest[1:] if name == "timeout" else rest)
    if name in {"make", "gmake"}:
        given = [arguments[i + 1] for i, w in enumerate(arguments[:-1]) if w == "-f"]
        return [_from_root(f) for f in given if _relative(f)] or ["/Makefile", "/makefile", "/GNUmakefile"]
    if _INTERPRETER.fullmatch(name):
        for argument in arguments:
            if argument in {"-c", "-m", "-e", "--eval"}:
                return []
            if not argument.startswith("-"):
                return [_from_root(argument)] if _relative(argument) else []
        return []
    return [_from_root(program)] if "/" in program and _relative(program) else []


def _relative(word: str) -> bool:
    path = PurePosixPath(word)
    return bool(path.parts) and not path.is_absolute() and ".." not in path.parts and "$" not in word


def _from_root(word: str) -> str:
    return "/" + PurePosixPath(word).as_posix()  # a path from the root, not a name at any depth


def _is_environment(folder: Path) -> bool:
    return (folder / "pyvenv.cfg").is_file() or folder.name in {"site-packages", "dist-packages"}


def _environments(root: Path) -> list[str]:
    """Python environments inside the workspace, outermost only (relative POSIX paths)."""
    found: list[str] = []
    for folder, dirs, _files in os.walk(root):
        here = Path(folder)
        if here == root:
            dirs[:] = [d for d in dirs if d != ".git"]
        kept = []
        for name in dirs:
            path = here / name
            if path.is_symlink():
                continue
            if _is_environment(path):
                found.append(path.relative_to(root).as_posix())
            else:
                kept.append(name)
        dirs[:] = kept
    return found


#: One entry's stamp (``survey``): its ``lstat`` mode, size, modification time, inode and change
#: time, packed (a fraction of a tuple's memory, for trees of 100,000 files), and for a link its
#: target. The change time is what an edit cannot hide: one of the same size with the old mtime
#: put back (``touch -r``, ``os.utime``) still moves it, and only the kernel's clock sets it.
_STAMP = struct.Struct("=IqqQq")
#: A folder ``survey`` could not list (unreadable, or gone while walked): unequal to a listing.
_UNLISTED = b"unlisted"

#: What ``survey`` records of an entry: a file's or link's stamp, a folder's stamps by relative
#: path (its folders as ``name/`` without a stamp), or None when nothing is there.
State = bytes | dict[str, bytes | None] | None


def _stamp(info: os.stat_result, path: str) -> bytes:
    packed = _STAMP.pack(info.st_mode, info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns)
    return packed + os.fsencode(os.readlink(path)) if stat.S_ISLNK(info.st_mode) else packed


@dataclass(frozen=True)
class Survey:
    """One walk of an entry: its state, and the files and bytes a copy of it would take."""

    state: State
    files: int = 0
    size: int = 0


def survey(path: Path, skip: Collection[str] = ()) -> Survey:
    """``path``'s state and size in one walk. ``os.scandir``'s cached type tells folders
    without a system call, and each file or link costs one ``lstat``. Folders are named but not
    stamped (their times move when a ``__pycache__`` appears in them); ``__pycache__`` folders
    are left out (the score's sweep removes them) and so are the relative folders in ``skip``
    (environments, kept on their own); a link is stamped with its target, never followed."""
    root = os.fspath(path)
    try:
        info = os.lstat(root)
    except FileNotFoundError:
        return Survey(None)
    if not stat.S_ISDIR(info.st_mode):
        return Survey(_stamp(info, root), 1, info.st_size)
    state: dict[str, bytes | None] = {}
    files = size = 0
    pending = [""]
    while pending:
        prefix = pending.pop()
        try:
            with os.scandir(os.path.join(root, prefix)) as entries:
                for entry in entries:
                    relative = prefix + entry.name
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name != "__pycache__" and relative not in skip:
                            state[relative + "/"] = None
                            pending.append(relative + "/")
                        continue
                    info = entry.stat(follow_symlinks=False)
                    state[relative] = _stamp(info, entry.path)
                    files += 1
                    size += info.st_size
        except OSError:
            state[prefix] = _UNLISTED
    return Survey(state, files, size)


def changes(was: State, now: State) -> tuple[list[str], list[str]]:
    """(what was added, what was changed or removed) from one state of an entry to another, as
    paths relative to it (``""``: the entry itself). Only the outermost of added paths is
    named: removing it removes the rest."""
    if not isinstance(was, dict) or not isinstance(now, dict):
        return [], ([""] if was != now else [])
    new = {path for path in now if path not in was}
    added = sorted(path for path in new if path.rstrip("/").rpartition("/")[0] + "/" not in new)
    altered = sorted(path for path, stamp in was.items() if path not in now or now[path] != stamp)
    return added, altered


#: How much of the base's git-ignored content and environments a rollout keeps a copy of, at
#: most (files, bytes), the smallest entries first. Beyond it an entry is kept as its stamps
#: alone (``survey``): what the agent added to it is removed before the score, and any other
#: change fails the score closed (``UnscorableChange``), since it cannot be undone.
KEPT_COPY_FILES = 20_000
KEPT_COPY_BYTES = 256 * 1024 * 1024


class UnscorableChange(Exception):
    """The workspace cannot be made the base plus the prediction: a folder on the way to what
    must be put back was replaced by a link, or content too large to keep a copy of changed."""


def _bytecode(relative: str) -> bool:
    """In a bytecode cache: the score's sweep removes every ``__pycache__``
    (``remove_bytecode_caches``). A loose ``.pyc`` is not one: Python imports it where its
    source is missing, so it is guarded like any file."""
    return "__pycache__" in PurePosixPath(relative).parts


#: Standard library names that are common folder names and shadow nothing a runner imports.
_HARMLESS = frozenset({"test", "tests", "this", "antigravity", "idlelib", "turtledemo"})


def _module_at(relative: str) -> tuple[str, tuple[str, ...]] | None:
    """(module name, parent folder parts) when ``relative`` is an importable module or a
    package's ``__init__`` (a regular package; namespace folders never shadow a regular module)."""
    parts = PurePosixPath(relative).parts
    name = parts[-1]
    suffix = next((s for s in sorted(all_suffixes(), key=len, reverse=True) if name.endswith(s)), None)
    if suffix is None:
        return None
    stem = name[: -len(suffix)]
    if stem == "__init__":
        return (parts[-2], parts[:-2]) if len(parts) > 1 else None
    return stem, parts[:-1]


def shadows(relative: str, root: Path, standard: frozenset[str]) -> bool:
    """A module or package named like the runner or the standard library, in a folder that is
    not a package itself (so the folder can be on ``sys.path``: the root, a tests folder)."""
    found = _module_at(relative)
    if found is None:
        return False
    module, parent = found
    if module in _HARMLESS:
        return False
    if module not in RUNNER_MODULES and module not in standard and not module.startswith(("pytest_", "_pytest")):
        return False
    return not parent or not (root.joinpath(*parent) / "__init__.py").exists()


@dataclass
class RunnerGuard:
    """One rollout's runner files: recorded before the agent, put back before the score."""

    workspace: Path
    store: Path
    #: Globs of files that are the agent's to change (``agent_files``): never reset.
    agent_files: list[str] = field(default_factory=list)
    score: str | None = None
    #: How much ``keep`` copies at most (the task's ``keep_copy_*``).
    copy_files: int = KEPT_COPY_FILES
    copy_bytes: int = KEPT_COPY_BYTES
    before: set[str] = field(default_factory=set)
    copied: set[str] = field(default_factory=set)
    #: The workspace's Python environments (``record``), kept whole by ``keep``.
    environments: list[str] = field(default_factory=list)
    #: What ``keep`` noted (environments and the base's git-ignored entries) and its state
    #: then; the entries it copied, and the folders left out of each (environments inside).
    kept: dict[str, State] = field(default_factory=dict)
    kept_copied: set[str] = field(default_factory=set)
    kept_skip: dict[str, frozenset[str]] = field(default_factory=dict)

    def _runner_globs(self) -> tuple[str, ...]:
        return (*RUNNER_FILES, *named_by(self.score))

    def _guarded(self, relative: str) -> bool:
        return not matches(relative, self.agent_files)

    def _in_environment(self, relative: str) -> bool:
        return any(relative == env or relative.startswith(env + "/") for env in self.environments)

    def record(self) -> None:
        """Before the agent: the workspace's file list, its Python environments, and copies of
        its runner files and mixed files."""
        self.before = set(files_under(self.workspace))
        self.environments = [relative for relative in _environments(self.workspace) if self._guarded(relative)]
        patterns = (*self._runner_globs(), *MIXED_FILES)
        for relative in sorted(self.before):
            if not self._in_environment(relative) and self._guarded(relative) and matches(relative, patterns):
                destination = self.store / "runner" / relative
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(self.workspace / relative, destination, follow_symlinks=False)
                self.copied.add(relative)

    def ignores_some(self) -> bool:
        """Whether git can ignore anything here: a ``.gitignore`` of the workspace, or the user's
        own ignore file (read even without a global config; the baseline's git directory has no
        ``info/exclude``). A workspace with neither costs no git process to list what it ignores."""
        config = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
        if os.path.exists(os.path.join(config, "git", "ignore")):
            return True
        return any(PurePosixPath(relative).name == ".gitignore" for relative in self.before)

    def keep(self, ignored: list[str]) -> None:
        """Before the agent, after the baseline: note the state of every environment and of what
        git ignores (``Baseline.ignored``), so ``reset`` can tell any change. What git ignores is
        in no prediction, yet the score reads it, so a change to an ignored file the base had (a
        vendored module, ``node_modules``) would be scored without being predicted; an
        environment is the runner's own installation. Each entry is surveyed once; the smallest
        are copied within ``KEPT_COPY_*`` so ``reset`` can put them back. Bytecode caches (the
        sweep removes them) and the agent's own files are left out. The budget is the task's
        (``copy_files``, ``copy_bytes``)."""
        surveys: dict[str, Survey] = {}
        for relative in [*self.environments, *self._ignored_entries(ignored)]:
            inside = self.environments if relative not in self.environments else []
            skip = frozenset(env[len(relative) + 1 :] for env in inside if env.startswith(relative + "/"))
            surveys[relative] = survey(self.workspace / relative, skip)
            self.kept[relative] = surveys[relative].state
            if skip:
                self.kept_skip[relative] = skip
        files = size = 0
        for relative in sorted(surveys, key=lambda r: (surveys[r].size, surveys[r].files)):
            found = surveys[relative]
            if found.state is None or files + found.files > self.copy_files or size + found.size > self.copy_bytes:
                continue
            files, size = files + found.files, size + found.size
            path, copy = self.workspace / relative, self.store / "kept" / relative
            copy.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(found.state, dict):
                skip = self.kept_skip.get(relative, frozenset())
                # dirs_exist_ok: an environment inside it may have been copied there first (left out here)
                shutil.copytree(path, copy, symlinks=True, ignore=_leaving_out(path, skip) if skip else None, dirs_exist_ok=True)
            else:
                shutil.copy2(path, copy, follow_symlinks=False)
            self.kept_copied.add(relative)

    def ignored_at_base(self) -> set[str]:
        """What git ignored at the base (``keep``): the base's, never the prediction's, even where
        the agent stopped ignoring it (git would list it as new, and the patch would not apply
        where it already is)."""
        return {relative for relative in self.kept if relative not in self.environments}

    def _ignored_entries(self, ignored: list[str]) -> list[str]:
        """The ignored entries to keep: git's listing without bytecode caches, the agent's files
        and what is inside an environment; a folder that holds an environment stands for what it
        holds besides it (``kept_skip``)."""
        entries = []
        for entry in ignored:
            relative = entry.rstrip("/")
            if not self._in_environment(relative) and not _bytecode(relative) and self._guarded(relative):
                entries.append(relative)
        return entries

    def _reset_kept(self) -> tuple[list[str], set[str]]:
        """Put back every kept entry the agent changed (``keep``): from its copy, or, beyond the
        copy budget, by removing what the agent added to it; any other change to an entry too
        large to copy cannot be undone, so the score fails closed (``UnscorableChange``)."""
        log: list[str] = []
        reset: set[str] = set()
        for relative, was in self.kept.items():
            path = self.workspace / relative
            skip = self.kept_skip.get(relative, frozenset())
            now = survey(path, skip).state
            if now == was:
                continue
            if any(parent.is_symlink() for parent in path.parents if parent.is_relative_to(self.workspace)):
                raise UnscorableChange(f"a folder on the way to {relative} was replaced by a link")
            environment = relative in self.environments
            why = "the agent changed it" if environment else "git ignores it, so no prediction carries a change to it"
            if relative in self.kept_copied:
                _put_back(self.store / "kept" / relative, path, skip)
                log.append(f"restored {'environment ' if environment else ''}{relative} ({why})")
                reset.add(relative)
                continue
            added, altered = changes(was, now)
            kind = "a Python environment" if environment else "git-ignored, in no prediction"
            if altered:
                raise UnscorableChange(
                    f"{_listed(relative, altered)} changed; {relative} ({kind}) is beyond the {self.copy_files:,} files / "
                    f"{self.copy_bytes >> 20} MiB a rollout keeps a copy of, so the change cannot be put back"
                )
            for added_path in added:
                place = repairs.parent_of(self.workspace, Path(relative, added_path.rstrip("/")))
                with contextlib.suppress(FileNotFoundError, repairs.RepairRefused), place as (folder, name):
                    repairs.remove_at(folder, name)
            log.append(f"removed what the agent added to {relative} ({kind}): {_listed(relative, added)}")
            reset.add(relative)
        return log, reset

    def reset(self) -> tuple[list[str], set[str]]:
        """After the agent: put every environment, kept ignored entry, runner file and mixed file
        back. Returns the log lines and the workspace paths that were reset (left out of the
        prediction); raises ``UnscorableChange`` when that cannot be done."""
        log, reset = self._reset_kept()
        runner = self._runner_globs()
        standard = frozenset(sys.stdlib_module_names)
        for relative in sorted(files_under(self.workspace)):
            if relative in self.before or self._in_environment(relative) or not self._guarded(relative):
                continue
            why = None
            if matches(relative, runner) or (PurePosixPath(relative).name in MIXED_FILES and self._has_settings(relative)):
                why = "configures the test runner"
            elif shadows(relative, self.workspace, standard):
                why = "would shadow a module the score imports"
            if why is not None:
                remove_file(self.workspace, relative)
                log.append(f"removed {relative} ({why})")
                reset.add(relative)
        for relative in sorted(self.copied):
            original = self.store / "runner" / relative
            current = self.workspace / relative
            if _same(original, current) or self._other_settings_only(relative, original, current, runner):
                continue
            repairs.copy_in(original, self.workspace, Path(relative))
            log.append(f"restored {relative} (configures the test runner)")
            reset.add(relative)
        return log, reset

    def _has_settings(self, relative: str) -> bool:
        path = self.workspace / relative
        if os.path.islink(path) or not path.is_file():
            return True
        return _runner_settings(PurePosixPath(relative).name, path.read_bytes()) is not None

    @staticmethod
    def _other_settings_only(relative: str, original: Path, current: Path, runner: tuple[str, ...]) -> bool:
        """A mixed file whose runner settings are unchanged: the rest of it is the agent's."""
        name = PurePosixPath(relative).name
        if name not in MIXED_FILES or matches(relative, runner) or os.path.islink(current) or not current.is_file():
            return False
        return bool(_runner_settings(name, original.read_bytes()) == _runner_settings(name, current.read_bytes()))


def _listed(entry: str, paths: list[str]) -> str:
    """Up to three of an entry's ``changes``, as workspace paths, and how many more."""
    shown = ", ".join(f"{entry}/{path}".rstrip("/") for path in paths[:3])
    return shown + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")


def _leaving_out(root: Path, skip: frozenset[str]) -> Callable[[str, list[str]], set[str]]:
    """A ``copytree`` filter that leaves out the folders in ``skip`` (relative to ``root``)."""

    def ignore(folder: str, names: list[str]) -> set[str]:
        base = os.path.relpath(folder, root)
        prefix = "" if base == "." else base + "/"
        return {name for name in names if prefix + name in skip}

    return ignore


def _put_back(copy: Path, path: Path, skip: frozenset[str]) -> None:
    """Make ``path`` its copy again, leaving the folders in ``skip`` (environments inside it,
    kept on their own) as they are."""
    if not copy.is_dir() or copy.is_symlink():
        _remove(path)
        repairs.copy_in(copy, path.parent, Path(path.name))
    elif not skip or path.is_symlink() or not path.is_dir():
        replace_with(copy, path)
    else:
        for name in set(os.listdir(path)) | set(os.listdir(copy)):
            inner = frozenset(folder[len(name) + 1 :] for folder in skip if folder.startswith(name + "/"))
            if name in skip:
                continue
            if inner:
                _put_back(copy / name, path / name, inner)
                continue
            _remove(path / name)
            if os.path.lexists(copy / name):
                _put_back(copy / name, path / name, frozenset())


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def replace_with(source: Path, target: Path) -> None:
    """Make ``target`` a copy of the folder ``source``, whatever is at ``target`` now."""
    _remove(target)
    shutil.copytree(source, target, symlinks=True)


def _same(original: Path, current: Path) -> bool:
    if os.path.islink(original) or os.path.islink(current):
        return os.path.islink(original) and os.path.islink(current) and os.readlink(original) == os.readlink(current)
    return current.is_file() and original.read_bytes() == current.read_bytes()
