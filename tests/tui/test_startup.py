"""The collector, held off by the `roder` script during start-up, comes back frozen-over."""

from __future__ import annotations

import gc
import subprocess
import sys

from roder_tui.startup import end_startup


def test_end_startup_is_a_no_op_when_the_collector_was_never_held_off() -> None:
    frozen = gc.get_freeze_count()
    assert gc.isenabled()
    end_startup()
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen


def test_end_startup_turns_the_collector_back_on_with_startup_objects_frozen() -> None:
    probe = (
        "import gc\n"
        "gc.disable()\n"
        "import roder_core.ir\n"
        "from roder_tui.startup import end_startup\n"
        "end_startup()\n"
        "print(gc.isenabled(), gc.get_freeze_count() > 10_000)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True"]
