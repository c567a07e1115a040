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
import json
import os
import re
import shlex
import shutil
import sys
import tomllib
from collections.abc import Callable
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


#: An entry as ``_manifest`` sees it: mode, size, mtime, inode and change time.
Entry = tuple[int, int, int, int, int]


def _manifest(folder: Path) -> dict[str, Entry]:
    """(mode, size, mtime, inode, ctime) of every entry under ``folder``. The change time is what
    an edit cannot hide: one of the same size with the old mtime put back (``touch -r``,
    ``os.utime``) still moves it, and only the kernel's clock sets it."""
    entries: dict[str, Entry] = {}
    for base, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(base, name)
            info = os.lstat(path)
            entries[os.path.relpath(path, folder)] = (
                info.st_mode,
                info.st_size,
                info.st_mtime_ns,
                info.st_ino,
                info.st_ctime_ns,
            )
    return entries


def _stamp(path: Path) -> Entry | None:
    """``_manifest``'s entry for one file or link (None: nothing there)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    return (info.st_mode, info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns)


def _state(path: Path) -> Entry | dict[str, Entry | None] | None:
    """What ``path`` holds now: a file's or link's stamp, or for a folder each file's and link's
    stamp and each folder's name. Folders' own times are left out (a new ``__pycache__`` moves
    them), and so are ``__pycache__`` folders (the score's sweep removes them)."""
    if not path.is_dir() or path.is_symlink():
        return _stamp(path)
    state: dict[str, Entry | None] = {}
    for base, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in dirs:
            full = os.path.join(base, name)  # a link to a folder is not walked: its own stamp tells a new target
            state[os.path.relpath(full, path) + "/"] = _stamp(Path(full)) if os.path.islink(full) else None
        for name in files:
            state[os.path.relpath(os.path.join(base, name), path)] = _stamp(Path(base, name))
    return state


#: How much of the base's git-ignored content a rollout keeps a copy of, at most (files, bytes).
#: Beyond it (a large ``node_modules``) a change to an ignored entry cannot be undone: the score
#: log says so, and the score reads it as the agent left it.
IGNORED_COPY_FILES = 20_000
IGNORED_COPY_BYTES = 256 * 1024 * 1024


class UnscorableChange(Exception):
    """The workspace cannot be made the base plus the prediction (a folder on the way to what
    must be put back was replaced by a link)."""


def _size(path: Path) -> tuple[int, int]:
    """(files, bytes) under ``path`` (a file: one), links not followed."""
    if not path.is_dir() or path.is_symlink():
        return 1, os.lstat(path).st_size
    files = size = 0
    for base, _dirs, names in os.walk(path):
        for name in names:
            files += 1
            size += os.lstat(os.path.join(base, name)).st_size
    return files, size


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
    before: set[str] = field(default_factory=set)
    copied: set[str] = field(default_factory=set)
    environments: dict[str, dict[str, Entry]] = field(default_factory=dict)
    #: The base's git-ignored entries (``keep_ignored``) and what each was; those with a copy.
    ignored: dict[str, Entry | dict[str, Entry | None] | None] = field(default_factory=dict)
    ignored_copied: set[str] = field(default_factory=set)

    def _runner_globs(self) -> tuple[str, ...]:
        return (*RUNNER_FILES, *named_by(self.score))

    def _guarded(self, relative: str) -> bool:
        return not matches(relative, self.agent_files)

    def _in_environment(self, relative: str) -> bool:
        return any(relative == env or relative.startswith(env + "/") for env in self.environments)

    def record(self) -> None:
        """Before the agent: the workspace's file list, copies of its runner files and mixed
        files, and a copy of every Python environment in it."""
        self.before = set(files_under(self.workspace))
        for relative in _environments(self.workspace):
            if self._guarded(relative):
                shutil.copytree(self.workspace / relative, self.store / "environments" / relative, symlinks=True)
                self.environments[relative] = _manifest(self.workspace / relative)
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
        ``info/exclude``). A workspace with neither costs no git process for ``keep_ignored``."""
        config = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
        if os.path.exists(os.path.join(config, "git", "ignore")):
            return True
        return any(PurePosixPath(relative).name == ".gitignore" for relative in self.before)

    def keep_ignored(self, entries: list[str]) -> None:
        """Before the agent, after the baseline: what git ignores (``Baseline.ignored``) is not in
        any prediction, yet the score reads the workspace, so a change to an ignored file the
        base had (a vendored module, ``node_modules``) would be scored without being predicted.
        Each such entry's state is noted and, within ``IGNORED_COPY_*``, copied, so ``reset``
        can put it back. Environments (kept whole already), bytecode caches (the sweep removes
        them) and the agent's own files are left out."""
        files = size = 0
        for entry in entries:
            relative = entry.rstrip("/")
            if self._in_environment(relative) or _bytecode(relative) or not self._guarded(relative):
                continue
            if any(env.startswith(relative + "/") for env in self.environments):
                continue  # a folder around an environment: the environment is kept, not the rest
            path = self.workspace / relative
            self.ignored[relative] = _state(path)
            count, bytes_ = _size(path)
            if files + count > IGNORED_COPY_FILES or size + bytes_ > IGNORED_COPY_BYTES:
                continue
            files, size = files + count, size + bytes_
            copy = self.store / "ignored" / relative
            copy.parent.mkdir(parents=True, exist_ok=True)
            if path.is_dir() and not path.is_symlink():
                shutil.copytree(path, copy, symlinks=True)
            else:
                shutil.copy2(path, copy, follow_symlinks=False)
            self.ignored_copied.add(relative)

    def _reset_ignored(self) -> tuple[list[str], set[str]]:
        """Put back every ignored entry of the base the agent changed (``keep_ignored``)."""
        log: list[str] = []
        reset: set[str] = set()
        for relative, was in self.ignored.items():
            path = self.workspace / relative
            if _state(path) == was:
                continue
            if relative not in self.ignored_copied:
                log.append(
                    f"not restored: {relative} changed; git ignores it, and it was too large to keep a copy of "
                    "(the score reads it as the agent left it)"
                )
                continue
            if any(parent.is_symlink() for parent in path.parents if parent.is_relative_to(self.workspace)):
                raise UnscorableChange(f"a folder on the way to {relative} was replaced by a link")
            copy = self.store / "ignored" / relative
            if copy.is_dir() and not copy.is_symlink():
                replace_with(copy, path)
            else:
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                repairs.copy_in(copy, self.workspace, Path(relative))
            log.append(f"restored {relative} (git ignores it, so no prediction carries a change to it)")
            reset.add(relative)
        return log, reset

    def reset(self) -> tuple[list[str], set[str]]:
        """After the agent: put every runner file, mixed file and environment back. Returns the
        log lines and the workspace paths that were reset (left out of the prediction)."""
        log: list[str] = []
        reset: set[str] = set()
        for env, manifest in self.environments.items():
            current = self.workspace / env
            if current.is_symlink() or not current.is_dir() or _manifest(current) != manifest:
                replace_with(self.store / "environments" / env, current)
                log.append(f"restored environment {env} (the agent changed it)")
                reset.add(env)
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
        ignored_log, ignored_reset = self._reset_ignored()
        return [*log, *ignored_log], reset | ignored_reset

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


def replace_with(source: Path, target: Path) -> None:
    """Make ``target`` a copy of the folder ``source``, whatever is at ``target`` now."""
    if target.is_symlink() or target.is_file():
        os.unlink(target)
    elif target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target, symlinks=True)


def _same(original: Path, current: Path) -> bool:
    if os.path.islink(original) or os.path.islink(current):
        return os.path.islink(original) and os.path.islink(current) and os.readlink(original) == os.readlink(current)
    return current.is_file() and original.read_bytes() == current.read_bytes()
