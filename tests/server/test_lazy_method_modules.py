"""The dispatcher loads handler modules beyond the core only when a call needs them.

Each case runs in a fresh interpreter, since which modules are imported is process state.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PROBE = """
import asyncio, json, sys
from pathlib import Path
from roder_core.runtime.bootstrap import StartSettings
from roder_core.server.client import LocalAppClient
from roder_core.server.protocol import INITIALIZE, InitializeParams

LAZY = "roder_core.server.methods.tasks"

async def main():
    client = LocalAppClient.start(StartSettings(cwd=Path(sys.argv[1]), provider="mock"))
    out = {}
    async with client:
        bare = await client.call(INITIALIZE, InitializeParams(include_method_groups=False))
        out["bare_groups"] = len(bare.method_groups)
        out["loaded_after_bare"] = LAZY in sys.modules
        listed = await client.dispatcher.call("tasks/list", {})
        out["tasks_listed"] = listed.model_dump(by_alias=True)["tasks"]
        out["loaded_after_call"] = LAZY in sys.modules
        full = await client.call(INITIALIZE, InitializeParams())
        out["groups"] = {g.name: g.available for g in full.method_groups}
        try:
            await client.dispatcher.call("no/such-method", {})
        except Exception as exc:
            out["unknown"] = str(exc)
    print(json.dumps(out))

asyncio.run(main())
"""


def test_a_handshake_without_the_method_table_loads_only_the_core_handlers(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "RODER_HOME": str(home)},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["bare_groups"] == 0
    assert out["loaded_after_bare"] is False
    # A method of another module still works: its handler module loads on the first call.
    assert out["tasks_listed"] == []
    assert out["loaded_after_call"] is True
    # The full handshake lists every group, as before.
    groups = out["groups"]
    assert groups["tasks"] and groups["marketplaces"] and groups["runners"] and groups["media"] and groups["threads"]
    assert "method not found" in out["unknown"]
