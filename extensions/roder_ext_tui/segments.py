"""Built-in status segments, left to right in registration order.

``priority`` decides what is dropped first when the terminal is narrow (lowest first); on a
50-column phone only activity, mode and model remain. The state dict the app passes holds:
``provider model mode sandbox context_tokens context_window cost_usd cache_read_tokens
cache_write_tokens cache_share cwd git_branch activity elapsed narrow``.
"""

from __future__ import annotations

import os
from typing import Any

from roder_core.ir import Usage
from roder_core.kernel.services import StatusSegment, StatusView


def cache_state(last: Usage | None, total: Usage) -> dict[str, Any]:
    """The cache keys of the state dict: the thread's cache reads and writes, and the share of the
    latest request's prompt read from the cache."""
    share = last.cached_input_tokens / last.input_tokens if last is not None and last.input_tokens else None
    return {"cache_read_tokens": total.cached_input_tokens, "cache_write_tokens": total.cache_write_tokens, "cache_share": share}


class _Segment:
    segment_id = ""

    def id(self) -> str:
        return self.segment_id


class ActivitySegment(_Segment):
    segment_id = "activity"

    def render(self, state: dict[str, Any]) -> StatusView | None:
        activity = state.get("activity") or "idle"
        if state.get("narrow") and activity == "waiting for approval":
            activity = "approve?"  # short, so the model keeps its place on a phone
        elapsed = state.get("elapsed")
        text = f"● {activity}" if activity != "idle" else "○ idle"
        if elapsed is not None and activity != "idle":
            text += f" {int(elapsed)}s"
        style = {"idle": "", "waiting for approval": "bold $warning", "approve?": "bold $warning"}.get(activity, "bold $accent")
        return StatusView(text, priority=95, style=style)


class ModeSegment(_Segment):
    segment_id = "mode"

    def render(self, state: dict[str, Any]) -> StatusView | None:
        mode = state.get("mode")
        if not mode:
            return None
        style = {"plan": "bold $secondary", "bypass": "bold $error", "auto-edit": "bold $warning"}.get(mode, "bold")
        return StatusView(mode, priority=90, style=style)


class ModelSegment(_Segment):
    segment_id = "model"

    def render(self, state: dict[str, Any]) -> StatusView | None:
        model, provider = state.get("model"), state.get("provider")
        if not model:
            return None
        text = model if state.get("narrow") or not provider else f"{provider}/{model}"
        return StatusView(text, priority=85, style="$primary")


class SandboxSegment(_Segment):
    segment_id = "sandbox"

    def render(self, state: dict[str, Any]) -> StatusView | None:
        level = state.get("sandbox")
        if not level:
            return None
        style = "$error" if level == "off" else ""
        return StatusView(f"sandbox:{level}", priority=50, style=style)


class ContextSegment(_Segment):
    segment_id = "context"

    def render(self, state: dict[str, Any]) -> StatusView | None:
        used, window = int(state.get("context_tokens") or 0), int(state.get("context_window") or 0)
        if not used:
            return None
        text = f"{_tokens(used)}"
        style = ""
        if window:
            percent = 100 * used / window
            text += f"/{_tokens(window)} {percent:.0f}%"
            style = "$error" if percent >= 90 else "$warning" if percent >= 75 else ""
        return StatusView(text, priority=70, style=style)


class CostSegment(_Segment):
    segment_id = "cost"

    def render(self, state: dict[str, Any]) -> StatusView | None:
        cost = float(state.get("cost_usd") or 0.0)
        if cost <= 0:
            return None
        return StatusView(f"${cost:.2f}" if cost >= 0.01 else f"${cost:.4f}", priority=40)


class CacheSegment(_Segment):
    """Prompt-cache use: ``cache 94% r1.2M w40k`` (the latest request's prompt share read from
    the cache, then the thread's cache reads and writes). Reads cost about a tenth of fresh input,
    Anthropic's writes a quarter more; the cost segment next to it is the resulting total."""

    segment_id = "cache"

    def render(self, state: dict[str, Any]) -> StatusView | None:
        read, write = int(state.get("cache_read_tokens") or 0), int(state.get("cache_write_tokens") or 0)
        if not read and not write:
            return None
        share = state.get("cache_share")
        text = "cache" + (f" {100 * share:.0f}%" if share is not None else "") + f" r{_tokens(read)}"
        if write:
            text += f" w{_tokens(write)}"
        return StatusView(text, priority=35, style="$text-muted")


class BranchSegment(_Segment):
    segment_id = "git-branch"

    def render(self, state: dict[str, Any]) -> StatusView | None:
        branch = state.get("git_branch")
        return StatusView(f"⎇ {branch}", priority=30) if branch else None


class CwdSegment(_Segment):
    segment_id = "cwd"

    def render(self, state: dict[str, Any]) -> StatusView | None:
        cwd = state.get("cwd")
        if not cwd:
            return None
        return StatusView(home_relative(cwd), priority=20, style="$text-muted")


def home_relative(path: str) -> str:
    """``path`` with the home folder shown as ``~`` (shorter, and the same on every machine)."""
    home = os.path.expanduser("~")
    return "~" + path[len(home) :] if home != "/" and path.startswith(home) else path


def _tokens(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 1000:
        return f"{n / 1000:.1f}k"
    return str(n)


STATUS_SEGMENTS: list[StatusSegment] = [
    ActivitySegment(),
    ModeSegment(),
    ModelSegment(),
    SandboxSegment(),
    ContextSegment(),
    CacheSegment(),
    CostSegment(),
    BranchSegment(),
    CwdSegment(),
]
