"""Runs the app as ``python -m roder_tui.cli`` does (``run``), with a probe of its main thread's CPU per key.

    RODER_MODAL_PROBE=FILE python bench/modal_probe.py --provider mock

For each key that reaches the app (a typed character, ctrl+p, F1), the main thread's CPU
(``time.thread_time``) from the key event to the end of writing the first frame that shows what
the key was waiting for (the character; the palette's placeholder; help's text), one line per key
appended to FILE: ``key<TAB>seconds``. It is the steadier figure on a loaded machine: the wall
time waits for the scheduler, this counts only the app's own work for the key. Used by
``tui_modal_open.py``; it patches the app of whichever checkout is first on ``sys.path``, so a
baseline checkout is measured the same way.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

#: What shows that a key was answered, for the keys that open a panel; a character shows itself.
MARKERS = {"ctrl+p": "earch for commands", "f1": "this help"}
CONTROL_SEQUENCE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def install(out: str) -> None:
    from textual import events

    from roder_tui.app import RoderApp
    from roder_tui.screen_diff import ScreenDiff

    on_event = RoderApp.on_event
    write = ScreenDiff.write
    #: Keys waiting for their frame, oldest first (a key typed before the last one's frame
    #: showed gets its own entry; a frame answering both ends both).
    pending: list[dict[str, Any]] = []
    #: RODER_MODAL_PROFILE=DIR: a cProfile of each measured key's span too, DIR/N-key.prof.
    profile_dir = os.environ.get("RODER_MODAL_PROFILE")
    profiled = 0

    async def probed_on_event(self: Any, event: events.Event) -> None:
        if isinstance(event, events.Key) and not event.is_forwarded:
            marker = MARKERS.get(event.key) or (event.character if event.is_printable else None)
            if marker:
                entry: dict[str, Any] = {"key": event.key, "marker": marker}
                if profile_dir and not pending:
                    import cProfile

                    entry["profile"] = cProfile.Profile(time.thread_time)  # this thread's CPU, as the figure
                    entry["profile"].enable()
                entry["start"] = time.thread_time()
                pending.append(entry)
        await on_event(self, event)

    def probed_write(self: ScreenDiff, data: str) -> None:
        nonlocal profiled
        write(self, data)
        if not pending:
            return
        text = CONTROL_SEQUENCE.sub("", data)
        for entry in [entry for entry in pending if entry["marker"] in text]:
            pending.remove(entry)
            spent = time.thread_time() - entry["start"]
            if (profile := entry.get("profile")) is not None:
                profile.disable()
                profiled += 1
                profile.dump_stats(os.path.join(str(profile_dir), f"{profiled}-{entry['key']}.prof"))
            with open(out, "a", encoding="utf-8") as file:
                file.write(f"{entry['key']}\t{spent:.6f}\n")

    RoderApp.on_event = probed_on_event  # type: ignore[method-assign]
    ScreenDiff.write = probed_write  # type: ignore[method-assign]


if __name__ == "__main__":
    install(os.environ["RODER_MODAL_PROBE"])
    from roder_tui.cli import run

    run()  # the arguments after this script's name, as ``python -m roder_tui.cli`` takes them
