"""``/login NAME`` in the app: start an OAuth sign-in through the control plane and show what
the user must do; the outcome arrives later as ``auth/login/completed`` and becomes a toast.

Over SSH or on a phone the device flow is the one that works (the code is typed elsewhere), so
the screen shows the code large and the address in full; a browser sign-in opens the browser of
the machine Roder runs on and shows the address too, for a terminal that is not that machine.
"""

from __future__ import annotations

from typing import Any

from roder_core.server.errors import RpcError
from roder_core.server.protocol_auth import AuthLoginCompleted, AuthLoginParams, AuthLoginResult

USAGE = "usage: /login codex|supergrok [device|browser]"


def instructions(start: AuthLoginResult) -> str:
    """The text of the screen that tells the user how to finish the sign-in."""
    if start.flow == "device":
        where = start.verification_uri_complete or start.verification_uri
        return (
            f"Open {where}\non any device and enter the code:\n\n    {start.user_code}\n\n"
            f"Roder waits for the sign-in and says when it is done; the token will be used for {start.provider}."
        )
    opened = "Your browser was opened at:" if start.browser_opened else "Open this address in a browser on this machine:"
    return f"{opened}\n\n{start.authorization_url}\n\nRoder says when the sign-in is done."


async def start_sign_in(app: Any, arguments: str) -> None:
    """Start ``/login NAME [device|browser]``; errors (no issuer set, server down) are one toast."""
    from roder_core.server.protocol_auth import AUTH_CODEX_LOGIN, AUTH_SUPERGROK_LOGIN

    words = arguments.split()
    specs = {"codex": AUTH_CODEX_LOGIN, "supergrok": AUTH_SUPERGROK_LOGIN}
    if not words or words[0] not in specs or (len(words) > 1 and words[1] not in ("device", "browser")):
        app.notify(USAGE, severity="warning")
        return
    flow = words[1] if len(words) > 1 else None
    try:
        start = await app.client.call(specs[words[0]], AuthLoginParams.model_validate({"flow": flow}))
    except RpcError as exc:
        app.notify(exc.message, title=f"/login {words[0]}", severity="error", timeout=12)
        return
    from roder_tui.screens.info import InfoScreen

    app.push_screen(InfoScreen(f"Sign in to {words[0]}", instructions(start)))


def completion_message(note: AuthLoginCompleted) -> tuple[str, str]:
    """(text, severity) of the toast for a finished sign-in."""
    if note.success:
        return f"signed in to {note.name}", "information"
    return f"sign-in to {note.name} failed: {note.error}", "error"
