"""The extension index (``cache/extension-index.json``): listed entry points and what they provide.

Distributions are installed and removed for real: a ``*.dist-info`` folder with an
``entry_points.txt`` and a module, in a folder on ``sys.path``, as pip lays them out.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import sys
from pathlib import Path

import pytest

from roder_core.kernel.distribution import ENTRY_POINT_GROUP, build_distribution, make_host
from roder_core.kernel.extension_index import ExtensionIndex, index_path
from roder_core.settings.paths import RoderPaths

FAKE_MODULE = """
from pathlib import Path
from roder_core import EXTENSION_API_VERSION, ExtensionManifest, RoderExtension

CALLS = Path({calls!r})


class FakeExtension(RoderExtension):
    def manifest(self):
        return ExtensionManifest(id={ext_id!r}, name="Fake", version="1.0", api_version=EXTENSION_API_VERSION)

    def install(self, registry):
        pass


def create(host):
    with CALLS.open("a") as handle:
        handle.write("created\\n")
    return {returns}
"""


def _forget_listings() -> None:
    """What a new process starts with: no cached directory listings, module or metadata."""
    importlib.invalidate_caches()
    importlib.metadata.MetadataPathFinder().invalidate_caches()


class FakeSite:
    """A folder on ``sys.path`` where fake distributions are installed and removed."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = root
        self.root.mkdir()
        self.monkeypatch = monkeypatch
        monkeypatch.setattr(sys, "path", [*sys.path, str(root)])
        _forget_listings()

    def install(self, dist: str, entry_name: str, *, returns_extension: bool = True) -> Path:
        module = f"{dist}_{self.root.parent.name}".replace("-", "_")
        calls = self.root / f"{module}.calls"
        source = FAKE_MODULE.format(
            calls=str(calls), ext_id=entry_name, returns="FakeExtension()" if returns_extension else "None"
        )
        (self.root / f"{module}.py").write_text(source)
        info = self._info(dist)
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{entry_name} = {module}:create\n")
        self.monkeypatch.delitem(sys.modules, module, raising=False)
        _forget_listings()
        return calls

    def _info(self, dist: str) -> Path:
        """The metadata folder as a wheel names it (the name's dashes escaped)."""
        return self.root / f"{dist.replace('-', '_')}-1.0.dist-info"

    def remove(self, dist: str) -> None:
        info = self._info(dist)
        for child in info.iterdir():
            child.unlink()
        info.rmdir()
        _forget_listings()


def _names(index: ExtensionIndex) -> list[str]:
    return [entry.name for entry in index.entries]


def test_the_index_is_written_once_and_then_read_with_what_each_entry_point_provides(workspace: Path) -> None:
    paths = RoderPaths.from_env()
    first = ExtensionIndex.load(paths, ENTRY_POINT_GROUP)
    assert not first.from_cache
    assert {"mock", "tui", "jsonl-store"} <= set(_names(first))
    build_distribution(make_host(workspace, trust=False))
    again = ExtensionIndex.load(paths, ENTRY_POINT_GROUP)
    assert again.from_cache
    provides = {entry.name: entry.provides for entry in again.entries}
    assert provides["mock"] == {"InferenceEngine"}
    assert provides["tui"] is not None and "StatusSegment" in provides["tui"]
    assert provides["jsonl-store"] is not None and "ThreadStore" in provides["jsonl-store"]


def test_installing_and_removing_a_distribution_makes_the_index_stale(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = RoderPaths.from_env()
    site = FakeSite(tmp_path / "site", monkeypatch)
    build_distribution(make_host(workspace, trust=False))
    assert ExtensionIndex.load(paths, ENTRY_POINT_GROUP).from_cache

    calls = site.install("fake-roder-ext", "fake-ext")
    installed = ExtensionIndex.load(paths, ENTRY_POINT_GROUP)
    assert not installed.from_cache
    assert "fake-ext" in _names(installed)
    dist = build_distribution(make_host(workspace, trust=False))
    assert dist.registry.manifest("fake-ext") is not None
    assert calls.read_text() == "created\n"

    site.remove("fake-roder-ext")
    removed = ExtensionIndex.load(paths, ENTRY_POINT_GROUP)
    assert not removed.from_cache
    assert "fake-ext" not in _names(removed)
    assert build_distribution(make_host(workspace, trust=False)).registry.manifest("fake-ext") is None


@pytest.mark.parametrize("damage", ["not json", "a list", "no entries", "a malformed row"])
def test_a_corrupt_index_is_rebuilt(workspace: Path, damage: str) -> None:
    paths = RoderPaths.from_env()
    expected = {m.id for m in build_distribution(make_host(workspace, trust=False)).registry.manifests}
    good = json.loads(index_path(paths).read_text())
    valid_header = {"version": good["version"], "group": good["group"], "fingerprint": good["fingerprint"]}
    content = {
        "not json": '{"version": 1, "entry_po',
        "a list": "[]",
        "no entries": json.dumps(valid_header),
        "a malformed row": json.dumps({**valid_header, "entry_points": [{"name": 3}]}),
    }[damage]
    index_path(paths).write_text(content)

    assert not ExtensionIndex.load(paths, ENTRY_POINT_GROUP).from_cache
    assert {m.id for m in build_distribution(make_host(workspace, trust=False)).registry.manifests} == expected
    rebuilt = json.loads(index_path(paths).read_text())
    assert rebuilt["fingerprint"] == good["fingerprint"]
    assert [e["name"] for e in rebuilt["entry_points"]] == [e["name"] for e in good["entry_points"]]
    assert ExtensionIndex.load(paths, ENTRY_POINT_GROUP).from_cache


def test_untrusted_project_extensions_never_load_and_never_enter_the_index(workspace: Path) -> None:
    folder = workspace / ".roder" / "extensions"
    folder.mkdir(parents=True)
    marker = workspace / "imported"
    (folder / "evil.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('x')\ndef create(host):\n    return None\n"
    )
    paths = RoderPaths.from_env()
    for _ in range(2):  # once building the index, once reading it
        build_distribution(make_host(workspace, trust=False))
        assert not marker.exists()
    assert ExtensionIndex.load(paths, ENTRY_POINT_GROUP).from_cache
    assert "evil" not in index_path(paths).read_text()
    build_distribution(make_host(workspace, trust=True))
    assert marker.exists()  # the same file loads once the folder is trusted
    assert "evil" not in index_path(paths).read_text()


def test_a_kinds_query_skips_entry_points_known_to_provide_none_of_them(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = FakeSite(tmp_path / "site", monkeypatch)
    plain = site.install("fake-plain", "fake-plain")
    unknown = site.install("fake-unknown", "fake-unknown", returns_extension=False)
    build_distribution(make_host(workspace, trust=False))  # records what each provided
    assert plain.read_text() == unknown.read_text() == "created\n"

    dist = build_distribution(make_host(workspace, trust=False), kinds={"StatusSegment"})
    assert dist.registry.status_segments  # the tui extension's, as in a full build
    assert plain.read_text() == "created\n"  # known to provide nothing: not called again
    assert unknown.read_text() == "created\ncreated\n"  # never seen to return one: always called
