"""``/cost`` (and its alias ``/usage``): what a thread has used so far, in a few lines.

The status bar shows the last request's context and the running cost; this answers the
questions a user asks at the end of a session (as Claude Code's ``/cost`` and Codex's
``/status`` do): how many tokens went in and out over every turn, how much of that was read
from the prompt cache, what it cost (or that the model's price is not known, rather than a
misleading $0), and how long the turns took. It is built by the runtime so every client (the
app, ``roder attach``, ``roder web``, the app server) shows the same figures.
"""

from __future__ import annotations

from roder_core.ir import ModelProfile, Thread, TurnStatus, Usage


def usage_report(thread: Thread, profile: ModelProfile | None) -> str:
    """The report for ``thread``; ``profile`` is its current model's (None when unknown)."""
    usage = thread.usage
    counted = [t for t in thread.turns if t.status != TurnStatus.IN_PROGRESS]
    running = len(thread.turns) - len(counted)
    estimated = " (estimated: the provider reported none)" if usage.estimated else ""
    lines = [
        f"model: {thread.provider}/{thread.model}" if thread.provider else f"model: {thread.model or 'not chosen'}",
        f"input: {_count(usage.input_tokens)} tokens{_cache(usage)}{estimated}",
        f"output: {_count(usage.output_tokens)} tokens"
        + (f" ({_count(usage.reasoning_tokens)} reasoning)" if usage.reasoning_tokens else ""),
        f"cost: {_cost(usage, profile)}",
    ]
    last = next((t.usage for t in reversed(thread.turns) if t.usage.total_tokens), None)
    if last is not None and profile is not None and profile.context_window:
        used, window = last.input_tokens + last.output_tokens, profile.context_window
        lines.append(f"context: {_count(used)} of {_count(window)} ({used * 100 // window}%) in the last request")
    spent = sum((t.completed_at or t.started_at) - t.started_at for t in counted)
    calls = sum(t.model_calls for t in thread.turns)
    turns = f"turns: {len(counted)}" + (f" (+{running} running, not counted yet)" if running else "")
    lines.append(f"{turns}, {calls} model call{'s' if calls != 1 else ''}, {_duration(spent)} in turns")
    return "\n".join(lines)


def _count(tokens: int) -> str:
    if tokens >= 1_000_000:
        return f"{tokens / 1_000_000:.1f}M"
    return f"{tokens / 1000:.1f}k" if tokens >= 1000 else str(tokens)


def _cache(usage: Usage) -> str:
    parts = []
    if usage.cached_input_tokens:
        parts.append(f"{_count(usage.cached_input_tokens)} read from the cache")
    if usage.cache_write_tokens:
        parts.append(f"{_count(usage.cache_write_tokens)} written to it")
    return f" ({', '.join(parts)})" if parts else ""


def _cost(usage: Usage, profile: ModelProfile | None) -> str:
    if usage.cost_usd:
        return f"${usage.cost_usd:.4f}"
    priced = profile is not None and (profile.input_price or profile.output_price)
    if priced or not usage.total_tokens:
        return "$0.0000"
    return 'not known (no price for this model; set input_price and output_price under [models."PROVIDER/MODEL"])'


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m{rest:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"
