"""Which thread store the installed extensions provide, remembered so listing needs no start-up.

``roder sessions list`` only reads the thread index, but which store holds the threads is decided
by the installed extensions, and finding that out means importing and installing every one of them
(about 0.4 s of a 0.5 s listing). Each full start-up records the answer here, keyed by a
fingerprint of the installed distributions; a listing that finds a record with the same
fingerprint reads the JSONL index directly. Installing, upgrading or removing any distribution
changes the fingerprint, and the next listing starts the runtime again (and records anew).

This module imports nothing beyond the standard library: it runs before anything heavy.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

from roder_core.settings.paths import RoderPaths

RECORD_NAME = "thread-store.json"
#: The store whose index ``roder sessions list`` can read without starting the runtime.
JSONL_STORE = "roder_ext_jsonl_store.store.JsonlThreadStore"
_METADATA_SUFFIXES = (".dist-info", ".egg-info", ".pth", ".egg-link")


def installed_fingerprint() -> str:
    """The interpreter and every distribution's metadata directory on ``sys.path`` (name and
    mtime: an install, upgrade or removal rewrites or removes the directory), as one string.
    Compared whole, not hashed: ``hashlib`` cost the listing more than the comparison.

    ``sys.path[0]`` (the script's folder, or the current one for ``python -c``) is left out, and
    the interpreter is named by its resolved path, so the ``roder`` script (``bin/python3``) and
    ``python -m roder_tui.cli`` (``bin/python``) agree.
    """
    parts = [os.path.realpath(sys.executable), sys.prefix]
    for entry in sys.path[1:]:
        names = metadata_names(entry)
        if names is not None:
            parts.append(f"{entry}\0{names}")
    return "\0".join(parts)


def metadata_names(entry: str) -> list[tuple[str, int]] | None:
    """The distribution metadata folders (and ``.pth`` files) in one ``sys.path`` entry with
    their mtimes, sorted; None when the entry is not a readable directory."""
    try:
        with os.scandir(entry or ".") as found:
            return sorted((item.name, item.stat().st_mtime_ns) for item in found if item.name.endswith(_METADATA_SUFFIXES))
    except OSError:  # not a directory (a zip), missing, or changed while scanning
        return None


def record_thread_store(paths: RoderPaths, store: object | None, profile: str) -> None:
    """Remember the store a full start-up chose (best effort: a cache, never required)."""
    kind = f"{type(store).__module__}.{type(store).__qualname__}" if store is not None else ""
    directory = getattr(store, "directory", None)
    record = {
        "fingerprint": installed_fingerprint(),
        "profile": profile,
        "store": kind,
        "directory": str(directory) if directory is not None else None,
    }
    target = paths.cache_dir / RECORD_NAME
    with contextlib.suppress(OSError):
        if _read(target) == record:
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.with_name(f".{RECORD_NAME}.{os.getpid()}.tmp")
        temp.write_text(json.dumps(record), encoding="utf-8")
        os.replace(temp, target)


def recorded_jsonl_dir(paths: RoderPaths, profile: str) -> Path | None:
    """The JSONL threads directory when the last start-up with these distributions and this
    profile installed the JSONL store there; None when unknown (start the runtime instead)."""
    record = _read(paths.cache_dir / RECORD_NAME)
    if record is None or record.get("store") != JSONL_STORE or record.get("profile") != profile:
        return None
    if record.get("directory") != str(paths.threads_dir) or record.get("fingerprint") != installed_fingerprint():
        return None
    return paths.threads_dir


def _read(path: Path) -> dict[str, object] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
