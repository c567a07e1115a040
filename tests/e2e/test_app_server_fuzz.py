"""Property-based fuzz of `roder app-server` over a real pipe: thousands of malformed lines and
random params; after every one the server must still answer a normal request."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roder_core.server.schema import load_methods
from tests.server.support import roder_command, trusted_workspace

pytestmark = pytest.mark.e2e

#: Methods that run commands or tools for real are left out of random calls.
SKIPPED = {"command/exec", "tools/call", "hunk/rollback"}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


class Server:
    """Synchronous line client: send a line, then prove the server still answers."""

    def __init__(self, workspace: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            roder_command("app-server", "--provider", "mock"),
            cwd=workspace,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.pings = 0
        self.answers: list[dict[str, Any]] = []

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.replace(b"\n", b" ") + b"\n")

    def ping(self) -> None:
        self.pings += 1
        ping_id = f"ping-{self.pings}"
        self.send(json.dumps({"jsonrpc": "2.0", "id": ping_id, "method": "session/get"}).encode())
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            assert line, "the server closed its output"
            message = json.loads(line)  # every output line is valid JSON
            if isinstance(message, list):  # a batch's responses: a non-empty array of responses
                assert message and all(isinstance(m, dict) and "id" in m for m in message), message
                for response in message:
                    self._check_response(response)
                continue
            if message.get("id") == ping_id:
                assert "result" in message, message
                return
            if "id" in message:
                self._check_response(message)

    def _check_response(self, message: dict[str, Any]) -> None:
        self.answers.append(message)
        assert ("result" in message) != ("error" in message)
        if "error" in message:
            assert message["error"]["code"] in {-32700, -32600, -32601, -32602, -32000, -32004}

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.proc.wait(timeout=60)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    workspace, env = trusted_workspace(tmp_path)
    running = Server(workspace, env)
    yield running
    if running.proc.poll() is None:
        running.proc.kill()


def test_malformed_lines_never_break_the_server(server: Server) -> None:
    requestish = st.fixed_dictionaries(
        {"jsonrpc": st.sampled_from(["2.0", "1.0", 2]) | json_values, "method": st.text(max_size=30) | json_values},
        optional={"id": json_values, "params": json_values},
    ).map(lambda d: json.dumps(d).encode())
    junk = (
        st.binary(max_size=200)
        | st.text(max_size=200).map(str.encode)
        | json_values.map(lambda v: json.dumps(v).encode())
        | requestish
        | st.integers(1, 2000).map(lambda n: b"[" * n)
    )

    @settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
    @given(junk)
    def check(line: bytes) -> None:
        server.send(line)
        server.ping()

    check()
    assert server.close() == 0


def test_random_params_for_every_method(server: Server) -> None:
    methods = sorted(set(load_methods()) - SKIPPED)

    def params_for(method: str) -> st.SearchStrategy[Any]:
        fields = [f.alias or name for name, f in load_methods()[method].params.model_fields.items()]
        shaped = st.dictionaries(st.sampled_from(fields), json_values, max_size=len(fields)) if fields else st.none()
        return shaped | json_values

    calls = st.sampled_from(methods).flatmap(lambda m: st.tuples(st.just(m), params_for(m)))

    @settings(max_examples=1200, deadline=None, suppress_health_check=list(HealthCheck))
    @given(calls, st.integers(0, 10**6))
    def check(method_params: tuple[str, Any], request_id: int) -> None:
        method, params = method_params
        server.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode())
        server.ping()

    check()
    assert server.answers, "random calls got answers"
    assert server.close() == 0
