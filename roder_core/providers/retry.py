"""When to try a model call again, and how long to wait first.

Exponential backoff with jitter, bounded in attempts and in wait; a provider's ``Retry-After``
(or OpenAI's ``retry-after-ms``) wins over the computed delay, and one longer than
``max_retry_after`` is not waited for at all: the call fails at once with the provider's hint.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from roder_core.errors import InferenceError


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 4
    base_delay: float = 0.5
    max_delay: float = 20.0
    max_retry_after: float = 60.0

    def delay(
        self,
        retries_done: int,
        error: InferenceError,
        *,
        rand: Callable[[], float] = random.random,
    ) -> float | None:
        """Seconds to wait before the next attempt, or None to give up and raise ``error``.

        A turn's deadline is not consulted: past it the model is still called to wrap up
        (seed 004's finalization reserve), and that call deserves its retries too.
        """
        if not error.retryable or retries_done >= self.max_retries:
            return None
        if error.retry_after is not None:
            if error.retry_after > self.max_retry_after:
                return None
            wait = error.retry_after
        else:
            ceiling = min(self.max_delay, self.base_delay * 2**retries_done)
            wait = ceiling / 2 + rand() * ceiling / 2  # "equal jitter": never less than half
        return wait


def parse_retry_after(headers: Mapping[str, str], now: Callable[[], float] = time.time) -> float | None:
    """Seconds from ``retry-after-ms``, ``retry-after`` (seconds or an HTTP date), else None."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(float(millis) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime  # the rare HTTP-date form

    try:
        return max(parsedate_to_datetime(value).timestamp() - now(), 0.0)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
