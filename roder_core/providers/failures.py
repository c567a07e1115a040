"""Turning what went wrong on the wire into one readable, typed, key-free line.

Every failure becomes an ``InferenceError`` with a kind (auth, rate_limit, context_overflow,
bad_request, timeout, server, network, stream_dropped), a retryable flag the retry loop obeys and
a message that names the provider and what to do. Provider error bodies are untrusted text that
can echo a (partly masked) key, so messages pass through ``scrub`` before they leave.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from roder_core import bounded_json
from roder_core.errors import InferenceError, InferenceErrorKind
from roder_core.providers.limits import context_limit_from

MAX_DETAIL = 300

_KEYLIKE = re.compile(r"(?i)(bearer\s+\S+|\b(?:sk|pk|rk|gsk|xai|sk-ant|sk-or)-[A-Za-z0-9_\-*.]{6,}|\bAIza[0-9A-Za-z_\-]{20,})")

#: Phrases providers use when the prompt is larger than the model's window.
_OVERFLOW_HINTS = (
    "context_length_exceeded",
    "context length",
    "context window",
    "maximum context",
    "prompt is too long",
    "too many tokens",
    "input is too long",
    "exceeds the context",
    "reduce the length",
    "request_too_large",
    "exceeds the available context size",
    "exceed_context_size",
    "maximum model length",
)

_RETRYABLE_KINDS = frozenset({"rate_limit", "server", "timeout", "network", "stream_dropped"})


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """Remove secret values and anything shaped like a key or bearer token from ``text``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    return _KEYLIKE.sub("[redacted]", text)


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 1] + "…"


def error_detail(body: str) -> tuple[str, str]:
    """(message, code-or-type) from an OpenAI- or Anthropic-shaped error body, else the raw text."""
    try:
        data: Any = bounded_json.loads(body)
    except (ValueError, TypeError):
        return body.strip(), ""
    if isinstance(data, list) and data and isinstance(data[0], dict):
        data = data[0]  # some gateways wrap errors in a list
    error = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(error, str):
        return error, ""
    if not isinstance(error, dict):
        return body.strip(), ""
    message = error.get("message") or error.get("detail") or json.dumps(error)
    code = error.get("code") or error.get("type") or ""
    return str(message), str(code)


def is_overflow(message: str, code: str = "") -> bool:
    text = f"{code} {message}".lower()
    return any(hint in text for hint in _OVERFLOW_HINTS)


def _not_found(detail: str, base_url: str | None) -> str:
    """What a 404 most likely means: a ``base_url`` without its API version (the server's web
    pages answered) unless the provider named the model."""
    from urllib.parse import urlsplit

    if base_url and "model" not in detail.lower() and not re.search(r"/v\d", urlsplit(base_url).path):
        root = base_url.rstrip("/")
        return f"not found (is base_url right? {root} has no /v1; compatible servers usually answer under {root}/v1)"
    return "not found (is the model name right? see `roder models`)"


class ErrorFactory:
    """Builds InferenceErrors for one provider: its name, key env var and secret values."""

    def __init__(self, provider: str, api_key_env: str | None = None, secrets: Iterable[str] = ()) -> None:
        self.provider = provider
        self.api_key_env = api_key_env
        #: What an auth error tells the user to check (the variable, or the stored key).
        self.key_hint = api_key_env
        self._secrets = tuple(s for s in secrets if s)

    def use_key(self, value: str, hint: str | None) -> None:
        """Scrub ``value`` from every later message too; auth errors now point at ``hint``."""
        if value and value not in self._secrets:
            self._secrets += (value,)
        self.key_hint = hint

    def make(
        self,
        kind: InferenceErrorKind,
        what: str,
        detail: str = "",
        *,
        status: int | None = None,
        retry_after: float | None = None,
        retryable: bool | None = None,
        context_limit: int | None = None,
    ) -> InferenceError:
        parts = [f"{self.provider}: {what}"]
        if status is not None:
            parts[0] += f" (HTTP {status})"
        if detail:
            parts.append(_one_line(scrub(detail, self._secrets)))
        message = ": ".join(parts)
        hint = self._hint(kind)
        if hint and hint.removeprefix("check ") not in message:  # ("X is not set: ... (check X)" said it twice)
            message += f" ({hint})"
        return InferenceError(
            message,
            kind,
            retryable=kind in _RETRYABLE_KINDS if retryable is None else retryable,
            status=status,
            retry_after=retry_after,
            context_limit=context_limit,
        )

    def _hint(self, kind: str) -> str:
        if kind == "auth":
            return f"check {self.key_hint}" if self.key_hint else "check the provider's credentials"
        if kind == "context_overflow":
            return "the conversation no longer fits the model's context window; compact it or start a new thread"
        return ""

    def from_status(
        self, status: int, body: str, retry_after: float | None = None, *, base_url: str | None = None
    ) -> InferenceError:
        """Classify an HTTP error response (``base_url``: the endpoint, for a 404's hint)."""
        message, code = error_detail(body)
        if status in (401, 403):
            return self.make("auth", "the provider rejected the credentials", message, status=status)
        if status == 429:
            if "quota" in f"{code} {message}".lower() and "rate" not in code.lower():
                return self.make("rate_limit", "quota exhausted", message, status=status, retryable=False)
            return self.make("rate_limit", "rate limited", message, status=status, retry_after=retry_after)
        if status == 408:
            return self.make("timeout", "the request timed out", message, status=status, retry_after=retry_after)
        if status == 413 or (400 <= status < 500 and is_overflow(f"{message} {body}", code)):
            return self.make(
                "context_overflow",
                "the request is too large for the model",
                message,
                status=status,
                context_limit=context_limit_from(f"{message} {body}"),
            )
        if status == 404:
            return self.make("bad_request", _not_found(f"{message} {body}", base_url), message, status=status)
        if 400 <= status < 500:
            return self.make("bad_request", "the request was refused", message, status=status)
        return self.make("server", "the provider failed", message, status=status, retry_after=retry_after)

    def from_stream_error(self, code: str, message: str) -> InferenceError:
        """Classify an error the provider sent inside a 200 stream (an SSE error event)."""
        lowered = code.lower()
        if is_overflow(message, code):
            return self.make(
                "context_overflow", "the request is too large for the model", message, context_limit=context_limit_from(message)
            )
        if "rate_limit" in lowered or lowered == "429":
            return self.make("rate_limit", "rate limited", message)
        if "auth" in lowered or "permission" in lowered or lowered in ("401", "403"):
            return self.make("auth", "the provider rejected the credentials", message)
        if "invalid" in lowered or "not_found" in lowered or lowered.startswith("4"):
            return self.make("bad_request", "the request was refused", message)
        return self.make("server", "the provider failed mid-stream", message)

    def from_transport(self, exc: BaseException, *, streaming: bool, base_url: str) -> InferenceError:
        """Classify an httpx exception; ``streaming`` says whether the response had begun."""
        name = type(exc).__name__
        detail = str(exc) or name
        if "Timeout" in name:
            what = "no data from the provider within the idle timeout" if streaming else "timed out"
            return self.make("timeout", what, detail)
        if streaming:
            return self.make("stream_dropped", "the stream broke off", detail)
        return self.make("network", f"cannot reach {base_url}", detail)

    def stream_ended(self) -> InferenceError:
        return self.make("stream_dropped", "the stream ended before the response was complete")
