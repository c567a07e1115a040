"""What the local pool's fork server imports once, before it forks any worker.

Each worker of ``roder batch``'s local pool is forked from that server (``batch.pool``), so it
starts with the rollout code, the runtime and the installed extensions already imported. Spawned
workers imported all of it again, each one, and their first rollout paid for it: over a second
of CPU per worker, which a batch of short rollouts on a busy machine waits for in full.
"""

from __future__ import annotations

import concurrent.futures.thread
import contextlib
from importlib.metadata import entry_points

import roder_core.batch.worker
import roder_core.brokers.host
import roder_core.runtime.bootstrap
import roder_core.runtime.runners
import roder_core.threads.sessions
from roder_core.kernel.distribution import ENTRY_POINT_GROUP
from roder_core.runtime.first_use import import_command_parser, import_model_client

#: Imported here for the workers forked from this process (what a rollout imports lazily).
PRELOADED = (
    roder_core.batch.worker,
    roder_core.brokers.host,
    roder_core.runtime.bootstrap,
    roder_core.runtime.runners,
    roder_core.threads.sessions,
    concurrent.futures.thread,
)


def import_extensions() -> None:
    """Import every installed extension's module, as a runtime's start would. An extension that
    fails to import is left for the runtime, which reports it; the workers import lazily anyway."""
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        with contextlib.suppress(Exception):
            entry.load()


import_extensions()
import_model_client()
import_command_parser()
