"""Language servers that are missing, slow, crash or answer about the wrong file, as real
processes (tests/lsp/odd_lsp.py): the edit always lands, and its result says in one line what
happened with the server."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from roder_core.policy.trust import TrustStore
from roder_core.settings.paths import RoderPaths
from tests.builders import until
from tests.lsp.support import edit, tool_results

ODD = Path(__file__).with_name("odd_lsp.py")


def odd_server(roder_home: Path, workspace: Path, *, mode: str = "", command: list[str] | None = None, **lsp: str) -> None:
    """``[lsp.servers.odd]`` for ``.odd`` files, in a trusted workspace (configured servers wait for trust)."""
    argv = command or [sys.executable, str(ODD)]
    settings = "".join(f"{key} = {value}\n" for key, value in {"diagnostics_timeout": "60", **lsp}.items())
    (roder_home / "config.toml").write_text(
        f"hook_timeout = 300\n[lsp]\nbuiltin = false\n{settings}"
        f"[lsp.servers.odd]\ncommand = {json.dumps(argv[0])}\nargs = {json.dumps(argv[1:])}\n"
        f'extensionToLanguage = {{ ".odd" = "odd" }}\nenv = {{ ODD_MODE = {json.dumps(mode)} }}\nstartup_timeout = 60\n'
    )
    TrustStore(RoderPaths.from_env()).set(workspace, True)


def our_processes(marker: str) -> list[str]:
    """Command lines of processes (the server, its sandbox) started with ``marker`` in their arguments."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(cmdline.replace(b"\0", b" ").decode(errors="replace")[-200:])
    return found


async def test_a_missing_server_is_one_line_and_the_edit_lands(roder_home: Path, workspace: Path, tmp_path: Path) -> None:
    odd_server(roder_home, workspace, command=["no-such-language-server-here", "--stdio"])
    (workspace / "a.odd").write_text("fine\n")
    (result,), status = await tool_results(workspace, tmp_path, [edit("a.odd", "fine", "BROKEN")])
    assert not result.is_error and (workspace / "a.odd").read_text() == "BROKEN\n"
    last = result.text.splitlines()[-1]
    assert last.startswith("(no diagnostics: language server odd did not start: "), result.text
    assert "no-such-language-server-here" in last, last
    assert status == "lsp: odd (failed)"


async def test_a_server_that_never_answers_initialize_is_named_and_never_left_running(
    roder_home: Path, workspace: Path, tmp_path: Path
) -> None:
    marker = f"odd-slow-{tmp_path.name}-{os.getpid()}"
    odd_server(roder_home, workspace, mode="slow-start", command=[sys.executable, str(ODD), marker], diagnostics_timeout="2")
    (workspace / "a.odd").write_text("fine\n")
    calls = [edit("a.odd", "fine", "BROKEN"), edit("a.odd", "BROKEN", "fine again")]
    results, _ = await tool_results(workspace, tmp_path, calls)
    for result in results:
        assert result.text.endswith("\n\n(no diagnostics: odd still starting after 2 s)"), result.text
    assert (workspace / "a.odd").read_text() == "fine again\n"
    # The session ended: no server or sandbox of it is left (a sandbox's inner process goes
    # when its sandbox is killed, an instant later).
    await until(lambda: our_processes(marker) == [])


async def test_crashes_late_and_misaddressed_diagnostics(roder_home: Path, workspace: Path, tmp_path: Path) -> None:
    """A server that exits at a change is named with its status and its last words, at each edit
    (it is started again each time); one that publishes only about another file is silence for
    this one; one that publishes without versions is taken at its word."""
    (workspace / "a.odd").write_text("fine\n")
    calls = [edit("a.odd", "fine", "BROKEN"), edit("a.odd", "BROKEN", "fine again"), edit("a.odd", "fine again", "BROKEN 2")]

    odd_server(roder_home, workspace, mode="crash", diagnostics_timeout="30")
    results, _ = await tool_results(workspace, tmp_path, calls)
    for result in results:
        assert result.text.endswith(
            "\n\n(no diagnostics: language server odd exited with status 3 (odd: cannot handle a change, giving up))"
        ), result.text

    (workspace / "a.odd").write_text("fine\n")
    odd_server(roder_home, workspace, mode="other-file", diagnostics_timeout="2")
    results, _ = await tool_results(workspace, tmp_path, calls)
    for result in results:
        assert "Diagnostics this change introduced" not in result.text
        assert result.text.endswith("\n\n(no diagnostics: odd sent none for this change within 2 s)"), result.text

    (workspace / "a.odd").write_text("fine\n")
    odd_server(roder_home, workspace, mode="unversioned", diagnostics_timeout="30")
    broke, fixed, again = (await tool_results(workspace, tmp_path, calls))[0]
    assert broke.text.endswith("Diagnostics this change introduced (odd):\n  a.odd:1:1 error: tiny: this line is broken")
    assert "Diagnostics" not in fixed.text and "no diagnostics" not in fixed.text
    assert again.text.endswith("Diagnostics this change introduced (odd):\n  a.odd:1:1 error: tiny: this line is broken")
