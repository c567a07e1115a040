"""One-shot ask mode: ``roder -p "question"``, optionally with piped stdin attached.

Never imports Textual. Headless runs never ask anyone: calls that would need approval are denied
with a message saying how to allow them, and the folder is not trusted unless ``--trust``.
Exit codes: 0 success, 1 the turn failed or was interrupted, 2 usage error.

One run speaks the app-server protocol in its wire form (method names and camelCase dicts) to
one of two sessions:

- when this user's background host (``roder serve``) runs for this folder with the same
  settings, to the host over its unix socket (``roder_tui.ask_host``): no runtime to build, no
  extensions to load, not even pydantic. The thread runs headless there too. A host started
  elsewhere, with other flags, an older config file or other provider keys in the environment is
  not used (``roder_tui.ask_host.incompatibility``); ``RODER_NO_HOST=1`` skips it;
- otherwise to a runtime built in this process (``roder_tui.ask_local``).

Both go through ``roder_tui.ask_turn``'s ``drive`` and ``Printer``, so the output, the exit
codes and the errors are the same either way. This module, like the host's path, imports nothing
but the standard library and Roder's error types.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from roder_core.errors import RoderError
from roder_core.server.errors import RpcError
from roder_tui.ask_turn import EXIT_USAGE, Wire, drive


def _read_stdin(stream: TextIO) -> str | None:
    if stream is None or stream.isatty():
        return None
    data = stream.read()
    return data if data.strip() else None


def _prompt_of(args: argparse.Namespace) -> str:
    parts = [args.print_prompt or "", *args.prompt]
    return " ".join(p for p in parts if p).strip()


def _ask(args: argparse.Namespace, prompt: str, attachments: list[Wire], out: TextIO, err: TextIO) -> int:
    """The turn on this folder's compatible host if one runs (no event loop), else on a runtime
    built here."""
    from roder_tui.ask_host import open_host_session, run_unsuspended

    hosted = open_host_session(args)
    if hosted is None:
        import asyncio

        from roder_tui.ask_local import ask_locally  # the runtime is imported only here

        return asyncio.run(ask_locally(args, prompt, attachments, out, err))
    host, mode = hosted
    try:
        return run_unsuspended(drive(host, args, prompt, attachments, out, err, headless_mode=mode))
    finally:
        host.close()


def run_ask(args: argparse.Namespace, stdin: TextIO | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    stdin = sys.stdin if stdin is None else stdin
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    prompt = _prompt_of(args)
    piped = _read_stdin(stdin)
    if not prompt and piped is None:
        err.write("roder: -p needs a prompt (as an argument or on stdin)\n")
        return EXIT_USAGE
    attachments: list[Wire] = [{"type": "file", "name": "stdin", "text": piped}] if piped is not None and prompt else []
    if prompt:  # `roder -p "what is in @shot.png?"`: the picture goes with the prompt
        from roder_tui.media_input import image_input_wires

        attachments += image_input_wires(prompt, Path.cwd())
    if not prompt:
        prompt = piped or ""
    try:
        return _ask(args, prompt, attachments, out, err)
    except (RoderError, RpcError) as exc:  # a configuration error rises to the CLI's one handler
        err.write(f"roder: {exc}\n")
        return EXIT_USAGE
