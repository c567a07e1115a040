"""JSON-RPC error codes of seed 004 and the exception that carries one to the wire.

Handlers raise ``RpcError`` (or a typed Roder error the dispatcher maps onto a code); transports
only ever serialise ``{"code", "message", "data"}``.
"""

from __future__ import annotations

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
RUNTIME_ERROR = -32000
POLICY_DENIED = -32004
#: Sent (as an error notification) to a client whose notification queue overflowed.
CLIENT_BEHIND = -32001

ERROR_CODES: dict[int, str] = {
    PARSE_ERROR: "parse error: the line is not valid JSON (the connection stays usable)",
    INVALID_REQUEST: "invalid request: not a JSON-RPC 2.0 request object",
    METHOD_NOT_FOUND: "method not found, or not offered by this release",
    INVALID_PARAMS: "invalid or missing params (also: unknown thread, provider or approval id)",
    RUNTIME_ERROR: "runtime error while handling the request",
    CLIENT_BEHIND: "the client fell behind and its notification stream was cut",
    POLICY_DENIED: "policy denied the requested command, file access or tool action",
}


class RpcError(Exception):
    """An error response: ``code`` from the table above and one readable message."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class PolicyDenied(RpcError):
    def __init__(self, message: str) -> None:
        super().__init__(POLICY_DENIED, message)


class InvalidParams(RpcError):
    def __init__(self, message: str, data: Any = None) -> None:
        super().__init__(INVALID_PARAMS, message, data)
