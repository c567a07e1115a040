"""One language server over stdio: LSP's ``Content-Length`` framing, requests, the server's own
requests (configuration, progress, registrations), document sync and published diagnostics.

The server runs confined (``brokers.confined``: the workspace read-only, no network, secrets
hidden). Diagnostics are kept per document with the version they were computed for, so a caller
that changed a document gets the server's answer about *that* version, not an older one.

How a document's diagnostics are asked for, most exact first:

1. pull (``textDocument/diagnostic``, LSP 3.17) where the server offers it, statically
   (``diagnosticProvider``), by a dynamic registration (pyright), or by answering a first try;
   the answer is about the text sent before the request, whatever it contains, even nothing;
2. the server's own request for the same (typescript-language-server has no pull, and publishes
   nothing when a clean file stays clean: its ``typescript.tsserverRequest`` command asks
   tsserver for the file's syntactic, semantic and suggestion diagnostics, ordered after the
   change like any request);
3. otherwise wait for ``publishDiagnostics`` about this version, where silence proves nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
import signal
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from roder_core.bounded_json import loads as bounded_loads

MAX_MESSAGE = 64 * 1024 * 1024


class LspError(Exception):
    """The server failed a request, exited, or did not answer in time."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        #: The JSON-RPC error code when the server answered with an error.
        self.code = code


#: typescript-language-server's command that forwards a request to tsserver.
TSSERVER_REQUEST = "typescript.tsserverRequest"
#: tsserver's diagnostics of one file, the three kinds its editors show.
TSSERVER_DIAGNOSTICS = ("syntacticDiagnosticsSync", "semanticDiagnosticsSync", "suggestionDiagnosticsSync")
TSSERVER_SEVERITY = {"error": 1, "warning": 2, "suggestion": 4, "message": 3}

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class Columns:
    """Columns of one text as the server counts them and as the model does. LSP counts UTF-16
    code units unless the server chose ``utf-32`` (characters); tsserver always counts UTF-16.
    The model, the files and every column Roder shows count characters: an emoji is one
    character but two UTF-16 units. Every position crossing to or from a server goes through here."""

    def __init__(self, text: str | None, utf16: bool = True) -> None:
        self._lines = _LINE_BREAK.split(text) if text is not None and utf16 else None

    def _line(self, line: int) -> str | None:
        if self._lines is None or not 0 <= line < len(self._lines):
            return None
        return self._lines[line]

    def to_characters(self, line: int, units: int) -> int:
        """The 0-based character column of the server's 0-based ``units`` column on ``line``."""
        text = self._line(line)
        if text is None or text.isascii():
            return units
        seen = 0
        for index, char in enumerate(text):
            if seen >= units:
                return index
            seen += 2 if ord(char) > 0xFFFF else 1
        return len(text) + max(units - seen, 0)

    def to_units(self, line: int, characters: int) -> int:
        """The server's 0-based column of the 0-based character column ``characters`` on ``line``."""
        text = self._line(line)
        if text is None or text.isascii():
            return characters
        head = text[:characters]
        return characters + sum(1 for char in head if ord(char) > 0xFFFF)


def uri_of(path: Path) -> str:
    return path.resolve().as_uri()


def path_of(uri: str) -> Path:
    return Path(unquote(urlsplit(uri).path))


@dataclass
class Diagnostic:
    line: int  # 1-based
    character: int  # 1-based
    severity: int  # 1 error, 2 warning, 3 information, 4 hint
    message: str
    code: str = ""
    source: str = ""

    @classmethod
    def from_lsp(cls, raw: dict[str, Any], columns: Columns) -> Diagnostic:
        start = raw.get("range", {}).get("start", {})
        code = raw.get("code")
        line = int(start.get("line", 0))
        return cls(
            line=line + 1,
            character=columns.to_characters(line, int(start.get("character", 0))) + 1,
            severity=int(raw.get("severity") or 1),
            message=str(raw.get("message", "")).strip(),
            code=str(code) if code is not None else "",
            source=str(raw.get("source") or ""),
        )

    @classmethod
    def from_tsserver(cls, raw: dict[str, Any], columns: Columns) -> Diagnostic:
        """tsserver's own shape: 1-based ``start`` (UTF-16 offsets), ``text``, ``category``, a numeric ``code``."""
        start = raw.get("start", {})
        code = raw.get("code")
        line = int(start.get("line", 1))
        return cls(
            line=line,
            character=columns.to_characters(line - 1, int(start.get("offset", 1)) - 1) + 1,
            severity=TSSERVER_SEVERITY.get(str(raw.get("category")), 1),
            message=str(raw.get("text", "")).strip(),
            code=str(code) if code is not None else "",
            source=str(raw.get("source") or "typescript"),
        )

    @property
    def key(self) -> tuple[int, str, str]:
        """What identifies a problem across edits that move lines."""
        return self.severity, self.message, self.code


