"""Attack: placeholder values pasted into a plugin's shell command lines become code.

A plugin's option the user typed (or copied from a setup guide), a folder name, a variable of the
user's environment: each was pasted into the text of a command a shell parses, where ``$(...)``,
backticks, ``;`` and newlines run. Two such command lines: an MCP server started as
``sh -c SCRIPT`` (outside the sandbox) and a monitor (a sandboxed background task). Both now
leave ``${...}`` to the shell, which expands the values from their environment as data. Through
the real loop: a real install, the default distribution, the loopback model server, the real
MCP fixture server, real bubblewrap for the monitor.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

from roder_ext_mcp.config import parse_server

from roder_core.testing.fake_server import FakeModelServer
from tests.brokers.helpers import needs_bwrap
from tests.ecosystem.harness import FIXTURE_SERVER
from tests.plugins.test_runtime_features import install, start
from tests.security.test_background_network import wait_for_task

pytestmark = needs_bwrap

#: Every way a value turns into code when pasted into a shell command line.
HOSTILE = "eu; touch pwned-semicolon $(touch pwned-dollar) `touch pwned-backtick` 'q\"\ntouch pwned-newline"


async def test_option_values_reach_a_plugins_shell_commands_as_data(tmp_path: Path, workspace: Path, roder_home: Path) -> None:
    seen = tmp_path / "server-saw.txt"
    script = (
        f'printf \'%s|%s\\n\' "${{user_config.region}}" "$CLAUDE_PLUGIN_ROOT" > {shlex.quote(str(seen))}; '
        f"exec {shlex.quote(sys.executable)} {shlex.quote(str(FIXTURE_SERVER))} stdio"
    )
    servers = {"mcpServers": {"regional": {"command": "sh", "args": ["-c", script]}}}
    monitors = [{"name": "region", "command": 'echo "monitor:${user_config.region}:end"; exec sleep 600'}]
    plugin = {"userConfig": {"region": {"type": "string", "title": "Region", "required": True}}}
    files = {".mcp.json": json.dumps(servers), "monitors/monitors.json": json.dumps(monitors)}
    install(tmp_path / "catalog", "regional", plugin, files, options={"region": HOSTILE})
    steps: list[dict[str, Any]] = [{"text": "hello"}, {"text": "again"}]
    async with FakeModelServer(steps) as server:
        runtime = start(workspace, roder_home, server, extra="\n[mcp]\nstartup_wait = 25\n")
        try:
            thread = await runtime.start_thread()
            await runtime.run_turn(thread.id, "hi")  # waits for the MCP server; starts the monitor
            [monitor] = runtime.tasks.list()
            await wait_for_task(runtime, monitor.id, lambda t: ":end" in t.last_line or t.status != "running")
            printed = runtime.tasks.output(monitor.id).text
        finally:
            await runtime.close()
    assert f"monitor:{HOSTILE}:end" in printed, printed
    value, _, root = seen.read_text().rstrip("\n").rpartition("|")
    assert value == HOSTILE and "regional" in root
    # the server starts in Roder's own folder, the monitor in the workspace
    assert not [*Path.cwd().glob("pwned-*"), *(p for p in (tmp_path, workspace, roder_home) for p in p.rglob("pwned-*"))]


def test_environment_variables_reach_a_shell_script_server_as_data(tmp_path: Path) -> None:
    """``${VAR}`` in config.toml or .mcp.json: an ordinary argument gets the value (one argv
    element, data); a ``sh -c`` script keeps the reference and gets the variable exported."""
    env = {"REGION": HOSTILE, "PATH": "/usr/bin:/bin"}
    raw = {"command": "bash", "args": ["-lc", "echo ${REGION} ${MISSING:-x}", "${REGION}"]}
    config = parse_server("s", raw, "config.toml", env)
    assert config.error is None, config.error
    assert config.args == ("-lc", "echo ${REGION} ${MISSING:-x}", HOSTILE)
    assert dict(config.env) == {"REGION": HOSTILE}
    unset = parse_server("s", {"command": "sh", "args": ["-c", "echo ${NOPE}"]}, "config.toml", env)
    assert unset.error is not None and "NOPE is not set" in unset.error
    plain = parse_server("s", {"command": "node", "args": ["-c", "${REGION}"]}, "config.toml", env)
    assert plain.args == ("-c", HOSTILE) and plain.env == ()
