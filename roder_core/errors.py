"""Typed errors that cross layer boundaries and reach the user as one readable line."""

from __future__ import annotations

from typing import Literal

InferenceErrorKind = Literal[
    "auth",
    "rate_limit",
    "context_overflow",
    "bad_request",
    "timeout",
    "server",
    "network",
    "stream_dropped",
    "provider",
    "response_limit",
]


class RoderError(Exception):
    """Base of Roder's own errors; ``str()`` is the user-facing line."""


class InferenceError(RoderError):
    """An engine gave up on a model call. ``kind`` lets the runtime react (context_overflow
    triggers compaction and one retry); ``retryable`` says whether the engine's own retries
    were exhausted on a transient fault."""

    def __init__(
        self,
        message: str,
        kind: InferenceErrorKind = "provider",
        *,
        retryable: bool = False,
        status: int | None = None,
        retry_after: float | None = None,
        context_limit: int | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after
        #: The context window a context_overflow error stated, when it stated one.
        self.context_limit = context_limit


class UnknownProviderError(RoderError):
    pass


class ThreadNotFoundError(RoderError):
    pass


class TurnBusyError(RoderError):
    """A turn is already running on this thread."""


class UnsafePathError(RoderError, ValueError):
    """A path component taken from data (a manifest, a client's params, a task file) that is
    not one plain file name, or a destination outside its root (``brokers.data_paths``)."""


def retry_notice(reason: str, attempt: int, max_attempts: int, wait: float) -> str:
    """One line for people about a model call that failed transiently: what failed and when it
    goes out again (``ModelRetrying.notice``; a host's one-shot client says it from the wire)."""
    return f"{reason}; retry {attempt} of {max_attempts} in {wait:.1f} s"
