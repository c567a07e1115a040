"""Settings for slow links: over SSH the app repaints less often and never animates.

Must run before Textual is imported (it reads ``TEXTUAL_FPS`` and ``TEXTUAL_ANIMATIONS`` once).
Explicit user settings always win.

Streamed text is what costs over SSH: every transcript update lays the answer out, composes the
frame and sends its changed rows. At 100 tokens/s, 10 updates a second cost the app about a fifth
of a core (bench/README.md, goal 5). Over SSH the rate is therefore paced by a CPU budget: at
most 5 updates a second, fewer when the app (all its threads) would use more than 5% of a core (a slow
or busy machine, a long transcript), never fewer than one a second. A local terminal gets up to
30 updates a second under a budget of its own: 10% of a core, never fewer than 5 updates a
second (a streamed answer should not cost more than the peers' apps do; bench/README.md,
issue 30). ``RODER_STREAM_FPS`` sets a fixed rate instead, either way.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, MutableMapping

from roder_tui.coalesce import CpuBudget

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


#: Transcript updates per second while text streams, over SSH (at most) and locally.
SSH_STREAM_FPS = 5.0
LOCAL_STREAM_FPS = 30.0
#: Over SSH: the share of a core the streaming app aims at (issue 22's goal), and the fewest
#: updates a second it falls to when frames cost more than that.
SSH_STREAM_CPU = 0.05
SSH_SLOWEST_FPS = 1.0
#: In a local terminal: the same, with a larger share and a floor that still reads as motion.
LOCAL_STREAM_CPU = 0.10
LOCAL_SLOWEST_FPS = 5.0


def stream_fps(remote: bool, env: Mapping[str, str] | None = None) -> float:
    """Transcript repaints per second while text streams (the coalescer's rate, its fastest
    when paced by a budget): ``RODER_STREAM_FPS`` when it is a number from 1 to 120, else the
    link's default."""
    env = os.environ if env is None else env
    fps = _wanted_fps(env)
    if fps is not None:
        return fps
    return SSH_STREAM_FPS if remote else LOCAL_STREAM_FPS


def stream_budget(remote: bool, env: Mapping[str, str] | None = None) -> CpuBudget | None:
    """The CPU budget pacing streamed updates, for the link, unless ``RODER_STREAM_FPS`` fixes the rate."""
    env = os.environ if env is None else env
    if _wanted_fps(env, warn=False) is not None:
        return None
    if remote:
        return CpuBudget(SSH_STREAM_CPU, fastest=SSH_STREAM_FPS, slowest=SSH_SLOWEST_FPS)
    return CpuBudget(LOCAL_STREAM_CPU, fastest=LOCAL_STREAM_FPS, slowest=LOCAL_SLOWEST_FPS)


def _wanted_fps(env: Mapping[str, str], *, warn: bool = True) -> float | None:
    wanted = env.get("RODER_STREAM_FPS")
    if wanted:
        try:
            fps = float(wanted)
        except ValueError:
            fps = 0.0
        if 1.0 <= fps <= 120.0:
            return fps
        if warn:
            logging.getLogger(__name__).warning("RODER_STREAM_FPS=%r is not a number from 1 to 120; ignored", wanted)
    return None
