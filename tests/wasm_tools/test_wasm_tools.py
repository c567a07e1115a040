"""WebAssembly tools through the real loop: modules built from WAT in the test run, run with
Wasmtime. A real tool (a JSON formatter) works; a hostile module is stopped by fuel, the
deadline and the memory cap, and reaches no file, path or clock it was not granted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from roder_core.server.protocol import (
    EXTENSIONS_LIST,
)
from tests.builders import scripted_client, tool_steps, turn_tool_results

pytest.importorskip("wasmtime", reason="the wasmtime package is not installed (pip install 'roder[wasm]')")

MODULES = Path(__file__).with_name("modules")
ENOTCAPABLE = 76


def install(workspace: Path, module: str) -> str:
    """The module's .wat and manifest copied where a user would keep them (outside the workspace)."""
    folder = workspace.parent / "wasm"
    folder.mkdir(exist_ok=True)
    for suffix in (".wat", ".json"):
        shutil.copy(MODULES / f"{module}{suffix}", folder / f"{module}{suffix}")
    return str(folder / f"{module}.wat")


def declare(home: Path, name: str, module: str, capabilities: list[str], extra: str = "") -> None:
    with (home / "config.toml").open("a", encoding="utf-8") as handle:
        handle.write(
            f"[extensions.wasm.{name}]\nmodule = {json.dumps(module)}\ncapabilities = {json.dumps(capabilities)}\n{extra}"
        )


async def tool_results(workspace: Path, tmp_path: Path, calls: list[dict[str, Any]]) -> list[Any]:
    """The tool results of one turn making ``calls``, then the extensions listing."""
    async with scripted_client(workspace, tmp_path, tool_steps(calls)) as app:
        results = await turn_tool_results(app)
        listing = await app.call(EXTENSIONS_LIST)
    return [*results, listing]


async def test_a_json_formatter_module_is_a_working_tool(roder_home: Path, workspace: Path, tmp_path: Path) -> None:
    declare(roder_home, "jsonfmt", install(workspace, "jsonfmt"), [])
    text = '{"name":"roder","tags":["a", "b"],"empty":{},"nested":{"ok":true,"s":"x, y: {z}"}}'
    formatted, listing = await tool_results(workspace, tmp_path, [{"name": "json_format", "arguments": {"json": text}}])
    assert not formatted.is_error, formatted.text
    assert formatted.text == (
        '{\n  "name": "roder",\n  "tags": [\n    "a",\n    "b"\n  ],\n  "empty": {},\n'
        '  "nested": {\n    "ok": true,\n    "s": "x, y: {z}"\n  }\n}\n'
    )
    assert json.loads(formatted.text) == json.loads(text)
    (state,) = [p for p in listing.processes if p.kind == "wasm"]
    assert (state.id, state.sandboxed, state.granted) == ("wasm:jsonfmt", True, [])


async def test_a_runaway_module_is_stopped_by_fuel_or_deadline(roder_home: Path, workspace: Path, tmp_path: Path) -> None:
    module = install(workspace, "hostile")
    declare(roder_home, "fuel", module, [], "fuel = 5000000\n")
    looped, _ = await tool_results(workspace, tmp_path, [{"name": "hostile", "arguments": {"mode": "loop"}}])
    assert looped.is_error
    assert looped.text == "fuel was stopped: it ran out of fuel (5,000,000 units; raise [extensions.wasm.fuel] fuel)"


async def test_a_module_past_its_deadline_is_stopped(roder_home: Path, workspace: Path, tmp_path: Path) -> None:
    declare(roder_home, "slow", install(workspace, "hostile"), [], "timeout = 0.5\nfuel = 9000000000000000000\n")
    looped, _ = await tool_results(workspace, tmp_path, [{"name": "hostile", "arguments": {"mode": "loop"}}])
    assert looped.is_error and looped.text == "slow was stopped: it ran longer than 0.5 s"


async def test_memory_stops_at_the_cap(roder_home: Path, workspace: Path, tmp_path: Path) -> None:
    declare(roder_home, "hog", install(workspace, "hostile"), [], "memory_mb = 8\n")
    hogged, _ = await tool_results(workspace, tmp_path, [{"name": "hostile", "arguments": {"mode": "hog"}}])
    assert not hogged.is_error
    pages = int(hogged.text)
    assert 1 <= pages <= 8 * 16  # 64 KiB pages: never past 8 MiB


@pytest.mark.parametrize(
    ("granted", "expected"),
    [
        # no files at all: there is no preopened directory (EBADF for every open)
        ([], [8, 8, 8, 8]),
        # read-only workspace: outside and absolute paths are refused, inside.txt opens, creating fails
        (["fs.read.workspace"], ["denied", "denied", 0, "denied"]),
        # read-write: creating works; escaping still does not
        (["fs.write.workspace"], ["denied", "denied", 0, 0]),
    ],
)
async def test_files_are_only_the_granted_workspace(
    roder_home: Path, workspace: Path, tmp_path: Path, granted: list[str], expected: list[Any]
) -> None:
    (workspace / "inside.txt").write_text("inside")
    (workspace.parent / "outside.txt").write_text("secret")
    declare(roder_home, "files", install(workspace, "hostile"), granted)
    probed, _ = await tool_results(workspace, tmp_path, [{"name": "hostile", "arguments": {"mode": "escape"}}])
    errnos = [int(n) for n in probed.text.split()]
    for got, want in zip(errnos, expected, strict=True):
        assert (got != 0) if want == "denied" else (got == want), (errnos, expected)
    assert (workspace / "new.txt").exists() is ("fs.write.workspace" in granted)


@pytest.mark.parametrize("granted", [[], ["clock"]])
async def test_the_clock_is_a_capability(roder_home: Path, workspace: Path, tmp_path: Path, granted: list[str]) -> None:
    declare(roder_home, "clock", install(workspace, "hostile"), granted)
    timed, _ = await tool_results(workspace, tmp_path, [{"name": "hostile", "arguments": {"mode": "clock"}}])
    assert int(timed.text) == (0 if granted else ENOTCAPABLE)


async def test_a_grant_a_module_cannot_have_is_refused(roder_home: Path, workspace: Path, tmp_path: Path) -> None:
    declare(roder_home, "net", install(workspace, "jsonfmt"), ["network.web"])
    (listing,) = await tool_results(workspace, tmp_path, [])
    assert [s.reason for s in listing.skipped if s.source == "wasm:net"] == [
        "[extensions.wasm.net] capabilities: network.web cannot be granted to a module (only fs.read.workspace, "
        "fs.write.workspace, clock)"
    ]
