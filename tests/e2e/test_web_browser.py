"""``roder web`` in a real browser: headless chromium (Debian's) driven through chromium-driver.

The page opens with its token, a prompt is typed, the answer streams in from the loopback model
server, a bash call is approved in the dialog, and screenshots are taken at a desktop and a
phone size (where the narrow layout takes over). A wrong token gets no app.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from roder_core.testing.fake_server import ThreadedFakeServer
from tests.e2e.browser import CHROMEDRIVER, CHROMIUM, Browser
from tests.e2e.host_support import HostProcess, write_local_provider

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(CHROMIUM is None or CHROMEDRIVER is None, reason="chromium and chromium-driver are not installed"),
]
pytest.importorskip("selenium")
pytest.importorskip("textual_serve")

PHONE = (390, 844)
DESKTOP = (1280, 800)


class WebProcess:
    """``roder web --port 0`` with its printed address."""

    def __init__(self, env: dict[str, str], workspace: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "roder_tui.cli", "web", "--port", "0", "--print-qr=false"],
            cwd=workspace,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.output: list[str] = []
        found = threading.Event()
        self.url = ""

        def read() -> None:
            assert self.process.stdout is not None
            for line in self.process.stdout:
                self.output.append(line)
                match = re.search(r"open (http://\S+)", line)
                if match and not self.url:
                    self.url = match.group(1)
                    found.set()
            found.set()

        threading.Thread(target=read, daemon=True).start()
        if not found.wait(90) or not self.url:
            self.stop()
            raise AssertionError("roder web did not start:\n" + "".join(self.output))

    @property
    def base(self) -> str:
        return self.url.split("?", 1)[0]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_the_app_in_a_browser_streams_answers_and_takes_approvals_at_desktop_and_phone_sizes(
    roder_home: Path, workspace: Path, tmp_path: Path
) -> None:
    steps = [
        {
            "text": "Let me check that for you first. STREAMED-IN-BROWSER",
            "tool_calls": [{"name": "bash", "arguments": {"command": "echo browser-$((40+2))"}}],
            "chunk_size": 6,
            "gate": "half",
            "gate_after": 5,
        },
        {"text": "The command printed browser-42. WEB-OK"},
    ]
    with ThreadedFakeServer(steps, models=("my-model",)) as server:
        write_local_provider(roder_home, server.base_url)
        host = HostProcess(
            workspace, roder_home, "--provider", "local", "--model", "my-model", "--mode", "ask", "--sandbox", "off"
        )
        web = browser = None
        try:
            web = WebProcess(host.env, workspace)
            browser = Browser(*DESKTOP)

            browser.open(web.base + "?token=not-the-token")
            page = browser.driver.page_source
            assert "needs its token" in page and "textual-terminal" not in page
            assert browser.driver.get_cookies() == []

            browser.open(web.url)
            assert "token" not in browser.driver.current_url  # swapped for a cookie, gone from the address bar
            cookie = browser.driver.get_cookie("roder_web")
            assert cookie is not None and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
            browser.wait_for("idle")
            browser.type("please check it\n")
            assert server.gate_reached("half").wait(90)
            partial = browser.wait_for("Let me")
            assert "STREAMED-IN-BROWSER" not in partial  # the answer is arriving, not there yet
            server.open_gate("half")
            screen = browser.wait_for("Allow bash?")
            assert "STREAMED-IN-BROWSER" in screen and "echo browser-$((40+2))" in screen
            approval = browser.screenshot(tmp_path / "desktop-approval.png")
            browser.type("y")
            screen = browser.wait_for("WEB-OK")
            assert "browser-42" in screen
            desktop = browser.screenshot(tmp_path / "desktop.png")
            wide = browser.columns
            assert wide > 100

            browser.emulate_phone(*PHONE)
            screen = browser.wait_for(lambda s: 0 < browser.columns <= 50 and "WEB-OK" in s and "idle" in s.splitlines()[-1])
            assert "Threads" not in screen  # the narrow layout: no sidebar, the answer at full width
            assert "Ask anything" in screen  # the prompt is on screen, above the status bar
            phone = browser.screenshot(tmp_path / "phone.png")
            for shot in (approval, desktop):
                assert _png_size(shot)[0] >= DESKTOP[0] * 0.9
            assert _png_size(phone) == PHONE  # the phone viewport, in CSS pixels
            _keep(tmp_path)
        finally:
            if browser is not None:
                browser.close()
            if web is not None:
                web.stop()
            host.stop()


@contextlib.contextmanager
def web_session(
    roder_home: Path, workspace: Path, steps: list[dict[str, Any]], size: tuple[int, int]
) -> Iterator[tuple[ThreadedFakeServer, Browser, WebProcess]]:
    """The loopback model server playing ``steps``, a host on it, ``roder web`` on the host and a
    browser of ``size`` (not opened yet); all stopped on the way out."""
    with ThreadedFakeServer(steps, models=("my-model",)) as server:
        write_local_provider(roder_home, server.base_url)
        host = HostProcess(workspace, roder_home, "--provider", "local", "--model", "my-model", "--sandbox", "off")
        web = browser = None
        try:
            web = WebProcess(host.env, workspace)
            browser = Browser(*size)
            yield server, browser, web
        finally:
            if browser is not None:
                browser.close()
            if web is not None:
                web.stop()
            host.stop()


def test_on_a_phone_typing_after_a_tap_on_the_transcript_reaches_the_prompt(roder_home: Path, workspace: Path) -> None:
    """At 390x844 a tap on the transcript (to read or scroll) must not take the typing with it:
    the letters typed next show in the prompt and are sent with enter."""
    steps = [{"text": "First answer, long enough to tap on. PHONE-ONE"}, {"text": "Second answer. PHONE-TWO"}]
    with web_session(roder_home, workspace, steps, PHONE) as (server, browser, web):
        browser.emulate_phone(*PHONE)
        browser.driver.execute_cdp_cmd("Emulation.setTouchEmulationEnabled", {"enabled": True, "maxTouchPoints": 5})
        browser.open(web.url)
        browser.wait_for(lambda s: 0 < browser.columns <= 50 and "idle" in s)
        browser.type("first question\n")
        screen = browser.wait_for("PHONE-ONE")
        rows = screen.splitlines()
        answer_row = next(i for i, line in enumerate(rows) if "PHONE-ONE" in line or "First answer" in line)
        row_height = browser.driver.execute_script("return window.innerHeight") / len(rows)
        browser.tap(60, (answer_row + 0.5) * row_height)  # on the answer, in the transcript
        browser.painted()
        assert any(re.search(r"\[<0;\d+;\d+M", message) for message in browser.sent())  # the app got the tap as a click
        browser.type("typed-after-tap")
        browser.wait_for(lambda s: any("typed-after-tap" in line for line in s.splitlines()[-6:]))  # in the prompt
        browser.type("\n")
        browser.wait_for("PHONE-TWO")
        assert "typed-after-tap" in json.dumps(server.calls[-1].json["messages"])  # sent as the prompt


def test_a_slash_command_typed_at_speed_runs_as_typed(roder_home: Path, workspace: Path) -> None:
    """The page sends each key in its own message, so enter can reach the prompt before the
    suggestions follow the last letters: ``/cost`` then enter must run /cost (it used to
    accept ``/c``'s first suggestion over the last letters: ``/co/clear``, an unknown command)."""
    steps = [{"text": "An answer. SPEED-ONE", "usage": {"input_tokens": 1200, "output_tokens": 30}}]
    with web_session(roder_home, workspace, steps, DESKTOP) as (_, browser, web):
        browser.open(web.url)
        browser.wait_for("idle")
        browser.type("first question\n")
        browser.wait_for("SPEED-ONE")
        browser.type("/cost\n")
        screen = browser.wait_for(lambda s: "/cost · esc to close" in s or "unknown command" in s)
        assert "unknown command" not in screen
        assert "input: 1.2k tokens" in screen


def _keep(folder: Path) -> None:
    """``RODER_SCREENSHOTS=DIR`` keeps the screenshots (they are in the test's temp folder)."""
    import os

    target = os.environ.get("RODER_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        for shot in folder.glob("*.png"):
            shutil.copy(shot, Path(target) / shot.name)
