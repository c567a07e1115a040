"""A real browser for tests: Debian's headless chromium through chromium-driver (Selenium).

xterm.js draws the app on a canvas, so the page's DOM has no text to read. What the page shows is
reconstructed instead from what it received: a script installed before the page loads records
every frame of the app's WebSocket and every size the page reported, and ``pyte`` (a terminal
emulator) replays them into the screen the page displays.
"""

from __future__ import annotations

import base64
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver") or (
    "/usr/lib/chromium/chromedriver" if Path("/usr/lib/chromium/chromedriver").exists() else None
)

TAP = """
(() => {
  const Real = window.WebSocket;
  window.__roderFrames = [];
  window.__roderSent = [];
  const encode = (bytes) => { let s = ""; for (const b of bytes) s += String.fromCharCode(b); return btoa(s); };
  function Tapped(url, protocols) {
    const socket = protocols === undefined ? new Real(url) : new Real(url, protocols);
    socket.addEventListener("message", (event) => {
      if (typeof event.data !== "string") window.__roderFrames.push(["out", encode(new Uint8Array(event.data))]);
    });
    const send = socket.send.bind(socket);
    socket.send = (data) => {
      try {
        const message = JSON.parse(data);
        window.__roderSent.push(data);
        if (message[0] === "resize") window.__roderFrames.push(["size", message[1].width, message[1].height]);
      } catch (e) {}
      return send(data);
    };
    return socket;
  }
  Tapped.prototype = Real.prototype;
  Object.assign(Tapped, { CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3 });
  window.WebSocket = Tapped;
})();
"""


class Browser:
    def __init__(self, width: int = 1280, height: int = 800) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM or ""
        for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={width},{height}"):
            options.add_argument(argument)
        self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER or ""), options=options)
        self.driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": TAP})
        self._consumed = 0
        self._screen: Any = None
        self._stream: Any = None

    def open(self, url: str) -> None:
        self.driver.get(url)
        self._consumed, self._screen, self._stream = 0, None, None

    def screen(self) -> str:
        """The terminal screen the page shows now, as text lines."""
        import pyte

        frames = self.driver.execute_script("return window.__roderFrames || []")
        for frame in frames[self._consumed :]:
            if frame[0] == "size":
                if self._screen is None:
                    self._screen = pyte.Screen(frame[1], frame[2])
                    self._stream = pyte.ByteStream(self._screen)
                else:
                    self._screen.resize(frame[2], frame[1])
            elif self._stream is not None:
                self._stream.feed(base64.b64decode(frame[1]))
        self._consumed = len(frames)
        return "\n".join(self._screen.display) if self._screen is not None else ""

    @property
    def columns(self) -> int:
        return int(self._screen.columns) if self._screen is not None else 0

    def wait_for(self, check: str | Callable[[str], bool], timeout: float = 90.0) -> str:
        ok = (lambda screen: check in screen) if isinstance(check, str) else check
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if ok(screen):
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{check!r} never showed in the browser; it showed:\n{screen}")

    def type(self, text: str) -> None:
        from selenium.webdriver.common.by import By

        self.driver.find_element(By.CSS_SELECTOR, ".xterm-helper-textarea").send_keys(text)

    def sent(self) -> list[str]:
        """What the page sent the app (stdin, resizes), in order."""
        return list(self.driver.execute_script("return window.__roderSent || []"))

    def resize(self, width: int, height: int) -> None:
        self.driver.set_window_size(width, height)

    def emulate_phone(self, width: int, height: int, scale: float = 1.0) -> None:
        """A phone's viewport (CSS pixels, device scale, mobile), as the DevTools device mode sets it."""
        self.driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": scale, "mobile": True}
        )
        self.driver.execute_script("window.dispatchEvent(new Event('resize'))")

    def tap(self, x: float, y: float) -> None:
        """A finger's tap at (x, y) CSS pixels (touch emulation on): the browser makes the mouse
        events of a tap from it, which xterm.js reports to the app as a click."""
        self.driver.execute_cdp_cmd("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [{"x": x, "y": y}]})
        self.driver.execute_cdp_cmd("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})

    def painted(self) -> None:
        """Wait until the browser has drawn what it received (two animation frames)."""
        self.driver.execute_async_script(
            "const done = arguments[arguments.length - 1]; requestAnimationFrame(() => requestAnimationFrame(done));"
        )

    def screenshot(self, path: Path) -> Path:
        self.painted()
        self.driver.save_screenshot(str(path))
        return path

    def close(self) -> None:
        self.driver.quit()
