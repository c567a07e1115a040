"""Compiled code of the source text the standard library writes and compiles while Roder starts,
kept between runs next to Roder's own bytecode.

``dataclasses`` writes each class's ``__init__``, ``__repr__``, ``__eq__`` (and for frozen classes
``__setattr__``, ``__delattr__``, ``__hash__``) as source text and compiles it with ``exec``;
``typing.ForwardRef`` compiles every annotation written as a string. Python's bytecode cache
covers modules, not these texts, so every start compiled them again: about 900 texts for a
one-shot run, a fifth of its start-up instructions (the parser and compiler), the same texts
every time.

``install`` makes those two modules look the code up by its exact source text first (their
module-level ``exec`` and ``compile`` names, which shadow the built-ins, are replaced by ones that
do so; a text that is not in the cache is compiled as before), and ``save`` writes what was
compiled anew. The code for a text is what ``compile`` makes of that text, so a class comes out
exactly as before; only the compiling is skipped.

Where: ``roder_core/__pycache__``, beside the bytecode of Roder's modules, because what it holds
follows from the installed code and the interpreter, not from a user's settings; whoever can
write there can change Roder's code itself, so the file adds nothing to trust. It is read only
when it is a regular file (never a link) owned by this user or root and writable by nobody else,
written whole (renamed into place) and named after the interpreter's version; a file that does
not load is ignored and replaced, and an installation that cannot be written to simply compiles
at each start, as before.
"""

from __future__ import annotations

import builtins
import contextlib
import marshal
import os
import stat
import sys
from types import CodeType
from typing import Any

#: The interpreter's version and optimization level (``-O`` compiles differently): code compiled
#: by another interpreter, or at another level, is never loaded.
VERSION_TAG = f"{sys.implementation.cache_tag}-{sys.hexversion:x}-o{sys.flags.optimize}"
#: More texts than this (stale ones pile up as the code changes; a run of Roder uses one to two
#: thousand): keep only those this run used or compiled.
MAX_ENTRIES = 5_000

#: Loaded: each text's code as marshalled bytes (loaded one by one when asked for: a run asks
#: for most of them, and loading the whole file as code objects costs three times as much).
_cache: dict[Any, bytes] = {}
#: Compiled by this run, not in the file yet.
_new: dict[Any, bytes] = {}
#: The loaded texts this run used.
_used: set[Any] = set()
_path: str | None = None
_loaded = False


#: Beside the bytecode of Roder's own modules.
#: (Strings, not ``pathlib``: the one-shot client of a running host loads this module too.)
DEFAULT_FOLDER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "__pycache__")


def cache_file(folder: str | os.PathLike[str]) -> str:
    return os.path.join(folder, f"compiled-snippets.{VERSION_TAG}.marshal")


def install(folder: str | os.PathLike[str] = DEFAULT_FOLDER) -> None:
    """Have ``typing`` and ``dataclasses`` (now, or when it is imported) look code up in the cache
    file in ``folder``, read at the first lookup: a command that defines no class reads nothing.
    Once per process; a later call only moves where ``save`` writes."""
    global _path
    import typing

    first = _path is None
    _path = cache_file(folder)
    if not first:
        return
    typing.compile = _compile  # type: ignore[attr-defined]
    if "dataclasses" in sys.modules:
        sys.modules["dataclasses"].exec = _exec  # type: ignore[attr-defined]
    else:
        sys.meta_path.insert(0, _WhenImported())


class _WhenImported:
    """Gives ``dataclasses`` the cached ``exec`` as soon as it is imported (the one-shot client
    of a running host never imports it, and should not for this)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "dataclasses":
            return None
        sys.meta_path.remove(self)
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(name, path)
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return None  # imported as usual, without the cache
        run_module = loader.exec_module

        def exec_module(module: Any) -> None:
            run_module(module)
            module.exec = _exec

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def save() -> None:
    """Write the cache when this run compiled something it did not hold (never raises: a
    read-only or full disk only means the next start compiles again)."""
    if not _new or _path is None:
        return
    kept = _cache if len(_cache) + len(_new) <= MAX_ENTRIES else {key: _cache[key] for key in _used}
    merged = {**kept, **_new}
    partial = f"{_path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(_path), exist_ok=True)
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(marshal.dumps(merged))
        os.replace(partial, _path)
    except (OSError, ValueError):
        with contextlib.suppress(OSError):
            os.unlink(partial)
        return
    _cache.clear()
    _cache.update(merged)
    _used.update(_new)
    _new.clear()


def _load(path: str) -> dict[Any, bytes]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return {}
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid not in (os.getuid(), 0) or info.st_mode & 0o022:
            return {}
        try:  # read whole: marshal.load reads a file a few bytes at a time
            loaded = marshal.loads(handle.read())
        except (EOFError, ValueError, TypeError):
            return {}
    if not isinstance(loaded, dict):
        return {}
    return {key: blob for key, blob in loaded.items() if isinstance(blob, bytes)}


def _code(key: Any, source: str, filename: str, mode: str) -> CodeType:
    global _loaded
    if not _loaded and _path is not None:
        _loaded = True
        _cache.update(_load(_path))
    blob = _cache.get(key) or _new.get(key)
    if blob is not None:
        try:
            code = marshal.loads(blob)
        except (EOFError, ValueError, TypeError):
            code = None
        if isinstance(code, CodeType):
            _used.add(key)
            return code
    # ``dont_inherit``: compiled as the calling module would, not with this module's
    # ``from __future__ import annotations`` (a dataclass's ``__init__`` would get string annotations)
    code = builtins.compile(source, filename, mode, dont_inherit=True)
    _new[key] = marshal.dumps(code)
    return code


def _exec(source: Any, globals: dict[str, Any] | None = None, locals: Any = None) -> None:
    """``exec`` for ``dataclasses``: a source text's code comes from the cache."""
    if isinstance(source, str):
        source = _code(source, source, "<string>", "exec")
    builtins.exec(source, globals, locals)


def _compile(source: Any, filename: str, mode: str, *args: Any, **kwargs: Any) -> Any:
    """``compile`` for ``typing``: a plain compile of a text comes from the cache."""
    if isinstance(source, str) and not args and not kwargs:
        return _code((filename, mode, source), source, filename, mode)
    if len(args) < 2 and "dont_inherit" not in kwargs:
        kwargs["dont_inherit"] = True  # as ``typing`` itself would compile it (see ``_code``)
    return builtins.compile(source, filename, mode, *args, **kwargs)
