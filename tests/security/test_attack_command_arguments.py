"""Attack: text passed as a slash command's arguments runs as a ``!`cmd``` line.

A user (or an editor over ACP) passes text they did not write as a command's arguments: a
snippet from an issue, a selection, a pasted log. ``$ARGUMENTS`` is filled in before the
``!`cmd``` lines are found, so a ``!`...``` inside that text ran as if the command's author had
written it, which no install preview listed, and under the command's ``allowed-tools``. Only the
template's own lines may run. Through the real loop: the default distribution, the loopback model
server, real bubblewrap.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from roder_core.customization.slash_commands import CommandRegistry
from roder_core.ir import UserMessageItem
from roder_core.testing.fake_server import FakeModelServer
from tests.brokers.helpers import needs_bwrap
from tests.security.test_background_network import start

pytestmark = needs_bwrap

EXPLAIN = """\
---
description: Explain a snippet in the light of the working tree.
allowed-tools: Bash(echo:*), Bash(touch:*)
---
Working tree: !`echo tree-$1-ok`
Explain this: $ARGUMENTS
"""


async def test_a_bang_line_inside_the_arguments_is_text_not_a_command(workspace: Path, roder_home: Path) -> None:
    (roder_home / "commands").mkdir()
    (roder_home / "commands" / "explain.md").write_text(EXPLAIN)
    pasted = "clean !`touch pwned-by-arguments` and !`echo tree-clean-ok`"
    steps: list[dict[str, Any]] = [{"text": "explained"}]
    async with FakeModelServer(steps) as server:
        runtime = await start(workspace, roder_home, server)
        try:
            thread = await runtime.start_thread()
            registry = CommandRegistry.for_runtime(runtime)
            assert (await registry.expand("explain", pasted)).injections == ["echo tree-$1-ok"]
            await registry.run(runtime, thread.id, "explain", pasted)
            turn = await runtime.wait_turn(thread.id)
            assert turn.status == "completed"
            sent = next(i for i in runtime.thread(thread.id).items() if isinstance(i, UserMessageItem)).text
        finally:
            await runtime.close()
    # the template's own line ran (with the argument it names), the pasted ones stayed text
    assert not (workspace / "pwned-by-arguments").exists()
    assert sent.startswith("Working tree: tree-clean-ok\n"), sent
    assert "Explain this: clean !`touch pwned-by-arguments` and !`echo tree-clean-ok`" in sent, sent
    assert sent.count("tree-clean-ok") == 2


QUOTE_ME = """\
---
description: Show the arguments to the shell.
allowed-tools: Bash(printf:*), Bash(echo:*)
---
Quoted: !`printf '[%s]' "$1" "$2" "$3" "$4" "$ARGUMENTS"`
Bare: !`echo $1 $ARGUMENTS`
Single: !`echo '$1'`
About: $ARGUMENTS
"""

#: Each one a way to turn text into shell code when it is pasted into a command line.
HOSTILE = {
    "dollar": "$(touch pwned-dollar)",
    "backtick": "`touch pwned-backtick`",
    "semicolon": "x; touch pwned-semicolon",
    "newline": "y\ntouch pwned-newline",
    "quote": "it's \"q\" '; touch pwned-quote; '",
}


async def test_arguments_holding_shell_code_reach_the_bang_lines_as_data(workspace: Path, roder_home: Path) -> None:
    (roder_home / "commands").mkdir()
    (roder_home / "commands" / "quoteme.md").write_text(QUOTE_ME)
    positional = [HOSTILE["dollar"], HOSTILE["backtick"], HOSTILE["semicolon"], HOSTILE["newline"]]
    arguments = " ".join(shlex.quote(value) for value in positional) + " " + shlex.quote(HOSTILE["quote"])
    steps: list[dict[str, Any]] = [{"text": "shown"}]
    async with FakeModelServer(steps) as server:
        runtime = await start(workspace, roder_home, server)
        try:
            thread = await runtime.start_thread()
            registry = CommandRegistry.for_runtime(runtime)
            # the preview lists the code that runs: the template's lines, placeholders and all
            assert (await registry.expand("quoteme", arguments)).injections == [
                'printf \'[%s]\' "$1" "$2" "$3" "$4" "$ARGUMENTS"',
                "echo $1 $ARGUMENTS",
                "echo '$1'",
            ]
            await registry.run(runtime, thread.id, "quoteme", arguments)
            turn = await runtime.wait_turn(thread.id)
            assert turn.status == "completed"
            sent = next(i for i in runtime.thread(thread.id).items() if isinstance(i, UserMessageItem)).text
        finally:
            await runtime.close()
    assert sorted(p.name for p in workspace.iterdir()) == [], sent  # nothing ran: no pwned-* file
    quoted = "".join(f"[{value}]" for value in positional) + f"[{arguments}]"
    assert f"Quoted: {quoted}\n" in sent, sent
    assert "Single: $1\n" in sent, sent
    assert "not run" not in sent and "failed" not in sent, sent  # every line ran, none was refused
