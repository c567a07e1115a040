"""`roder providers login NAME` for an `[auth.NAME]` OAuth sign-in, as a user runs it: the device
code printed for another device, or the browser address with a loopback redirect; the token then
used by `roder -p`, shown as "signed in", and revoked by `roder providers logout NAME`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from roder_core.testing.fake_server import ThreadedFakeServer
from tests.oauth_server import OAuthTestServer

pytestmark = pytest.mark.e2e


def environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["RODER_HOME"] = str(home)
    return env


def roder(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "roder_tui.cli", *args], cwd=cwd, env=environment(home), capture_output=True, text=True, timeout=60
    )


def configure(home: Path, issuer: str, base_url: str) -> None:
    (home / "config.toml").write_text(
        f'[providers.fk]\ndialect = "chat-completions"\nbase_url = "{base_url}"\nmodels = ["m1"]\n'
        f'[auth.fk-login]\nissuer = "{issuer}"\nclient_id = "roder-test-client"\nprovider = "fk"\n',
        encoding="utf-8",
    )


def test_device_sign_in_then_one_shot_uses_the_token_and_logout_revokes_it(roder_home: Path, workspace: Path) -> None:
    with OAuthTestServer(pending_polls=1) as auth, ThreadedFakeServer([{"text": "Hello, signed in."}]) as model:
        configure(roder_home, auth.issuer, model.base_url)
        login = roder(roder_home, workspace, "providers", "login", "fk-login", "--device")
        assert login.returncode == 0, login.stderr
        assert f"open {auth.issuer}/activate?user_code=WDJB-MJHT\nand enter the code: WDJB-MJHT" in login.stdout
        assert "signed in to fk-login for provider fk" in login.stdout
        token = auth.state.issued[-1]
        assert token not in login.stdout + login.stderr

        listing = roder(roder_home, workspace, "providers", "list")
        assert "signed in" in next(line for line in listing.stdout.splitlines() if line.startswith("fk "))

        done = roder(roder_home, workspace, "-p", "hi", "--provider", "fk", "--model", "m1")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "Hello, signed in."
        assert model.calls[-1].headers["authorization"] == f"Bearer {token}"

        logout = roder(roder_home, workspace, "providers", "logout", "fk-login")
        assert logout.returncode == 0, logout.stderr
        assert logout.stdout.strip() == "signed out of fk-login; the server revoked the tokens"
        assert token in auth.state.revoked
    assert "oauth" not in json.loads((roder_home / "data" / "credentials.json").read_text())


def test_browser_sign_in_prints_the_address_and_finishes_on_the_redirect(roder_home: Path, workspace: Path) -> None:
    with OAuthTestServer(offer_device=False) as auth:
        configure(roder_home, auth.issuer, "http://127.0.0.1:9/v1")
        child = subprocess.Popen(
            [sys.executable, "-m", "roder_tui.cli", "providers", "login", "fk-login", "--no-browser"],
            cwd=workspace,
            env=environment(roder_home),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        assert "(open it in a browser on this machine)" in child.stdout.readline()
        address = child.stdout.readline().strip()
        assert address.startswith(f"{auth.issuer}/authorize?")
        landed = httpx.get(address, follow_redirects=True, trust_env=False)  # the test is the browser
        assert "Signed in." in landed.text
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        assert "signed in to fk-login" in out
    record = json.loads((roder_home / "data" / "credentials.json").read_text())["oauth"]["fk-login"]
    assert record["access_token"] == auth.state.issued[-1] and record["provider"] == "fk"


def test_ctrl_c_while_waiting_stores_nothing(roder_home: Path, workspace: Path) -> None:
    with OAuthTestServer(pending_polls=10_000) as auth:
        configure(roder_home, auth.issuer, "http://127.0.0.1:9/v1")
        child = subprocess.Popen(
            [sys.executable, "-m", "roder_tui.cli", "providers", "login", "fk-login"],
            cwd=workspace,
            env=environment(roder_home),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stderr is not None
        assert "waiting for the sign-in" in child.stderr.readline()
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
    assert child.returncode == 1
    assert err.strip().splitlines()[-1] == "roder: sign-in stopped; nothing stored"
    assert "Traceback" not in err
    assert not (roder_home / "data" / "credentials.json").exists()


def test_a_sign_in_without_an_issuer_names_the_setting(roder_home: Path, workspace: Path) -> None:
    (roder_home / "config.toml").write_text('[auth.fk-login]\nclient_id = "x"\n', encoding="utf-8")
    login = roder(roder_home, workspace, "providers", "login", "fk-login")
    assert login.returncode == 2
    assert login.stderr.strip() == (
        "roder: no issuer is configured for the fk-login sign-in: set issuer and client_id under [auth.fk-login] "
        "in config.toml; nothing stored"
    )
