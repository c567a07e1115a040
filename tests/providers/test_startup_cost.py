"""What the provider transport avoids at start: httpx's CLI imports and TLS for plain http."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from roder_core.providers.transport import needs_tls


def test_httpx_loads_without_its_command_line_dependencies() -> None:
    probe = (
        "import sys\n"
        "from roder_core.brokers.httpx_loader import load_httpx\n"
        "httpx = load_httpx()\n"
        "assert httpx.AsyncClient is not None\n"
        "print(sorted(m for m in ('rich.console', 'click', 'pygments') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_httpx_command_line_still_works_through_the_stand_in() -> None:
    probe = (
        "import sys\n"
        "from roder_core.brokers.httpx_loader import load_httpx\n"
        "load_httpx()\n"
        "sys.argv = ['httpx', '--help']\n"
        "sys.modules['httpx._main'].main()\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "Usage: httpx" in done.stdout


@pytest.mark.parametrize(
    ("url", "trust_env", "proxy", "expected"),
    [
        ("https://api.openai.com/v1", True, None, True),
        ("http://127.0.0.1:8000/v1", False, None, False),
        ("http://127.0.0.1:8000/v1", False, "http://proxy.invalid:3128", False),
        ("http://models.lan:8000/v1", True, None, False),
        ("http://models.lan:8000/v1", True, "https://proxy.invalid:3128", True),
        ("HTTPS://models.lan/v1", True, None, True),
    ],
)
def test_tls_only_where_a_request_can_use_it(
    monkeypatch: pytest.MonkeyPatch, url: str, trust_env: bool, proxy: str | None, expected: bool
) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    if proxy is not None:
        monkeypatch.setenv("HTTP_PROXY", proxy)
    assert needs_tls(url, trust_env) is expected


@pytest.mark.skipif(
    importlib.util.find_spec("trio") is None, reason="trio is not installed (Selenium, a test dependency, brings it)"
)
def test_httpx_loads_its_pool_without_trio_and_trio_still_imports_afterwards() -> None:
    probe = (
        "import sys\n"
        "from roder_core.brokers.httpx_loader import load_httpx\n"
        "load_httpx()\n"
        "import httpcore._synchronization as sync\n"
        "print('httpcore' in sys.modules, 'trio' in sys.modules, sync.trio is None)\n"
        "import trio\n"
        "print(trio.Lock is not None)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "False", "True", "True"]
