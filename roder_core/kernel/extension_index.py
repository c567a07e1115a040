"""The extension index: which ``roder.extensions`` entry points exist and what each provides.

Listing entry points means scanning every distribution's metadata on ``sys.path``; knowing what an
extension provides means importing it and calling its factory. Both answers only change when a
distribution is installed, upgraded or removed, so each start-up that did the work records them in
``cache/extension-index.json``, keyed by a fingerprint of every metadata folder's name and mtime
on ``sys.path`` (``index_fingerprint``). A reader whose fingerprint differs, or who finds the file
missing, unreadable or malformed, scans again and rewrites it: the index is a cache, never a source
of truth.

What each entry point provides is the set of service kinds (``StatusSegment``, ``ToolProvider``,
...) its extensions' manifests declared in the installations since the distributions last changed
(kinds only accumulate). An entry point never seen to return an extension (a hooks extension with
no hooks configured, a factory that failed) is unknown, and unknown entry points are always
imported: a client that needs only some kinds (the status segments of an attached client) skips
only entry points known to provide none of them.

Project extensions (``.roder/extensions/*.py``) are never in the index: they load, from the folder
itself, only when the user trusted it (``distribution.project_factories``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from roder_core.kernel.store_record import installed_fingerprint, metadata_names
from roder_core.settings.paths import RoderPaths

INDEX_NAME = "extension-index.json"
INDEX_VERSION = 1


@dataclass(frozen=True)
class IndexedEntryPoint:
    """One entry point of the group: its name, its ``module:attr`` value, and the service kinds
    its extensions provided when last installed (None: not known)."""

    name: str
    value: str
    provides: frozenset[str] | None = None

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "value": self.value, "provides": sorted(self.provides) if self.provides is not None else None}

    @classmethod
    def from_json(cls, data: object) -> IndexedEntryPoint:
        if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not isinstance(data.get("value"), str):
            raise ValueError("malformed entry")
        provides = data.get("provides")
        if provides is not None and not (isinstance(provides, list) and all(isinstance(k, str) for k in provides)):
            raise ValueError("malformed provides")
        return cls(data["name"], data["value"], frozenset(provides) if provides is not None else None)

    def may_provide(self, kinds: Collection[str]) -> bool:
        """Whether importing this entry point could yield a service of one of ``kinds``."""
        return self.provides is None or not self.provides.isdisjoint(kinds)


def index_fingerprint() -> str:
    """``installed_fingerprint()`` plus the metadata in ``sys.path[0]`` (which it leaves out so
    the ``roder`` script and ``python -m`` agree): the entry point scan reads that folder too, so a
    distribution there (an egg-info of a project run with ``python -m``) must count."""
    first = metadata_names(sys.path[0]) if sys.path else None
    if not first:
        return installed_fingerprint()
    return hashlib.sha256(f"{installed_fingerprint()}\0{sys.path[0]}\0{first}".encode()).hexdigest()


def index_path(paths: RoderPaths) -> Path:
    return paths.cache_dir / INDEX_NAME


def scan_entry_points(group: str) -> list[IndexedEntryPoint]:
    """The group's entry points from the installed distributions' metadata, sorted by name."""
    from importlib.metadata import entry_points

    found = {ep.name: ep.value for ep in entry_points(group=group)}
    return [IndexedEntryPoint(name, found[name]) for name in sorted(found)]


def read_index(paths: RoderPaths, group: str, fingerprint: str) -> list[IndexedEntryPoint] | None:
    """The recorded entry points when the index is valid for ``fingerprint`` and ``group``;
    None when it is missing, corrupt or stale."""
    try:
        data = json.loads(index_path(paths).read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("version") != INDEX_VERSION:
            return None
        if data.get("fingerprint") != fingerprint or data.get("group") != group:
            return None
        entries = data.get("entry_points")
        if not isinstance(entries, list):
            return None
        return [IndexedEntryPoint.from_json(entry) for entry in entries]
    except (OSError, ValueError):
        return None


def write_index(paths: RoderPaths, group: str, fingerprint: str, entries: Iterable[IndexedEntryPoint]) -> None:
    """Replace the index atomically (best effort: a read-only cache folder only costs a scan)."""
    data = {
        "version": INDEX_VERSION,
        "group": group,
        "fingerprint": fingerprint,
        "entry_points": [entry.to_json() for entry in entries],
    }
    target = index_path(paths)
    with contextlib.suppress(OSError):
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.with_name(f".{INDEX_NAME}.{os.getpid()}.tmp")
        temp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        os.replace(temp, target)


@dataclass
class ExtensionIndex:
    """The entry points of one group for this interpreter's installed distributions."""

    paths: RoderPaths
    group: str
    fingerprint: str
    entries: list[IndexedEntryPoint]
    #: False when the index on disk was missing, corrupt or stale and the metadata was scanned.
    from_cache: bool

    @classmethod
    def load(cls, paths: RoderPaths, group: str) -> ExtensionIndex:
        """The index from disk when valid; otherwise a fresh scan, written back."""
        fingerprint = index_fingerprint()
        cached = read_index(paths, group, fingerprint)
        if cached is not None:
            return cls(paths, group, fingerprint, cached, from_cache=True)
        index = cls(paths, group, fingerprint, scan_entry_points(group), from_cache=False)
        write_index(paths, group, fingerprint, index.entries)
        return index

    def record_provides(self, observed: dict[str, frozenset[str]]) -> None:
        """Add what entry points (by name) provided in this installation to what they provided
        before (kinds only accumulate until the distributions change); rewrite the file only
        when something changed."""
        updated = [_with_observed(entry, observed.get(entry.name)) for entry in self.entries]
        if updated != self.entries:
            self.entries = updated
            write_index(self.paths, self.group, self.fingerprint, updated)


def _with_observed(entry: IndexedEntryPoint, kinds: frozenset[str] | None) -> IndexedEntryPoint:
    if kinds is None:
        return entry
    known = kinds if entry.provides is None else entry.provides | kinds
    return IndexedEntryPoint(entry.name, entry.value, known)
