"""The browser Roder opens for a sign-in (an OAuth authorization page), found as every program
Roder starts outside the sandbox is (``host_programs.system_program``).

The standard library's ``webbrowser`` finds ``xdg-open`` or a browser through the PATH, where a
folder of the workspace may come first (direnv's ``PATH_add``) and hold one a sandboxed command
left there; the browser runs unconfined with the sign-in's address. This is the one way Roder
opens a browser.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading

from roder_core.brokers.host_programs import outside_working_folder, system_program

#: Programs that open an address in the desktop's browser, tried in order (``open`` on macOS).
BROWSER_OPENERS = (
    "xdg-open",
    "open",
    "sensible-browser",
    "x-www-browser",
    "firefox",
    "chromium",
    "chromium-browser",
    "google-chrome",
)


def open_in_browser(url: str) -> bool:
    """Open ``url`` in the user's browser (an OAuth sign-in page); whether one was started.

    ``$BROWSER``, the user's own choice, is honoured only when it names a program found as
    ``system_program`` finds one (a workspace's ``.envrc`` can set it too). Without a desktop
    (no ``DISPLAY`` or ``WAYLAND_DISPLAY``) and no ``$BROWSER`` nothing is started, rather than
    a text browser taking over the terminal: the caller prints the address instead. The browser
    gets the environment without its secrets.
    """
    argv = browser_argv(url)
    if argv is None:
        return False
    from roder_core.brokers.secrets import SecretRedactor, scrubbed_env

    env, _ = scrubbed_env(os.environ, SecretRedactor())
    try:
        child = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    except OSError:
        return False
    threading.Thread(target=child.wait, name="browser-reaper", daemon=True).start()  # no zombie left behind
    return True


def browser_argv(url: str) -> list[str] | None:
    """The command line that opens ``url``: the first usable ``$BROWSER`` entry (a list split
    like the PATH; ``%s`` stands for the address), else the first of ``BROWSER_OPENERS``
    found on a desktop; None when there is none, or when ``url`` is not a web address."""
    if not is_web_address(url):
        return None
    for entry in os.environ.get("BROWSER", "").split(os.pathsep):
        words = shlex.split(entry) if entry.strip() else []
        program = _trusted_program(words[0]) if words else None
        if program is not None:
            args = words[1:]
            return [program, *(a.replace("%s", url) for a in args)] if "%s" in entry else [program, *args, url]
    desktop = sys.platform == "darwin" or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    found = system_program(*BROWSER_OPENERS) if desktop else None
    return [found, url] if found else None


def is_web_address(url: str) -> bool:
    """An http(s) address with a host and nothing a browser could read as more: any other string
    handed to a browser's command line may be one of its options (``--renderer-cmd-prefix=...``
    runs a program in Chromium) or a local file."""
    from urllib.parse import urlsplit

    if url != url.strip() or any(c.isspace() or ord(c) < 32 for c in url):
        return False
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _trusted_program(name: str) -> str | None:
    """``name`` found as ``system_program`` finds one; a path is kept only outside the working
    folder and only when it is a program."""
    if os.sep not in name:
        return system_program(name)
    if not os.path.isabs(name) or not outside_working_folder(name):
        return None
    return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
