"""What ``roder -p`` and ``roder --version`` import: a list, not a clock.

A one-shot must start fast, and start-up time is mostly imports. Timing them in a test would
fail on a loaded machine and pass a slow change on a quiet one, so this test lists the modules
a real run imported (``sys.modules`` once the command returned: ``python -X importtime`` leaves
out the packages ``importlib.import_module`` loads, such as the extensions' entry points) and
fails when one that the run does not use creeps in: the app's UI libraries, transports of other
front ends, optional remote and batch dependencies, and Roder's parts a one-shot never needs.
``bench/startup.py`` has the timings.
"""

from __future__ import annotations
import __future__

import contextlib
import importlib
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from roder_core.testing.fake_server import ThreadedFakeServer
from tests.e2e.host_support import HostProcess, write_local_provider

#: Never imported by a one-shot with the mock provider (the prefix matches submodules too).
NOT_IN_ONESHOT = (
    "textual",
    "rich",
    "httpx",  # no remote provider in this run
    "websockets",
    "asyncssh",
    "segno",
    "textual_serve",
    "aiohttp",
    "ray",
    "roder_tui.app",
    "roder_tui.widgets",
    "roder_core.teams",  # agent teams load with the first team (team events name their model lazily)
    "roder_core.policy.plan_review",  # plan reviews load with the first exit_plan call
    "roder_core.policy.plan_review_book",
    "roder_ext_process.supervisor",  # process extensions load only when one is declared
    "roder_ext_process.services",
    "roder_ext_process.connection",
    "roder_ext_runners.ssh",  # runners other than this machine load when first checked or opened
    "roder_ext_runners.container",
    "html",  # web_fetch's HTML parser loads with the first page
    "roder_ext_lsp.manager",  # language servers: with the first edit or lsp call
    "roder_ext_lsp.client",
    "roder_ext_lsp.launch",
    "roder_ext_lsp.servers",
    "roder_ext_anthropic.encode",  # a provider's codec loads with its first request (this run: the mock)
    "roder_ext_anthropic.decode",
    "roder_ext_openai_responses.encode",
    "roder_ext_openai_responses.decode",
    "roder_ext_chat_completions.encode",
    "roder_ext_chat_completions.decode",
    "roder_core.plugins.layout",  # a plugin's layout is read only when one applies
    "roder_core.plugins.manifest",
    "roder_core.plugins.dependencies",
    "roder_core.plugins.node_deps",
    "roder_core.server.websocket",
    "roder_core.server.protocol_attach",  # other clients' vocabulary (a host's client loads it)
    "roder_core.server.methods",  # but the handlers of the core methods a one-shot calls (below)
    "roder_core.batch",
    "roder_core.workflows",
)
#: What a one-shot uses of the packages above: the in-process server's core handlers.
ONESHOT_USES = ("roder_core.server.methods", "roder_core.server.methods.core")
#: ``roder --version`` builds the parser and nothing more.
NOT_IN_VERSION = ("pydantic", "roder_core.ir", "roder_core.kernel", "asyncio", "roder_tui.ask")


#: Runs the command line as ``roder`` does, then lists every module the process holds.
LISTING_PROBE = """
import sys
from roder_tui.cli import _guarded
try:
    code, _fast = _guarded(sys.argv[1:])
finally:  # --version exits from the parser
    sys.stderr.write("\\n".join(["--- modules ---", *sorted(sys.modules)]))
sys.exit(code)
"""


