"""Plugin changes made by another process reach a running server.

``roder plugin install`` in another terminal writes the install records; a running session used
to hear only of changes made through its own server. ``PluginWatch`` looks at the files the
enabled set is read from (``plugins.enabled.plugin_state_files``: the install records, the
options, a trusted project's settings) every few seconds: one ``stat`` of each, no read, no
thread, nothing written. When one of them changed it calls the same step as a change made
through the server (``methods.plugins.apply_change``, through ``changed_elsewhere``), so the
runtime reloads through the one chokepoint and clients hear ``plugins/changed``. A change made
through this server is marked seen (``seen``), so it is not applied twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from roder_core.settings.paths import RoderPaths

log = logging.getLogger(__name__)

#: Seconds between looks at the files: a change made elsewhere applies within this.
INTERVAL = 2.0

Signature = tuple[tuple[int, int, int] | None, ...]


def signature(files: list[Path]) -> Signature:
    """What tells a rewritten file (records are replaced whole: a new inode), or a missing one."""
    found: list[tuple[int, int, int] | None] = []
    for path in files:
        try:
            stat = os.stat(path)
        except OSError:
            found.append(None)
            continue
        found.append((stat.st_ino, stat.st_mtime_ns, stat.st_size))
    return tuple(found)


class PluginWatch:
    KEY = "plugin-watch"

    def __init__(
        self,
        files: list[Path],
        records: Callable[[], dict[str, Any]],
        on_change: Callable[[list[str]], Awaitable[None]],
        interval: float = INTERVAL,
    ) -> None:
        self.files = files
        self._records = records
        self.on_change = on_change
        self.interval = interval
        self._seen = signature(files)
        #: The install records as last applied, by plugin id: what changed is told by them.
        self.records = records()
        self._task: asyncio.Task[None] | None = None
        #: Held by a change through this server from its first write until it is applied.
        self.lock = asyncio.Lock()

    @classmethod
    def of(cls, paths: RoderPaths, cwd: Path, trusted: bool, on_change: Callable[[list[str]], Awaitable[None]]) -> PluginWatch:
        from roder_core.plugins.enabled import plugin_state_files
        from roder_core.plugins.records import PluginDirs, read_installed

        dirs = PluginDirs.of(paths)
        return cls(
            plugin_state_files(paths, cwd, trusted),
            lambda: {key: record.to_json() for key, record in read_installed(dirs).items()},
            on_change,
        )

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._watch(), name="plugin watch")

    def look(self) -> Signature:
        return signature(self.files)

    def seen(self, applied: Signature) -> None:
        """The files as they were at ``applied`` (looked at before a reload read them) are
        applied; a write after that look is seen as a change at the next look."""
        self._seen = applied
        self.records = self._records()

    def changed_ids(self) -> list[str]:
        """The plugins whose install record was added, changed or removed since the last apply."""
        now = self._records()
        return sorted(key for key in {*now, *self.records} if now.get(key) != self.records.get(key))

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            async with self.lock:
                now = signature(self.files)
                if now == self._seen:
                    continue
                try:
                    await self.on_change(self.changed_ids())  # ends in ``seen``
                except Exception as exc:  # a broken record must not stop the watching
                    log.warning("applying a plugin change made elsewhere failed: %s", exc)
                    self.seen(now)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
