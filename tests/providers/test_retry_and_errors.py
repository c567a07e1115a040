"""Backoff arithmetic, Retry-After parsing and error classification (no key ever in a message)."""

from __future__ import annotations

import time
from email.utils import formatdate

import pytest

from roder_core.errors import InferenceError
from roder_core.providers.failures import ErrorFactory, scrub
from roder_core.providers.retry import RetryPolicy, parse_retry_after

KEY = "sk-proj-SUPERSECRETKEYVALUE1234567890"


def test_backoff_grows_exponentially_with_jitter_and_is_bounded() -> None:
    policy = RetryPolicy(max_retries=6, base_delay=1.0, max_delay=8.0)
    error = InferenceError("x", "server", retryable=True)
    lows = [policy.delay(n, error, rand=lambda: 0.0) for n in range(6)]
    highs = [policy.delay(n, error, rand=lambda: 0.999999) for n in range(6)]
    assert lows == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert [round(h or 0, 3) for h in highs] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert policy.delay(6, error) is None  # attempts are bounded


def test_retry_after_wins_but_a_too_long_one_is_not_waited_for() -> None:
    policy = RetryPolicy(max_retry_after=30.0)
    assert policy.delay(0, InferenceError("x", "rate_limit", retryable=True, retry_after=7.0)) == 7.0
    assert policy.delay(0, InferenceError("x", "rate_limit", retryable=True, retry_after=300.0)) is None


def test_no_retry_for_non_retryable_errors() -> None:
    assert RetryPolicy().delay(0, InferenceError("x", "auth")) is None
    assert RetryPolicy().delay(0, InferenceError("x", "bad_request")) is None


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    now = time.time()
    in_ten = formatdate(now + 10, usegmt=True)
    assert 8.0 <= (parse_retry_after({"retry-after": in_ten}, now=lambda: now) or 0) <= 10.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


@pytest.mark.parametrize(
    ("status", "body", "kind", "retryable"),
    [
        (
            401,
            '{"error": {"message": "Incorrect API key provided: sk-proj-SUPE****7890", "code": "invalid_api_key"}}',
            "auth",
            False,
        ),
        (403, '{"type": "error", "error": {"type": "permission_error", "message": "nope"}}', "auth", False),
        (429, '{"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}', "rate_limit", True),
        (429, '{"error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}}', "rate_limit", False),
        (
            400,
            '{"error": {"message": "This model\'s maximum context length is 128000 tokens", "code": "context_length_exceeded"}}',
            "context_overflow",
            False,
        ),
        (
            400,
            '{"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long:'
            ' 210000 tokens > 200000 maximum"}}',
            "context_overflow",
            False,
        ),
        (413, '{"type": "error", "error": {"type": "request_too_large", "message": "too big"}}', "context_overflow", False),
        (400, '{"error": {"message": "Unknown parameter: foo"}}', "bad_request", False),
        (404, '{"error": {"message": "The model gpt-9 does not exist"}}', "bad_request", False),
        (408, "timeout", "timeout", True),
        (500, "<html>oops</html>", "server", True),
        (529, '{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}', "server", True),
    ],
)
def test_status_classification(status: int, body: str, kind: str, retryable: bool) -> None:
    error = ErrorFactory("acme", "ACME_API_KEY", [KEY]).from_status(status, body)
    assert (error.kind, error.retryable, error.status) == (kind, retryable, status)
    message = str(error)
    assert message.startswith("acme: ")
    assert "\n" not in message
    assert "SUPE" not in message
    if kind == "auth":
        assert "check ACME_API_KEY" in message


def test_stream_error_classification() -> None:
    errors = ErrorFactory("acme")
    assert errors.from_stream_error("overloaded_error", "Overloaded").kind == "server"
    assert errors.from_stream_error("rate_limit_exceeded", "slow down").kind == "rate_limit"
    assert errors.from_stream_error("invalid_request_error", "bad").kind == "bad_request"
    assert errors.from_stream_error("context_length_exceeded", "too long").kind == "context_overflow"
    assert errors.from_stream_error("server_error", "boom").retryable


def test_scrub_removes_exact_keys_and_key_shaped_tokens() -> None:
    text = f"key {KEY} and Bearer abc.def and sk-ant-api03-abcdefghijkl and AIza{'x' * 30}"
    cleaned = scrub(text, [KEY])
    assert "SUPERSECRET" not in cleaned
    assert "abc.def" not in cleaned
    assert "sk-ant-api03" not in cleaned
    assert "AIza" not in cleaned


def test_long_detail_is_one_bounded_line() -> None:
    error = ErrorFactory("acme").from_status(500, "x\n" * 2000)
    assert "\n" not in str(error)
    assert len(str(error)) < 400