def imported(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", LISTING_PROBE, *args],
        cwd=cwd,
        env={**(os.environ if env is None else env), "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    names = set(done.stderr.rpartition("--- modules ---")[2].split())
    assert "roder_tui.startup" in names  # the listing worked (the command line imports it)
    return names


def offenders(names: set[str], banned: tuple[str, ...]) -> list[str]:
    return sorted(name for name in names if any(name == b or name.startswith(b + ".") for b in banned))


def test_oneshot_imports_only_what_it_uses(workspace: Path) -> None:
    names = imported(["-p", "hi", "--provider", "mock"], workspace)
    assert "roder_tui.ask" in names  # it did run the one-shot
    assert offenders(names - set(ONESHOT_USES), NOT_IN_ONESHOT) == []


#: Never imported by a one-shot a running host answers (``roder_tui.ask_host``): the host holds
#: the runtime, the models and the provider; the client only reads and writes JSON lines.
NOT_IN_HOSTED_ONESHOT = (
    "pydantic",
    "pydantic_core",
    "roder_core.ir",
    "roder_core.runtime",
    "roder_core.kernel",
    "roder_core.threads",
    "roder_core.server.protocol",
    "roder_core.server.remote_client",
    "roder_core.server.rpc_client",
    "roder_tui.ask_local",
    "roder_tui.host",
    "roder_core.brokers",  # the terminal sanitizer's pattern: for the json formats and terminals only
    "roder_core.media",  # the image sniffer: when the prompt names a file
    "dataclasses",
    "asyncio",
    "ssl",
    "httpx",
    "textual",
    "rich",
)


def test_a_oneshot_on_a_running_host_imports_no_models_runtime_or_event_loop(roder_home: Path, workspace: Path) -> None:
    flags = ["--provider", "local", "--model", "my-model"]
    with ThreadedFakeServer([{"text": "hosted"}], models=("my-model",)) as server:
        write_local_provider(roder_home, server.base_url)
        host = HostProcess(workspace, roder_home, *flags)
        try:
            names = imported(["-p", "hi", *flags], workspace, host.env)
        finally:
            host.stop()
        assert len(server.calls) == 1  # the host answered it
    assert "roder_tui.ask_host" in names
    assert offenders(names, NOT_IN_HOSTED_ONESHOT) == []


def test_version_imports_no_runtime(workspace: Path) -> None:
    assert offenders(imported(["--version"], workspace), NOT_IN_VERSION) == []


#: Modules of models every start-up builds whose annotations must stay objects: under
#: ``from __future__ import annotations`` pydantic compiles each field's annotation string again
#: when it builds the class (about 3% of a one-shot's instructions over these five).
ANNOTATIONS_AS_OBJECTS = (
    "roder_core.ir",
    "roder_core.threads.events",
    "roder_core.server.protocol",
    "roder_core.settings.config",
    "roder_core.kernel.hook_payloads",
)


def test_start_up_models_are_not_annotated_with_strings() -> None:
    stringly = [
        name
        for name in ANNOTATIONS_AS_OBJECTS
        if vars(importlib.import_module(name)).get("annotations") is __future__.annotations
    ]
    assert stringly == []


#: Modules defining pydantic models with default factories (each ``protocol_*`` module is added).
MODELS_WITH_FACTORIES = (
    "roder_core.ir",
    "roder_core.threads.events",
    "roder_core.threads.sessions",
    "roder_core.settings.config",
    "roder_core.settings.runners",
    "roder_core.kernel.hook_payloads",
    "roder_core.teams.model",
    "roder_core.policy.plan_review",
    "roder_core.workflows.model",
    "roder_core.batch.tasks",
    "roder_ext_memory.tools",
)


def _roder_models() -> list[type[Any]]:
    import pkgutil

    from pydantic import BaseModel

    import roder_core.server

    server = [f"roder_core.server.{info.name}" for info in pkgutil.iter_modules(roder_core.server.__path__)]
    for name in (*MODELS_WITH_FACTORIES, *(n for n in server if n.startswith("roder_core.server.protocol"))):
        importlib.import_module(name)
    seen: list[type[Any]] = []
    todo: list[type[Any]] = [BaseModel]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in seen:
                seen.append(sub)
                todo.append(sub)
    return [model for model in seen if model.__module__.startswith("roder_")]


def test_no_model_default_factory_has_its_signature_parsed_from_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pydantic reads each default factory's signature when it builds a model; a builtin's (``list``)
    is parsed from its text signature by ``tokenize``, whose patterns the first such read compiles
    (about 15 ms of every start). ``ir.empty_list`` is the factory for lists."""
    parsed: list[str] = []
    from_text = inspect._signature_fromstr  # type: ignore[attr-defined]

    def noting(cls: Any, obj: Any, s: str, skip_bound_arg: bool = True) -> Any:
        parsed.append(repr(obj))
        return from_text(cls, obj, s, skip_bound_arg)

    monkeypatch.setattr(inspect, "_signature_fromstr", noting)
    found = []
    models = _roder_models()
    for model in models:
        for name, info in model.model_fields.items():
            if info.default_factory is None:
                continue
            parsed.clear()
            with contextlib.suppress(ValueError, TypeError):
                inspect.signature(info.default_factory)
            if parsed:
                found.append(f"{model.__module__}.{model.__qualname__}.{name}")
    assert len(models) > 200  # the walk found the models
    assert found == []


def test_the_list_catches_a_module_that_creeps_in() -> None:
    assert offenders({"roder_core.teams.manager", "textual.app", "roder_core.teamsmodel"}, NOT_IN_ONESHOT) == [
        "roder_core.teams.manager",
        "textual.app",
    ]


#: Not imported before the app's first frame is drawn: the runtime and the IR (pydantic) come
#: with the runtime after it, a team's panes (``RichLog``, ``rich.pretty``, ``attrs``) with a team.
NOT_BEFORE_FIRST_FRAME = (
    "pydantic",
    "roder_core.ir",
    "roder_core.kernel.services",
    "roder_core.kernel.distribution",
    "roder_core.runtime",
    "roder_core.teams.model",
    "roder_ext_tui",
    "httpx",
    "rich.pretty",
    "attr",
    "roder_tui.widgets.member_pane",
    "roder_core.brokers.file_glob",
    "roder_core.kernel.questions",
    "pygments",
)
FIRST_FRAME_PROBE = """
import asyncio, sys
from roder_tui.app import RoderApp

async def main():
    app = RoderApp()

    async def no_runtime():  # stop where the runtime would start: after the first frame
        pass

    app._boot = no_runtime
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.screen.query_one("#sidebar").region.width > 0  # laid out and drawn
    print("\\n".join(sorted(sys.modules)))

asyncio.run(main())
"""


def _app_probe(code: str, workspace: Path, tmp_path: Path) -> str:
    """What a probe script running the app in a fresh interpreter printed."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=workspace,
        env={**os.environ, "RODER_HOME": str(tmp_path / "home")},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_app_first_frame_imports_no_runtime(workspace: Path, tmp_path: Path) -> None:
    """The app draws its first frame (sidebar, transcript, prompt, status bar) with Textual and
    its own widgets only; everything the runtime brings loads after it (``bench/tui_first_frame.py``)."""
    names = set(_app_probe(FIRST_FRAME_PROBE, workspace, tmp_path).split())
    assert "roder_tui.widgets.transcript" in names  # the probe did build the app
    assert offenders(names, NOT_BEFORE_FIRST_FRAME) == []


METHODS_THREAD_PROBE = """
import argparse, asyncio, json, sys, threading
from pathlib import Path

importers = {}


class WhoImports:
    # Records the thread that imports each of the server's handler modules (finds nothing itself).
    def find_spec(self, name, path=None, target=None):
        if name.startswith("roder_core.server.methods."):
            importers.setdefault(name, threading.current_thread().name)
        return None


sys.meta_path.insert(0, WhoImports())
from roder_tui.app import RoderApp

async def main():
    args = argparse.Namespace(prompt=[], provider="mock", resume=None, continue_last=False, mode=None, model=None, sandbox="off")
    app = RoderApp(args, cwd=Path.cwd())
    async with app.run_test(size=(120, 40)) as pilot:
        async with asyncio.timeout(60):
            await app.ready.wait()
            while not app.slash_commands:
                await pilot.pause(0.02)
    print(json.dumps(importers))

asyncio.run(main())
"""


def test_app_imports_the_server_handlers_off_the_event_loop(workspace: Path, tmp_path: Path) -> None:
    """After start-up the app's first calls of methods beyond the core (``commands/list``, the
    palette's rows, MCP) would make the in-process server import every handler module on the
    event loop, while the first keystrokes wait; the app imports them on a thread first. (The
    core's module loads with the server, before "idle".)"""
    import json

    from roder_core.server.dispatcher import CORE_METHOD_MODULE, METHOD_MODULES

    importers: dict[str, str] = json.loads(_app_probe(METHODS_THREAD_PROBE, workspace, tmp_path).strip().splitlines()[-1])
    handlers = [module for module in METHOD_MODULES if module != CORE_METHOD_MODULE]
    assert set(handlers) <= set(importers)  # the app did call beyond the core
    assert {module: importers[module] for module in handlers if importers[module] == "MainThread"} == {}


#: Runs the app until its runtime is idle with the collector held off as ``roder`` starts it
#: (``cli.run``), noting at "idle" whether the collector is back and which tools' argument
#: schemas are built.
IDLE_PROBE = """
import argparse, asyncio, gc, json
from pathlib import Path

gc.disable()
from roder_core.kernel.tool_args import ToolArguments
from roder_tui.app import RoderApp


def built():
    seen, todo = set(), [ToolArguments]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
    return sorted(f"{m.__module__}.{m.__qualname__}" for m in seen if m.__pydantic_complete__)


at_idle = {}
connect = RoderApp._connect


async def noting(self):
    info = await connect(self)
    at_idle.update(collector=gc.isenabled(), schemas=built())
    return info


RoderApp._connect = noting


async def main():
    args = argparse.Namespace(prompt=[], provider="mock", resume=None, continue_last=False, mode=None, model=None, sandbox="off")
    app = RoderApp(args, cwd=Path.cwd())
    async with app.run_test(size=(120, 40)):
        async with asyncio.timeout(60):
            await app.ready.wait()
    print(json.dumps({**at_idle, "collector_after": gc.isenabled(), "schemas_after": built()}))

asyncio.run(main())
"""

#: The tools whose argument schema is built before "idle": those that build their own spec
#: (``bash`` words its description after the sandbox; ``task`` lists the agents in its schema).
#: Every other tool's waits for the first request (``kernel.tools.registration_spec``).
SCHEMAS_BUILT_BY_IDLE = ("roder_ext_builtin_coding_tools.bash.BashArguments", "roder_ext_subagents.TaskArguments")


def test_app_idle_builds_no_tool_schema_and_collects_no_garbage_before_it(workspace: Path, tmp_path: Path) -> None:
    """Start-up's objects are not walked by the collector until the runtime is up (it was about a
    tenth of the time to "idle"), and the tools' argument schemas are built after "idle" on a
    worker thread (``bench/tui_first_frame.py`` measures the time to "idle")."""
    import json

    seen = json.loads(_app_probe(IDLE_PROBE, workspace, tmp_path).strip().splitlines()[-1])
    assert seen["collector"] is False and seen["collector_after"] is True
    assert set(seen["schemas"]) <= set(SCHEMAS_BUILT_BY_IDLE)
    assert "roder_ext_builtin_coding_tools.read.ReadArguments" in seen["schemas_after"]  # built after idle


#: Runs ``roder serve`` as ``roder`` does, noting the modules and built models at the moment the
#: host says it is ready, and on its way out what was imported or built after that.
HOST_PROBE = """
import sys
from pydantic import BaseModel
import roder_tui.commands.serve as serve
from roder_tui.cli import _guarded

def built():
    seen, todo = set(), [BaseModel]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
    return {f"{m.__module__}.{m.__qualname__}" for m in seen if m.__pydantic_complete__}

at_ready = {}
signal_ready = serve._signal_ready
def noting(fd, line):
    at_ready.update(modules=set(sys.modules), models=built())
    signal_ready(fd, line)
serve._signal_ready = noting
try:
    code, _fast = _guarded(sys.argv[1:])
finally:
    sys.stderr.write("--- imported after ready ---\\n" + " ".join(sorted(set(sys.modules) - at_ready["modules"])) + "\\n")
    sys.stderr.write("--- built after ready ---\\n" + " ".join(sorted(built() - at_ready["models"])) + "\\n")
sys.exit(code)
"""

#: What a host loads before it says it is ready, so that its first client's turn does not wait
#: for it: the method handlers, the model client, the brokers and the command parser.
WARMED_BEFORE_READY = (
    "roder_core.server",
    "roder_core.brokers",
    "roder_core.policy",
    "httpx",
    "httpcore",
    "h11",
    "anyio",
    "tree_sitter",
    "tree_sitter_bash",
    "pydantic",
)


def test_a_new_host_is_ready_for_a_turn_when_it_says_so(roder_home: Path, workspace: Path) -> None:
    """A turn handed to a host right after it said it was ready (a model call over HTTP, a
    sandboxed command) builds no model and imports none of what the host loads ahead."""
    flags = ["--provider", "local", "--model", "my-model"]
    steps = [{"text": "", "tool_calls": [{"name": "bash", "arguments": {"command": "echo hosted"}}]}, {"text": "done"}]
    with ThreadedFakeServer(steps, models=("my-model",)) as server:
        write_local_provider(roder_home, server.base_url)
        host = HostProcess(workspace, roder_home, *flags, launcher=(sys.executable, "-c", HOST_PROBE))
        try:
            done = subprocess.run(
                [sys.executable, "-m", "roder_tui.cli", "-p", "go", *flags, "--mode", "bypass"],
                cwd=workspace,
                env=host.env,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
        finally:
            host.stop()
        assert done.returncode == 0, done.stderr[-3000:]
        assert len(server.calls) == 2 and "hosted" in json.dumps(server.calls[1].json["messages"])  # the host ran it
    report = host.output()
    assert "--- built after ready ---" in report, report[-3000:]  # the probe ran the host to its end
    imported_after = report.partition("--- imported after ready ---\n")[2].partition("\n")[0].split()
    built_after = report.partition("--- built after ready ---\n")[2].partition("\n")[0].split()
    assert offenders(set(imported_after), WARMED_BEFORE_READY) == []
    assert built_after == []
