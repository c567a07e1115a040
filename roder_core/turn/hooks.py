"""Runs lifecycle hooks at each point of the turn loop, failing closed where it gates.

A hook that raises, times out, blocks or rewrites the payload into something invalid at a
gating point (before turn, context, before provider request, tool call before) stops that action
and says why. At observing points (turn end, session start/end, tool result after) a failing
hook is logged and the turn goes on. Payloads are the typed models of ``kernel.hook_payloads``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import ValidationError

from roder_core.kernel.hook_payloads import HookPayload
from roder_core.kernel.services import GATING_POINTS, Hook, HookPoint

log = logging.getLogger(__name__)

PayloadT = TypeVar("PayloadT", bound=HookPayload)


class HookBlocked(Exception):
    """A gating hook refused the action (or failed, which counts as refusing)."""

    def __init__(self, hook_id: str, point: HookPoint, reason: str) -> None:
        super().__init__(f"hook {hook_id!r} at {point.value}: {reason}")
        self.hook_id = hook_id
        self.point = point
        self.reason = reason


class HookRunner:
    def __init__(
        self, hooks: list[Hook], timeout: float = 30.0, transcript_path: Callable[[str], str | None] | None = None
    ) -> None:
        self._hooks = hooks
        self.timeout = timeout
        #: thread id -> its transcript file, handed to hooks as ``transcript_path`` (Claude Code's field).
        self._transcript_path = transcript_path

    def has(self, point: HookPoint) -> bool:
        return any(point in hook.points() for hook in self._hooks)

    async def run(self, point: HookPoint, payload: PayloadT) -> PayloadT:
        """Run every hook registered for ``point`` in order; each sees the previous rewrite.

        Returns the (possibly rewritten) payload, of the same model; raises HookBlocked at
        gating points."""
        gating = point in GATING_POINTS
        extra: dict[str, Any] = {}
        if self._transcript_path is not None and payload.thread_id and self.has(point):
            extra["transcript_path"] = self._transcript_path(payload.thread_id)
        view = payload.hook_view()
        for hook in self._hooks:
            if point not in hook.points():
                continue
            hook_id = hook.id()
            try:
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a cancel that
                # arrives as the hook finishes, and an interrupt right after turn/start was lost.
                async with asyncio.timeout(self.timeout):
                    outcome = await hook.run(point, {**view, **extra})
            except asyncio.CancelledError:
                raise
            except TimeoutError:
                if gating:
                    raise HookBlocked(hook_id, point, f"timed out after {self.timeout:g}s; denied (fail closed)") from None
                log.warning("hook %s timed out at %s", hook_id, point.value)
                continue
            except Exception as exc:
                if gating:
                    raise HookBlocked(hook_id, point, f"failed ({type(exc).__name__}: {exc}); denied (fail closed)") from exc
                log.warning("hook %s failed at %s: %s", hook_id, point.value, exc)
                continue
            if outcome is None:
                continue
            if outcome.block and gating:
                raise HookBlocked(hook_id, point, outcome.reason or "blocked")
            if not outcome.replace:
                continue
            try:
                payload = type(payload).model_validate({**view, **outcome.replace})
            except ValidationError as exc:
                why = f"rewrote the payload wrongly ({_first_problem(exc)})"
                if gating:
                    raise HookBlocked(hook_id, point, f"{why}; denied (fail closed)") from None
                log.warning("hook %s at %s %s; its rewrite is ignored", hook_id, point.value, why)
                continue
            view = payload.hook_view()
        return payload


def _first_problem(exc: ValidationError) -> str:
    """``field: message`` for the first thing wrong in a rewrite (and how many more)."""
    errors = exc.errors()
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "payload"
    more = f" and {len(errors) - 1} more" if len(errors) > 1 else ""
    return f"{where}: {first['msg']}{more}"
