"""Settings for slow links: over SSH the app repaints less often and never animates.

Must run before Textual is imported (it reads ``TEXTUAL_FPS`` and ``TEXTUAL_ANIMATIONS`` once).
Explicit user settings always win.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

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


def stream_fps(remote: bool) -> float:
    """Transcript repaints per second while text streams (the coalescer's rate)."""
    return 10.0 if remote else 30.0
