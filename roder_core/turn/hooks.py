"""Runs lifecycle hooks at each point of the turn loop, failing closed where it gates.

A hook that raises, times out, blocks or rewrites the payload into something invalid at a
gating point (before turn, context, before provider request, tool call before) stops that action
and says why. At observing points (turn end, session start/end, tool result after) a failing
hook is logged and the turn goes on. Payloads are the typed models of ``kernel.hook_payloads``.

This is also the one place a payload is handed to a hook, so it is where secrets are taken out:
every hook sees every point's payload redacted (the user's prompt, the model's last message,
tool arguments, a request, the items to compact), unless it is one of Roder's own in-process
hooks that says it needs the values (``sees_raw_payload``: it rewrites a request, it reads
files by the paths it is given). A command, an HTTP endpoint, a process extension or a judge
model never gets a secret the transcript would not show. A rewrite made from the redacted view
keeps the real values wherever it kept what it was shown (the field whole, or the text it
appended to), so a hook adding context does not turn the user's secret into a marker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from roder_core.brokers.secrets import redact_data
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
        self,
        hooks: list[Hook],
        timeout: float = 30.0,
        transcript_path: Callable[[str], str | None] | None = None,
        redact: Callable[[str], str] | None = None,
    ) -> None:
        self._hooks = hooks
        self.timeout = timeout
        #: thread id -> its transcript file, handed to hooks as ``transcript_path`` (Claude Code's field).
        self._transcript_path = transcript_path
        #: The run's redaction (known secret values, token formats); None: nothing secret is known.
        self._redact = redact

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
        shown: dict[str, Any] | None = None  # the redacted view, made when a hook first needs it
        for hook in self._hooks:
            if point not in hook.points():
                continue
            hook_id = hook.id()
            raw = bool(getattr(hook, "sees_raw_payload", False)) or self._redact is None
            if not raw and shown is None:
                shown = self._redacted(view)
            given = view if raw or shown is None else shown
            try:
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for swallows a cancel that
                # arrives as the hook finishes, and an interrupt right after turn/start was lost.
                async with asyncio.timeout(self.timeout):
                    outcome = await hook.run(point, {**given, **extra})
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
            replace = outcome.replace if given is view else _restored(outcome.replace, given, view)
            try:
                payload = type(payload).model_validate({**view, **replace})
            except ValidationError as exc:
                why = f"rewrote the payload wrongly ({_first_problem(exc)})"
                if gating:
                    raise HookBlocked(hook_id, point, f"{why}; denied (fail closed)") from None
                log.warning("hook %s at %s %s; its rewrite is ignored", hook_id, point.value, why)
                continue
            view = payload.hook_view()
            shown = None
        return payload

    def _redacted(self, view: dict[str, Any]) -> dict[str, Any]:
        """``view`` with every string in it redacted, models included (kept of their type)."""
        assert self._redact is not None
        return {name: _redacted_value(value, self._redact) for name, value in view.items()}


def _redacted_value(value: Any, redact: Callable[[str], str]) -> Any:
    if isinstance(value, BaseModel):
        clean, changed = redact_data(value.model_dump(mode="json"), redact)
        return type(value).model_validate(clean) if changed else value
    return redact_data(value, redact)[0]


def _restored(replace: dict[str, Any], shown: dict[str, Any], raw: dict[str, Any]) -> dict[str, Any]:
    """A rewrite made from the redacted view, with the real values put back where the hook kept
    what it was shown (never where it put something of its own: a marker it moved or made up
    stays a marker)."""
    return {name: _kept(value, shown.get(name), raw.get(name)) if name in shown else value for name, value in replace.items()}


def _kept(new: Any, shown: Any, raw: Any) -> Any:
    if shown is raw:
        return new
    if isinstance(raw, BaseModel):
        as_data = new.model_dump(mode="json") if isinstance(new, BaseModel) else new
        shown_data = shown.model_dump(mode="json") if isinstance(shown, BaseModel) else shown
        return _kept(as_data, shown_data, raw.model_dump(mode="json"))
    if new == shown:
        return raw
    if isinstance(new, str) and isinstance(shown, str) and isinstance(raw, str):
        return raw + new[len(shown) :] if shown and new.startswith(shown) else new
    if isinstance(new, dict) and isinstance(shown, dict) and isinstance(raw, dict):
        return {key: _kept(value, shown[key], raw.get(key)) if key in shown else value for key, value in new.items()}
    if isinstance(new, list) and isinstance(shown, list) and isinstance(raw, list) and len(shown) == len(raw):
        return [_kept(value, shown[i], raw[i]) if i < len(shown) else value for i, value in enumerate(new)]
    return new


def _first_problem(exc: ValidationError) -> str:
    """``field: message`` for the first thing wrong in a rewrite (and how many more)."""
    errors = exc.errors()
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "payload"
    more = f" and {len(errors) - 1} more" if len(errors) > 1 else ""
    return f"{where}: {first['msg']}{more}"