@dataclass
class _Document:
    version: int
    text: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    diagnosed_version: int = -1
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class LspClient:
    """A running language server for one workspace."""

    def __init__(self, name: str, language_ids: dict[str, str], settings: dict[str, Any] | None = None) -> None:
        self.name = name
        self.language_ids = language_ids
        self.settings = settings or {}
        self.process: asyncio.subprocess.Process | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._documents: dict[str, _Document] = {}
        self._reader: asyncio.Task[None] | None = None
        self.exit_reason: str | None = None
        self.capabilities: dict[str, Any] = {}
        self._stderr: deque[str] = deque(maxlen=6)
        self._stderr_reader: asyncio.Task[None] | None = None
        #: Whether the server answers ``textDocument/diagnostic``: None until it says (by its
        #: capabilities, a registration, or its answer to a first try).
        self.pulls: bool | None = None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None and self.exit_reason is None

    async def start(self, argv: list[str], env: dict[str, str], root: Path, init_options: Any, timeout: float) -> None:
        self.process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=root,
            start_new_session=True,
        )
        loop = asyncio.get_running_loop()
        self._reader = loop.create_task(self._read(), name=f"lsp {self.name}")
        self._stderr_reader = loop.create_task(self._drain_stderr(), name=f"lsp {self.name} stderr")
        params = {
            # None: inside the sandbox's own pid namespace Roder's pid names no process, and
            # servers that watch their parent would take that for its death and exit.
            "processId": None,
            "rootUri": uri_of(root),
            "workspaceFolders": [{"uri": uri_of(root), "name": root.name}],
            "initializationOptions": init_options,
            "capabilities": {
                # Characters where the server can count them; UTF-16 otherwise (``Columns``).
                "general": {"positionEncodings": ["utf-32", "utf-16"]},
                "textDocument": {
                    "synchronization": {"didSave": False, "dynamicRegistration": False},
                    "publishDiagnostics": {"versionSupport": True, "relatedInformation": False},
                    # Pull diagnostics (LSP 3.17); pyright offers them only to clients that
                    # accept a dynamic registration.
                    "diagnostic": {"dynamicRegistration": True, "relatedDocumentSupport": False},
                    "definition": {"linkSupport": False},
                    "references": {},
                    "hover": {"contentFormat": ["plaintext", "markdown"]},
                    "documentSymbol": {"hierarchicalDocumentSymbolSupport": True},
                },
                "workspace": {"configuration": True, "workspaceFolders": True},
                "window": {"workDoneProgress": False},
            },
        }
        result = await self.request("initialize", params, timeout)
        self.capabilities = result.get("capabilities", {}) if isinstance(result, dict) else {}
        if self.capabilities.get("diagnosticProvider"):
            self.pulls = True
        self.notify("initialized", {})
        if self.settings:
            self.notify("workspace/didChangeConfiguration", {"settings": self.settings})

    # ------------------------------------------------------------------ messages

    def _send(self, message: dict[str, Any]) -> None:
        if self.process is None or self.process.stdin is None or not self.alive:
            raise LspError(f"language server {self.name} is not running ({self.exit_reason or 'stopped'})")
        body = json.dumps({"jsonrpc": "2.0", **message}, ensure_ascii=False).encode("utf-8")
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def notify(self, method: str, params: Any) -> None:
        self._send({"method": method, "params": params})

    async def request(self, method: str, params: Any, timeout: float | None) -> Any:
        """The server's answer (``timeout`` None: the caller's own deadline governs)."""
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            self._send({"id": request_id, "method": method, "params": params})
            async with asyncio.timeout(timeout):
                return await future
        except TimeoutError:
            raise LspError(f"language server {self.name} did not answer {method} within {timeout or 0:g} s") from None
        finally:
            self._pending.pop(request_id, None)

    async def _drain_stderr(self) -> None:
        """The last lines the server wrote to stderr: they say why it exited."""
        assert self.process is not None and self.process.stderr is not None
        while line := await self.process.stderr.readline():
            self._stderr.append(line.decode("utf-8", "replace").rstrip()[:300])

    async def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        stdout = self.process.stdout
        problem = None
        try:
            while True:
                length = None
                while (line := await stdout.readline()) not in (b"\r\n", b"\n"):
                    if not line:
                        raise EOFError
                    name, _, value = line.decode("ascii", "replace").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                if length is None or length > MAX_MESSAGE:
                    problem = f"language server {self.name} sent a message without a valid Content-Length"
                    break
                message = bounded_loads((await stdout.readexactly(length)).decode("utf-8", "replace"))
                if isinstance(message, dict):
                    self._dispatch(message)
        except (EOFError, asyncio.IncompleteReadError, ConnectionError):
            pass
        except ValueError as exc:
            problem = f"language server {self.name} sent a bad message: {exc}"
        code = await self.process.wait() if problem is None else None
        if self._stderr_reader is not None:
            await asyncio.wait({self._stderr_reader}, timeout=1.0)
        tail = " | ".join(line for line in self._stderr if line)
        self.exit_reason = problem or f"language server {self.name} exited with status {code}" + (f" ({tail})" if tail else "")
        for future in self._pending.values():
            if not future.done():
                future.set_exception(LspError(self.exit_reason))
        for document in self._documents.values():
            document.changed.set()

    def _dispatch(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if "id" in message and method is None:
            future = self._pending.get(message["id"]) if isinstance(message["id"], int) else None
            if future is not None and not future.done():
                if "error" in message:
                    error = message["error"] or {}
                    code = error.get("code") if isinstance(error.get("code"), int) else None
                    future.set_exception(LspError(f"{self.name}: {error.get('message', 'error')}", code))
                else:
                    future.set_result(message.get("result"))
            return
        if "id" in message:  # a request from the server: answer what a plain client answers
            self._answer(message["id"], str(method), message.get("params"))
        elif method == "textDocument/publishDiagnostics":
            self._diagnostics(message.get("params") or {})

    def _answer(self, request_id: Any, method: str, params: Any) -> None:
        result: Any = None
        if method == "workspace/configuration":
            items = params.get("items", []) if isinstance(params, dict) else []
            result = [self._setting(item.get("section")) for item in items]
        elif method == "workspace/workspaceFolders":
            result = []
        elif method == "client/registerCapability":
            registrations = params.get("registrations") if isinstance(params, dict) else None
            if any(isinstance(r, dict) and r.get("method") == "textDocument/diagnostic" for r in registrations or []):
                self.pulls = True
        with contextlib.suppress(LspError):
            self._send({"id": request_id, "result": result})

    def _setting(self, section: str | None) -> Any:
        value: Any = self.settings
        for part in (section or "").split("."):
            if not part:
                continue
            value = value.get(part) if isinstance(value, dict) else None
        return value if value is not None else {}

    @property
    def _tsserver(self) -> bool:
        commands = (self.capabilities.get("executeCommandProvider") or {}).get("commands") or []
        return TSSERVER_REQUEST in commands

    @property
    def asks(self) -> bool:
        """Whether diagnostics are asked for (or a first pull is being tried), rather than
        waited for as published."""
        return self.pulls is not False or self._tsserver

    def columns(self, text: str | None) -> Columns:
        """How this server's columns of ``text`` map to characters (LSP positions; the
        ``positionEncoding`` the server chose, UTF-16 when it chose none)."""
        return Columns(text, utf16=self.capabilities.get("positionEncoding", "utf-16") != "utf-32")

    def text_of(self, uri: str) -> str | None:
        """The text last sent to the server for ``uri`` (None for a document it was not sent)."""
        document = self._documents.get(uri)
        return document.text if document is not None else None

    def _diagnostics(self, params: dict[str, Any]) -> None:
        document = self._documents.get(str(params.get("uri")))
        if document is None or self.pulls or self._tsserver:
            return  # asked for: published ones may be about an older text when unversioned
        version = params.get("version")
        if isinstance(version, int) and version < document.version:
            return  # about an older text than the one we sent last
        columns = self.columns(document.text)
        document.diagnostics = [Diagnostic.from_lsp(d, columns) for d in params.get("diagnostics", []) if isinstance(d, dict)]
        document.diagnosed_version = document.version
        document.changed.set()

    # ------------------------------------------------------------------ documents

    def language_of(self, path: Path) -> str:
        return self.language_ids.get(path.suffix, self.language_ids.get(path.suffix.lower(), "plaintext"))

    def sync(self, path: Path, text: str) -> _Document:
        """Tell the server the document's current text (open it the first time)."""
        uri = uri_of(path)
        document = self._documents.get(uri)
        if document is None:
            document = _Document(1, text)
            self._documents[uri] = document
            self.notify(
                "textDocument/didOpen",
                {"textDocument": {"uri": uri, "languageId": self.language_of(path), "version": 1, "text": text}},
            )
        elif document.text != text:
            document.version += 1
            document.text = text
            document.changed.clear()
            self.notify(
                "textDocument/didChange",
                {"textDocument": {"uri": uri, "version": document.version}, "contentChanges": [{"text": text}]},
            )
        return document

    def known(self, path: Path, text: str) -> list[Diagnostic] | None:
        """The diagnostics already published for exactly this text, if any (no waiting)."""
        document = self._documents.get(uri_of(path))
        if document is None or document.text != text or document.diagnosed_version < document.version:
            return None
        return list(document.diagnostics)

    async def diagnostics(self, path: Path, text: str, timeout: float, settle: float = 0.0) -> list[Diagnostic]:
        """The server's diagnostics for ``text``: asked for (pull, or the server's own request)
        where it can answer, else its first published answer about this very text, then any
        further ones that follow within ``settle`` seconds of each other (servers such as
        typescript-language-server publish the syntax pass first and the type check after)."""
        document = self.sync(path, text)
        version = document.version
        async with asyncio.timeout(timeout):
            asked = await self._ask(path)
            if asked is not None:
                if document.version == version:  # not changed again meanwhile: keep it
                    document.diagnostics, document.diagnosed_version = asked, version
                return list(asked)
            while document.diagnosed_version < document.version and self.alive:
                document.changed.clear()
                await document.changed.wait()
            while settle > 0 and self.alive:
                document.changed.clear()
                try:
                    async with asyncio.timeout(settle):
                        await document.changed.wait()
                except TimeoutError:
                    break
        if not self.alive:
            raise LspError(self.exit_reason or f"language server {self.name} stopped")
        return list(document.diagnostics)

    async def _ask(self, path: Path) -> list[Diagnostic] | None:
        """The file's diagnostics by a request sent after its last change (so about that text),
        or None when the server has no such request and only publishes."""
        document = {"uri": uri_of(path)}
        text = self.text_of(document["uri"])
        if self.pulls is not False:
            try:
                report = await self.request("textDocument/diagnostic", {"textDocument": document}, None)
            except LspError as exc:
                # Offered and failed: say so. Only tried: any error answer (normally "method not
                # found") means the server does not pull; one that exited raises below anyway.
                if self.pulls or exc.code is None:
                    raise
                self.pulls = False
            else:
                self.pulls = True
                items = report.get("items", []) if isinstance(report, dict) else []
                columns = self.columns(text)
                return [Diagnostic.from_lsp(d, columns) for d in items if isinstance(d, dict)]
        if self._tsserver:
            found: list[Diagnostic] = []
            for command in TSSERVER_DIAGNOSTICS:
                answer = await self.request(
                    "workspace/executeCommand",
                    {
                        "command": TSSERVER_REQUEST,
                        "arguments": [command, {"file": document["uri"], "includeLinePosition": False}],
                    },
                    None,
                )
                body = answer.get("body") if isinstance(answer, dict) else None
                if not isinstance(answer, dict) or not answer.get("success") or not isinstance(body, list):
                    raise LspError(f"language server {self.name} could not give {command} ({answer!r:.200})")
                found += [Diagnostic.from_tsserver(d, Columns(text)) for d in body if isinstance(d, dict)]
            return found
        return None

    def kill(self) -> None:
        """End a server that never came up (its start was cancelled), at once, with its group."""
        process = self.process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        for task in (self._reader, self._stderr_reader):
            if task is not None:
                task.cancel()

    async def stop(self) -> None:
        process = self.process
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(LspError, ConnectionError):
            await self.request("shutdown", None, 2.0)
            self.notify("exit", None)
        try:
            async with asyncio.timeout(2.0):
                await process.wait()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
        for task in (self._reader, self._stderr_reader):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
