"""The services a turn runs with, pinned when it starts: the registry and the hooks made from it.

Plugins change while Roder runs (``Runtime.plugins_changed``): the runtime then makes a new
``ServiceSet`` and hands it to the turns that start after. A turn in flight keeps the set it
started with, so its hooks and tools stay one consistent set from its first event to its last.
What the change removed (a plugin's process extension) is closed when the last turn holding
the old set ends: never under a call.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from roder_core.kernel.registry import ExtensionRegistry
    from roder_core.turn.hooks import HookRunner

log = logging.getLogger(__name__)


class Closing(Protocol):
    """A removed service holding resources (a process)."""

    async def aclose(self) -> None: ...


class ServiceSet:
    def __init__(self, registry: ExtensionRegistry, hooks: HookRunner) -> None:
        self.registry = registry
        self.hooks = hooks
        self._users = 0
        self._retired = False
        self._closing: list[Closing] = []

    def hold(self) -> ServiceSet:
        """A turn starts with this set; ``release`` when it ends."""
        self._users += 1
        return self

    async def release(self) -> None:
        self._users -= 1
        if self._users == 0 and self._retired:
            await self._close()

    async def retire(self, closing: list[Closing]) -> None:
        """A newer set replaced this one: close ``closing`` (what the change removed) now, or
        when the last turn holding this set ends."""
        self._retired = True
        self._closing.extend(closing)
        if self._users == 0:
            await self._close()

    @property
    def users(self) -> int:
        return self._users

    async def _close(self) -> None:
        closing, self._closing = self._closing, []
        for service in closing:
            try:
                await service.aclose()
            except Exception as exc:  # one stuck service must not keep the others running
                log.warning("stopping %s failed: %s", type(service).__name__, exc)
