"""``/mcp login NAME`` and ``/mcp logout NAME`` in the app: sign in to (out of) an MCP server over
HTTP that asks for OAuth, as ``roder mcp login`` does (``roder_ext_mcp.authorization``).

The browser opens on this machine and the address is shown on a screen of its own (for a
terminal that is not that machine); the sign-in finishes in the background through the loopback
redirect, then the server is restarted over the control plane so its tools arrive, and a toast
says so. The tokens go to this machine's credentials file, so an app attached to a Roder on
another machine is told to sign in there instead.
"""

from __future__ import annotations

from typing import Any

USAGE = "usage: /mcp [login NAME | logout NAME]"


async def mcp_command(app: Any, arguments: str) -> bool:
    """Handle ``login``/``logout``; False when ``arguments`` ask for the listing instead."""
    words = arguments.split()
    if not words:
        return False
    if words[0] not in ("login", "logout") or len(words) != 2:
        app.notify(USAGE, severity="warning")
        return True
    if app.files_remote:
        app.notify(
            f"sign in on the machine Roder runs on: `roder mcp {words[0]} {words[1]}` there",
            title=f"/mcp {words[0]}",
            severity="warning",
            timeout=12,
        )
        return True
    if words[0] == "login":
        await _login(app, words[1])
    else:
        await _logout(app, words[1])
    return True


async def _login(app: Any, name: str) -> None:
    from roder_ext_mcp.authorization import configured_server, credential_name, start_login

    from roder_core.auth.logins import LoginService
    from roder_core.auth.oauth import OAuthError
    from roder_core.settings.credentials import CredentialStore
    from roder_tui.screens.info import InfoScreen

    outcome: list[str | None] = []
    service = LoginService({}, CredentialStore.for_env(), lambda _name, error: outcome.append(error))
    try:
        config = configured_server(app.cwd, name)
        start = await start_login(config, service)
    except OAuthError as exc:
        await service.aclose()
        app.notify(str(exc), title="/mcp login", severity="error", timeout=12)
        return
    opened = "Your browser was opened at:" if start.browser_opened else "Open this address in a browser on this machine:"
    app.push_screen(
        InfoScreen(f"Sign in to MCP server {name}", f"{opened}\n\n{start.authorization_url}\n\nRoder says when it is done.")
    )

    async def finish() -> None:
        try:
            await service.wait(credential_name(name))
        finally:
            await service.aclose()
        error = outcome[0] if outcome else "the sign-in did not finish"
        if error is not None:
            app.notify(f"sign-in to MCP server {name} failed: {error}", title="/mcp login", severity="error", timeout=12)
            return
        await _restarted(app, name, f"signed in to MCP server {name}")

    app.run_worker(finish(), name=f"mcp-login-{name}", exclusive=False)


async def _logout(app: Any, name: str) -> None:
    from roder_ext_mcp.authorization import configured_server, logout

    from roder_core.auth.oauth import OAuthError
    from roder_core.settings.credentials import CredentialStore

    try:
        signed_out, revoked = await logout(configured_server(app.cwd, name), CredentialStore.for_env())
    except OAuthError as exc:
        app.notify(str(exc), title="/mcp logout", severity="error", timeout=12)
        return
    if not signed_out:
        app.notify(f"not signed in to MCP server {name}", title="/mcp logout")
        return
    await _restarted(app, name, f"signed out of MCP server {name}" + ("; the tokens were revoked" if revoked else ""))


async def _restarted(app: Any, name: str, done: str) -> None:
    """Restart the server so the change takes effect, and say what it is now."""
    from roder_core.server.errors import RpcError
    from roder_core.server.protocol_features import MCP_RESTART, McpRestartParams

    try:
        result = await app.client.call(MCP_RESTART, McpRestartParams(server=name))
    except RpcError as exc:
        app.notify(f"{done}; restarting it failed: {exc.message}", title="/mcp", severity="warning", timeout=12)
        return
    server = result.server
    app.notify(f"{done} ({server.status}, {server.tool_count} tools)", title="/mcp", timeout=12)
