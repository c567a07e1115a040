"""Settings for slow links: over SSH the app repaints less often and never animates.

Must run before Textual is imported (it reads ``TEXTUAL_FPS`` and ``TEXTUAL_ANIMATIONS`` once).
Explicit user settings always win.

Streamed text is what costs over SSH: every transcript update lays the answer out, composes the
frame and sends its changed rows. At 100 tokens/s, 10 updates a second cost the app about a fifth
of a core (bench/README.md, goal 5); 5 a second still shows a line or so at a time, halves that
part, and halves the bytes of rows that scroll. ``RODER_STREAM_FPS`` sets the rate either way.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, MutableMapping

SSH_FPS = "15"
LOCAL_FPS = "60"


def is_remote(env: MutableMapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return bool(env.get("SSH_CONNECTION") or env.get("SSH_TTY"))


def tune_for_link(env: MutableMapping[str, str] | None = None) -> bool:
    """Lower the frame rate and turn animations off over SSH; returns True when remote."""
    env = os.environ if env is None else env
    remote = is_remote(env)
    if remote:
        env.setdefault("TEXTUAL_FPS", SSH_FPS)
        env.setdefault("TEXTUAL_ANIMATIONS", "none")
    return remote


#: Transcript updates per second while text streams, over SSH and locally.
SSH_STREAM_FPS = 5.0
LOCAL_STREAM_FPS = 30.0


def stream_fps(remote: bool, env: Mapping[str, str] | None = None) -> float:
    """Transcript repaints per second while text streams (the coalescer's rate):
    ``RODER_STREAM_FPS`` when it is a number from 1 to 120, else the link's default."""
    env = os.environ if env is None else env
    wanted = env.get("RODER_STREAM_FPS")
    if wanted:
        try:
            fps = float(wanted)
        except ValueError:
            fps = 0.0
        if 1.0 <= fps <= 120.0:
            return fps
        logging.getLogger(__name__).warning("RODER_STREAM_FPS=%r is not a number from 1 to 120; ignored", wanted)
    return SSH_STREAM_FPS if remote else LOCAL_STREAM_FPS
