"""The language servers of one runtime: started per language on first use, confined like
commands (and, in a folder the user has not trusted, only as ``launch`` allows), stopped when
idle and at exit; and what an edit introduced, by diagnostics."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from roder_core.brokers import confined
from roder_core.brokers.project_reader import ProjectFileRefused, ProjectReader, project_reader
from roder_core.brokers.secrets import SecretRedactor
from roder_core.settings.config import LspConfig
from roder_ext_lsp.client import Diagnostic, LspClient, LspError
from roder_ext_lsp.launch import plan
from roder_ext_lsp.servers import ServerSpec, server_for

log = logging.getLogger(__name__)

SEVERITY = {1: "error", 2: "warning", 3: "info", 4: "hint"}
#: Diagnostics listed in one tool result at most; the rest are counted.
MAX_LISTED = 20


@dataclass
class ServerState:
    spec: ServerSpec
    client: LspClient | None = None
    error: str | None = None
    #: Why the server does not start in this folder (untrusted), said with each edit.
    withheld: str | None = None
    last_used: float = 0.0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class LspManager:
    def __init__(
        self,
        config: LspConfig,
        specs: list[ServerSpec],
        hints: list[str],
        workspace: Path,
        env: Mapping[str, str],
        known: SecretRedactor,
        hidden: list[Path],
        trusted: bool,
    ) -> None:
        self.config = config
        self.specs = specs
        self.hints = hints
        self.workspace = workspace
        self.env = dict(env)
        #: The run's secrets, scrubbed from every server's environment by name and by value.
        self.known = known
        self.hidden = hidden
        self.trusted = trusted
        self.states = {spec.name: ServerState(spec) for spec in specs}
        #: Each file's text before the edit now running: (thread, path) -> text.
        self.before: dict[tuple[str, Path], str | None] = {}
        self._warming: set[asyncio.Task[LspClient | None]] = set()

    @cached_property
    def reader(self) -> ProjectReader:
        """Made at the first file an edit shows a server (most runs never need one)."""
        return project_reader(self.workspace, env=self.env)

    def running(self) -> list[str]:
        return [name for name, state in self.states.items() if state.client is not None and state.client.alive]

    def spec_for(self, path: Path) -> ServerSpec | None:
        return server_for(self.specs, path.suffix)

    async def client_for(self, path: Path) -> LspClient | None:
        """The running server for ``path``'s language, started on first use; None when no server
        claims it or it failed to start (the failure is kept and shown in ``roder doctor``-style
        listings, not raised into a tool call)."""
        spec = self.spec_for(path)
        if spec is None:
            return None
        state = self.states[spec.name]
        async with state.lock:
            state.last_used = time.monotonic()
            if state.client is not None and state.client.alive:
                return state.client
            launch = plan(spec, self.workspace, self.env, self.trusted)
            if isinstance(launch, str):
                state.withheld = launch
                return None
            client = LspClient(spec.name, spec.extension_to_language, spec.settings)
            command = confined.confine(
                launch.argv,
                self.workspace,
                launch.env,
                known=self.known,
                reads=True,
                writes=False,
                network=False,
                extra_env=launch.extra_env,
                hidden=self.hidden,
                needs=launch.needs,
            )
            try:
                await client.start(command.argv, command.env, self.workspace, launch.initialization_options, spec.startup_timeout)
            except (LspError, OSError) as exc:
                state.error = f"language server {spec.name} did not start: {exc}"
                await client.stop()
                log.warning("%s", state.error)
                return None
            except BaseException:  # cancelled mid-start (exit, a warm-up given up): never left running
                client.kill()
                raise
            state.client, state.error = client, None
        await self._stop_idle()
        return client

    async def use_servers(self, specs: list[ServerSpec], hints: list[str]) -> None:
        """The servers known from now on (a plugin bringing one was enabled or removed): a new one
        starts at the first file of its language; one no longer known, or changed, is shut down
        as at exit (``LspClient.stop``: shutdown, exit, then the grace before it is killed)."""
        wanted = {spec.name: spec for spec in specs}
        gone = [name for name, state in self.states.items() if wanted.get(name) != state.spec]
        self.specs, self.hints = specs, hints
        stopping = [self.states.pop(name) for name in gone]
        for spec in specs:
            self.states.setdefault(spec.name, ServerState(spec))
        for state in stopping:
            async with state.lock:  # a start under way finishes first, then stops
                client, state.client = state.client, None
            if client is not None:
                await client.stop()

    def withheld(self, path: Path) -> str | None:
        """Why no server runs for ``path`` in this folder, when it is withheld for want of trust."""
        spec = self.spec_for(path)
        return self.states[spec.name].withheld if spec is not None else None

    def unavailable(self, path: Path) -> str | None:
        """Why no server runs for ``path``: withheld for want of trust, or its last start failed
        (a missing program, an exit, no answer to ``initialize``); None when none claims it."""
        spec = self.spec_for(path)
        if spec is None:
            return None
        state = self.states[spec.name]
        return state.withheld or (state.error if state.client is None else None)

    async def _stop_idle(self) -> None:
        now = time.monotonic()
        for state in self.states.values():
            if state.client is not None and state.client.alive and now - state.last_used > self.config.idle_seconds:
                client, state.client = state.client, None
                await client.stop()

    def _text(self, path: Path) -> str | None:
        try:
            return self.reader.read_text(path, errors="replace")
        except (ProjectFileRefused, FileNotFoundError):
            return None

    async def diagnostics(self, path: Path) -> tuple[str, list[Diagnostic]] | None:
        """(server name, diagnostics of the file as it is on disk now), or None without a server."""
        client = await self.client_for(path)
        if client is None:
            return None
        text = self._text(path)
        if text is None:
            return client.name, []
        if (known := client.known(path, text)) is not None:
            return client.name, known
        try:
            return client.name, await client.diagnostics(path, text, self.config.diagnostics_timeout, self.config.settle_seconds)
        except (LspError, TimeoutError):
            return None

    def remember(self, thread: str, paths: list[Path]) -> None:
        """Before an edit: each file's text (no waiting on a server: an edit is never held up by
        one), and the server for it started in the background so it is warm by the end."""
        for path in paths:
            self.before[(thread, path)] = self._text(path) if path.exists() else ""
            task = asyncio.get_running_loop().create_task(self.client_for(path), name=f"lsp warm-up {path.suffix}")
            self._warming.add(task)
            task.add_done_callback(self._warming.discard)

    async def introduced(self, thread: str, paths: list[Path], budget: float) -> str:
        """After an edit: the diagnostics it introduced (the server's answer about the text after,
        less its answer about the text before), errors first, bounded; "" when none. A server
        that does not answer within ``budget`` seconds is named instead of blocking the result."""
        lines: list[str] = []
        servers: set[str] = set()
        late: dict[str, LspClient] = {}
        starting: set[str] = set()
        withheld: set[str] = set()
        try:
            async with asyncio.timeout(budget):
                for path in paths:
                    old = self.before.pop((thread, path), None)
                    new = self._text(path)
                    spec = self.spec_for(path)
                    if spec is not None:
                        starting.add(spec.name)  # named if the budget ends before it is up
                    client = await self.client_for(path)
                    starting.discard(spec.name if spec is not None else "")
                    if client is None and (why := self.unavailable(path)):
                        withheld.add(f"(no diagnostics: {why})")
                    if client is None or new is None:
                        continue
                    late[client.name] = client
                    settle = self.config.settle_seconds
                    before = [] if not old else client.known(path, old)
                    if before is None:
                        before = await client.diagnostics(path, old or "", budget, settle)
                    after = await client.diagnostics(path, new, budget, settle)
                    late.pop(client.name, None)
                    servers.add(client.name)
                    lines += [_line(self._shown(path), d) for d in _new_ones(before, after)]
        except TimeoutError:
            pass
        except LspError as exc:
            return f"(no diagnostics: {exc})"
        # Said as it is: some servers publish nothing when a change leaves the diagnostics as they
        # were, so silence is not proof of a slow server, nor of a clean change.
        asked = all(client.asks for client in late.values())
        note = f"(no diagnostics: {', '.join(sorted(late))} {_silence(asked)} within {budget:g} s)" if late else ""
        started = f"(no diagnostics: {', '.join(sorted(starting))} still starting after {budget:g} s)" if starting else ""
        note = "\n".join([*sorted(withheld), *([started] if started else []), *([note] if note else [])])
        if not lines:
            return note
        lines.sort(key=lambda line: 0 if " error: " in line else 1)
        extra = f"\n  (+{len(lines) - MAX_LISTED} more)" if len(lines) > MAX_LISTED else ""
        head = f"Diagnostics this change introduced ({', '.join(sorted(servers))}):"
        report = head + "\n" + "\n".join(f"  {line}" for line in lines[:MAX_LISTED]) + extra
        return report + (f"\n{note}" if note else "")

    def _shown(self, path: Path) -> str:
        with contextlib.suppress(ValueError):
            return path.relative_to(self.workspace).as_posix()
        return str(path)

    async def aclose(self) -> None:
        warming = list(self._warming)
        for task in warming:
            task.cancel()
        # Waited for: a start they cancel kills its half-started server on the way out.
        await asyncio.gather(*warming, return_exceptions=True)
        for state in self.states.values():
            client, state.client = state.client, None
            if client is not None:
                await client.stop()


def _silence(asked: bool) -> str:
    """What a server's silence was: it did not answer a request, or published nothing (which
    some servers do when a change leaves the diagnostics as they were: no proof of anything)."""
    return "did not answer" if asked else "sent none for this change"


def _new_ones(before: list[Diagnostic], after: list[Diagnostic]) -> list[Diagnostic]:
    """What ``after`` has that ``before`` did not (by severity, message and code: lines move)."""
    old = Counter(d.key for d in before)
    new: list[Diagnostic] = []
    for diagnostic in sorted(after, key=lambda d: (d.severity, d.line, d.character)):
        if old[diagnostic.key] > 0:
            old[diagnostic.key] -= 1
        else:
            new.append(diagnostic)
    return new


def _line(shown: str, d: Diagnostic) -> str:
    code = f" [{d.code}]" if d.code else ""
    return f"{shown}:{d.line}:{d.character} {SEVERITY.get(d.severity, 'error')}: {d.message.splitlines()[0]}{code}"
