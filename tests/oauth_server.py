"""A loopback OAuth 2.1 authorization server for the sign-in tests, written for them.

It speaks the standard wire format (RFC 8414 metadata, RFC 8628 device flow with
``authorization_pending`` and ``slow_down``, RFC 6749 authorization code with RFC 7636 PKCE S256
checked for real, refresh with rotation, RFC 7009 revocation, RFC 7591 registration, RFC 7662
introspection for a resource server such as the OAuth-protected MCP fixture) and records what it
was sent, so tests can check what Roder did. It runs on a thread with the
standard library's HTTP server: nothing here shares the event loop of the code under test.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit


@dataclass
class AuthState:
    client_id: str = "roder-test-client"
    #: Access tokens last this long (seconds); 0 makes each one expire at once.
    expires_in: int = 3600
    #: The device flow: how many polls answer authorization_pending, and how many slow_down first.
    pending_polls: int = 2
    slow_down_polls: int = 0
    deny_device: bool = False
    device_interval: float = 0.01
    offer_device: bool = True
    offer_revocation: bool = True
    codes: dict[str, dict[str, str]] = field(default_factory=dict)
    device_polls: int = 0
    issued: list[str] = field(default_factory=list)
    refresh_tokens: dict[str, bool] = field(default_factory=dict)
    revoked: list[str] = field(default_factory=list)
    registered: list[dict[str, Any]] = field(default_factory=list)
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    user_code: str = "WDJB-MJHT"
    device_code: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    approved_redirect: list[str] = field(default_factory=list)
    #: Access tokens the server no longer accepts (as if revoked at the server's side).
    invalidated: set[str] = field(default_factory=set)
    #: When set, every refresh fails with this ``error_description`` (``invalid_grant``).
    refresh_error: str | None = None


class OAuthTestServer:
    """``with OAuthTestServer() as auth: auth.issuer ...``"""

    def __init__(self, **state: Any) -> None:
        self.state = AuthState(**state)
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.port = self._server.server_address[1]
        self.issuer = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> OAuthTestServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "registration_endpoint": f"{self.issuer}/register",
            "code_challenge_methods_supported": ["S256"],
            "grant_types_supported": ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"],
        }
        if self.state.offer_device:
            meta["device_authorization_endpoint"] = f"{self.issuer}/device"
        if self.state.offer_revocation:
            meta["revocation_endpoint"] = f"{self.issuer}/revoke"
        return meta

    def sent(self, path: str) -> list[dict[str, str]]:
        """The query (GET) or form (POST) of every request to ``path``, in order."""
        with self.lock:
            return [form for where, _method, form in self.state.requests if where == path]

    def grant_types(self) -> list[str]:
        return [grant for _path, _method, form in self.state.requests if (grant := form.get("grant_type", ""))]

    # ------------------------------------------------------------------ the handler

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def _reply(self, status: int, body: dict[str, Any] | None = None, location: str | None = None) -> None:
                data = json.dumps(body or {}).encode()
                self.send_response(status)
                if location:
                    self.send_header("location", location)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                with outer.lock:
                    outer.state.requests.append((url.path, "GET", query))
                if url.path == "/.well-known/oauth-authorization-server":
                    self._reply(200, outer.metadata())
                elif url.path == "/authorize":
                    self._authorize(query)
                else:
                    self._reply(404, {"error": "not_found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length).decode()
                url = urlsplit(self.path)
                if self.headers.get("content-type", "").startswith("application/json"):
                    form = {"json": raw}
                else:
                    form = {k: v[0] for k, v in parse_qs(raw).items()}
                with outer.lock:
                    outer.state.requests.append((url.path, "POST", form))
                    status, body = outer._post(url.path, form)
                self._reply(status, body)

            def _authorize(self, query: dict[str, str]) -> None:
                state = outer.state
                if query.get("client_id") != state.client_id or query.get("code_challenge_method") != "S256":
                    self._reply(400, {"error": "invalid_request"})
                    return
                redirect = query["redirect_uri"]
                code = secrets.token_urlsafe(12)
                with outer.lock:
                    state.codes[code] = {"challenge": query["code_challenge"], "redirect_uri": redirect}
                    state.approved_redirect.append(redirect)
                self._reply(302, location=redirect + "?" + urlencode({"code": code, "state": query.get("state", "")}))

        return Handler

    def _issue(self) -> dict[str, Any]:
        access = "at-" + secrets.token_urlsafe(18)
        refresh = "rt-" + secrets.token_urlsafe(18)
        self.state.issued.append(access)
        self.state.refresh_tokens[refresh] = True
        return {"access_token": access, "token_type": "Bearer", "expires_in": self.state.expires_in, "refresh_token": refresh}

    def _post(self, path: str, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        state = self.state
        if path == "/introspect":  # RFC 7662, for the resource server (which has no client id here)
            token = form.get("token", "")
            active = token in state.issued and token not in state.invalidated and token not in state.revoked
            return 200, {"active": active}
        if path == "/register":
            body = json.loads(form["json"])
            state.registered.append(body)
            return 201, {"client_id": state.client_id, **body}
        if form.get("client_id") != state.client_id:
            return 401, {"error": "invalid_client"}
        if path == "/device":
            return 200, {
                "device_code": state.device_code,
                "user_code": state.user_code,
                "verification_uri": f"{self.issuer}/activate",
                "verification_uri_complete": f"{self.issuer}/activate?user_code={state.user_code}",
                "expires_in": 600,
                "interval": state.device_interval,
            }
        if path == "/revoke":
            state.revoked.append(form.get("token", ""))
            return 200, {}
        if path != "/token":
            return 404, {"error": "not_found"}
        grant = form.get("grant_type")
        if grant == "urn:ietf:params:oauth:grant-type:device_code":
            if form.get("device_code") != state.device_code:
                return 400, {"error": "invalid_grant"}
            state.device_polls += 1
            if state.deny_device:
                return 400, {"error": "access_denied"}
            if state.device_polls <= state.slow_down_polls:
                return 400, {"error": "slow_down"}
            if state.device_polls <= state.slow_down_polls + state.pending_polls:
                return 400, {"error": "authorization_pending"}
            return 200, self._issue()
        if grant == "authorization_code":
            entry = state.codes.pop(form.get("code", ""), None)
            if entry is None or entry["redirect_uri"] != form.get("redirect_uri"):
                return 400, {"error": "invalid_grant"}
            digest = hashlib.sha256(form.get("code_verifier", "").encode()).digest()
            if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != entry["challenge"]:
                return 400, {"error": "invalid_grant", "error_description": "PKCE verification failed"}
            return 200, self._issue()
        if grant == "refresh_token":
            if state.refresh_error is not None:
                return 400, {"error": "invalid_grant", "error_description": state.refresh_error}
            token = form.get("refresh_token", "")
            if not state.refresh_tokens.get(token):
                return 400, {"error": "invalid_grant", "error_description": "refresh token is not valid"}
            state.refresh_tokens[token] = False  # rotated: each refresh token works once
            return 200, self._issue()
        return 400, {"error": "unsupported_grant_type"}
