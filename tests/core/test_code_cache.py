"""The compiled-snippet cache (``roder_core.settings.code_cache``): classes built from cached code are the
classes Python builds without it, the cache is used from the second run on, and a file that is
not safe or not whole is never loaded. Each run is a fresh interpreter, as a Roder start is."""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
from pathlib import Path

from roder_core.settings import code_cache

#: Defines dataclasses of every kind and a string annotation, with the cache installed first,
#: then prints what they do and how many texts this run had to compile.
PROBE = """
import json, sys
from pathlib import Path
from roder_core.settings import code_cache
if len(sys.argv) > 2:
    code_cache.MAX_ENTRIES = int(sys.argv[2])
code_cache.install(Path(sys.argv[1]))
import dataclasses, typing

@dataclasses.dataclass
class Point:
    x: int
    y: int = 2
    tags: list[str] = dataclasses.field(default_factory=list)

@dataclasses.dataclass(frozen=True, order=True)
class Frozen:
    name: str
    size: int = 0

@dataclasses.dataclass(slots=True, kw_only=True)
class Slotted:
    a: int
    b: str = "b"

try:
    Frozen("x").name = "y"
    frozen_refused = False
except dataclasses.FrozenInstanceError:
    frozen_refused = True
hints = typing.get_type_hints(type("Annotated", (), {"__annotations__": {"n": "list[int]"}}))
print(json.dumps({
    "point": repr(Point(1, tags=["t"])),
    "equal": Point(1) == Point(1, 2),
    "order": sorted([Frozen("b"), Frozen("a", 3)]) == [Frozen("a", 3), Frozen("b")],
    "hash": hash(Frozen("a")) == hash(Frozen("a")),
    "frozen_refused": frozen_refused,
    "slotted": repr(Slotted(a=1)),
    "hint": repr(hints["n"]),
    "init_annotations": repr(Point.__init__.__annotations__),
    "compiled": len(code_cache._new),
}))
code_cache.save()
"""


def run(cache_dir: Path, *extra: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(cache_dir), *extra], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


WITHOUT_CACHE = {
    "point": "Point(x=1, y=2, tags=['t'])",
    "equal": True,
    "order": True,
    "hash": True,
    "frozen_refused": True,
    "slotted": "Slotted(a=1, b='b')",
    "hint": "list[int]",
    # as objects: the cache compiles as ``dataclasses`` does, not with its own module's
    # ``from __future__ import annotations`` (which would make them strings)
    "init_annotations": "{'x': <class 'int'>, 'y': <class 'int'>, 'tags': list[str], 'return': None}",
}


def test_classes_from_cached_code_are_the_same_and_the_second_run_compiles_nothing(tmp_path: Path) -> None:
    first = run(tmp_path)
    assert first["compiled"] > 0  # type: ignore[operator]
    assert os.stat(code_cache.cache_file(tmp_path)).st_mode & 0o022 == 0  # nobody else may write it
    second = run(tmp_path)
    assert second["compiled"] == 0  # every text came from the cache
    assert {k: v for k, v in first.items() if k != "compiled"} == WITHOUT_CACHE
    assert {k: v for k, v in second.items() if k != "compiled"} == WITHOUT_CACHE


def test_a_cache_file_others_can_write_is_not_loaded(tmp_path: Path) -> None:
    run(tmp_path)
    os.chmod(code_cache.cache_file(tmp_path), 0o666)
    assert run(tmp_path)["compiled"] > 0  # type: ignore[operator]


def test_a_damaged_cache_file_is_ignored_and_replaced(tmp_path: Path) -> None:
    run(tmp_path)
    path = Path(code_cache.cache_file(tmp_path))
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    assert run(tmp_path)["compiled"] > 0  # type: ignore[operator]
    assert run(tmp_path)["compiled"] == 0  # written whole again by the run that compiled


def test_a_cache_file_that_is_a_link_is_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    run(elsewhere)
    cache = tmp_path / "cache"
    cache.mkdir()
    Path(code_cache.cache_file(cache)).symlink_to(code_cache.cache_file(elsewhere))
    assert run(cache)["compiled"] > 0  # type: ignore[operator]


def test_a_full_cache_keeps_only_what_a_run_used(tmp_path: Path) -> None:
    """Texts pile up as the code changes; past ``MAX_ENTRIES`` a run that compiled something
    keeps only the texts it used or compiled, so the file stays about one run's size."""
    run(tmp_path)
    path = Path(code_cache.cache_file(tmp_path))
    entries = marshal.loads(path.read_bytes())
    used = len(entries)
    entries.pop(next(iter(entries)))  # one text the next run must compile again
    stale = {f"stale {n}": marshal.dumps(compile("pass", "<string>", "exec")) for n in range(50)}
    path.write_bytes(marshal.dumps({**entries, **stale}))
    assert run(tmp_path, str(used + 10))["compiled"] == 1
    kept = marshal.loads(path.read_bytes())
    assert len(kept) == used and not set(kept) & set(stale)
    assert run(tmp_path)["compiled"] == 0
