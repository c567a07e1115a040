"""Smaller broker pieces: the .gitignore matcher, secret names and redaction, the network
allowlist (against a loopback HTTP server, redirects included)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from roder_core.brokers import BrokerDenied
from roder_core.brokers.gitignore import IgnoreMatcher, parse_rules
from roder_core.brokers.network import AllowlistNetworkBroker, host_allowed
from roder_core.brokers.secrets import SecretRedactor, redact_data, scrubbed_env
from tests.brokers.helpers import QuietHandler, serve

# ---------------------------------------------------------------------------- gitignore


@pytest.mark.parametrize(
    ("rules", "path", "is_dir", "ignored"),
    [
        ("*.log", "a/b/c.log", False, True),
        ("/build", "build", True, True),
        ("/build", "src/build", True, False),
        ("build/", "build", False, False),
        ("build/", "x/build", True, True),
        ("build/", "build/out.js", False, True),
        ("doc/*.txt", "doc/a.txt", False, True),
        ("doc/*.txt", "doc/sub/a.txt", False, False),
        ("doc/**/*.txt", "doc/sub/deep/a.txt", False, True),
        ("**/tmp", "a/b/tmp", True, True),
        ("*.log\n!keep.log", "keep.log", False, False),
        ("# comment\n\n", "anything", False, False),
        ("\\#hash", "#hash", False, True),
        ("file[0-9].txt", "file7.txt", False, True),
    ],
)
def test_gitignore_rules(rules: str, path: str, is_dir: bool, ignored: bool) -> None:
    assert IgnoreMatcher(parse_rules(rules)).ignored(path, is_dir) is ignored


def test_nested_rules_apply_below_their_folder() -> None:
    matcher = IgnoreMatcher(parse_rules("*.tmp", base="src"))
    assert matcher.ignored("src/a.tmp", False)
    assert not matcher.ignored("a.tmp", False)


# ---------------------------------------------------------------------------- secrets


def test_scrubbed_env_drops_secret_names_and_keeps_granted() -> None:
    env = {
        "PATH": "/bin",
        "OPENAI_API_KEY": "k" * 20,
        "NPM_TOKEN": "t" * 20,
        "MY_LLM": "custom-key-value",
        "HOME": "/h",
        "DB_PASSWORD": "p" * 10,
    }
    child, dropped = scrubbed_env(env, SecretRedactor(), passed=["NPM_TOKEN"], extra_secret_names=["MY_LLM"])
    assert child == {"PATH": "/bin", "HOME": "/h", "NPM_TOKEN": "t" * 20}
    assert dropped == ["DB_PASSWORD", "MY_LLM", "OPENAI_API_KEY"]


def test_scrubbed_env_drops_what_the_redactor_knows_by_name_and_by_value() -> None:
    known = SecretRedactor({"CORP_LLM": "corp-key-value-1", "app-server token": "ws-token-value-2"})
    env = {"PATH": "/bin", "CORP_LLM": "corp-key-value-1", "RODER_WS": "ws-token-value-2", "ALIAS": "x corp-key-value-1"}
    child, dropped = scrubbed_env(env, known)
    assert child == {"PATH": "/bin"}
    assert dropped == ["ALIAS", "CORP_LLM", "RODER_WS"]
    kept = scrubbed_env(env, known, passed=["CORP_LLM"])[0]
    assert kept == {"PATH": "/bin", "CORP_LLM": "corp-key-value-1", "ALIAS": "x corp-key-value-1"}


def test_redactor_replaces_known_values_and_token_formats() -> None:
    redactor = SecretRedactor.from_env({"OPENAI_API_KEY": "sk-live-abcdef123456", "SHORT_TOKEN": "abc", "PATH": "/usr/bin"})
    text = "key=sk-live-abcdef123456 path=/usr/bin short=abc gh=ghp_" + "A" * 36
    clean = redactor.redact(text)
    assert "sk-live-abcdef123456" not in clean
    assert "[redacted:OPENAI_API_KEY]" in clean
    assert "/usr/bin" in clean
    assert "short=abc" in clean  # not secrets / too short to redact safely
    assert "ghp_" not in clean
    assert "[redacted]" in clean
    pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----"
    assert redactor.redact(f"x {pem} y") == "x [redacted] y"


def test_redact_data_walks_nested_structures() -> None:
    redactor = SecretRedactor({"X_TOKEN": "secret-value-1"})
    data = {"a": ["ok", {"b": "has secret-value-1 inside"}], "n": 3}
    clean, changed = redact_data(data, redactor)
    assert changed
    assert clean["a"][1]["b"] == "has [redacted:X_TOKEN] inside"
    assert clean["n"] == 3
    _same, changed = redact_data({"a": "fine"}, redactor)
    assert not changed


# ---------------------------------------------------------------------------- network


class _Handler(QuietHandler):
    def do_GET(self) -> None:
        if self.path == "/redirect-out":
            self.send_response(302)
            self.send_header("Location", "http://localhost:1/elsewhere")
            self.end_headers()
            return
        if self.path == "/redirect-in":
            self.send_response(302)
            self.send_header("Location", "/page")
            self.end_headers()
            return
        self.reply(b"<html><title>T</title><body><p>hello</p></body></html>", "text/html; charset=utf-8")


@pytest.fixture
def server() -> Iterator[str]:
    with serve(_Handler) as port:
        yield f"http://127.0.0.1:{port}"


def test_host_patterns() -> None:
    assert host_allowed("docs.python.org", ["*.python.org"])
    assert not host_allowed("python.org.evil.com", ["*.python.org"])
    assert not host_allowed("python.org", ["*.python.org"])
    assert host_allowed("anything.example", ["*"])
    assert not host_allowed("a.com", [])


def test_refusals_explain_how_to_allow() -> None:
    broker = AllowlistNetworkBroker([])
    assert "allow list in config.toml is empty" in (broker.refusal("https://docs.python.org/x") or "")
    broker = AllowlistNetworkBroker(["docs.python.org"])
    assert broker.allowed("https://docs.python.org/3/")
    assert "not in the [network] allow list" in (broker.refusal("https://evil.com/") or "")
    assert "only http and https" in (broker.refusal("file:///etc/passwd") or "")
    assert "network.web" in (AllowlistNetworkBroker(["*"], capabilities=frozenset()).refusal("http://a.b/") or "")


async def test_fetch_allowed_host_and_follow_internal_redirect(server: str) -> None:
    records: list[str] = []
    broker = AllowlistNetworkBroker(["127.0.0.1"], audit=lambda kind, fields: records.append(kind))
    page = await broker.fetch(f"{server}/redirect-in")
    assert page.status == 200
    assert "hello" in page.text
    assert page.url.endswith("/page")
    assert records == ["network.fetch"]


async def test_redirect_to_unlisted_host_is_refused(server: str) -> None:
    broker = AllowlistNetworkBroker(["127.0.0.1"])
    with pytest.raises(BrokerDenied, match="localhost is not in"):
        await broker.fetch(f"{server}/redirect-out")


async def test_fetch_refused_when_list_empty(server: str) -> None:
    with pytest.raises(BrokerDenied, match="network access is off"):
        await AllowlistNetworkBroker([]).fetch(server)


async def test_body_is_capped(server: str) -> None:
    page = await AllowlistNetworkBroker(["127.0.0.1"]).fetch(f"{server}/page", max_bytes=10)
    assert page.truncated
    assert len(page.text) == 10


def test_stream_redactor_catches_values_split_across_chunks() -> None:
    stream = SecretRedactor({"API_KEY": "abcdefghij"}).byte_stream()
    data = b"xx abcdefghij yy abcde" + b"fghij zz"
    for size in (1, 3, 7, 64):
        stream = SecretRedactor({"API_KEY": "abcdefghij"}).byte_stream()
        out = b"".join(stream.feed(data[i : i + size]) for i in range(0, len(data), size)) + stream.flush()
        assert out == b"xx [redacted:API_KEY] yy [redacted:API_KEY] zz", size
