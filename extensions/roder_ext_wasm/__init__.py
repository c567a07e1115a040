"""Tools as WebAssembly modules, run with Wasmtime: no ambient authority.

Each ``[extensions.wasm.NAME]`` table names a module (``.wasm``, or ``.wat`` text) and a tool
manifest beside it (``NAME.json``: ``name``, ``description``, ``inputSchema``, ``capabilities``,
and ``stdin``: ``"arguments"`` (the default: the call's arguments as JSON) or
``"argument:FIELD"`` (that string argument, raw)). The module is a WASI command: it reads its
input on stdin and answers on stdout; a non-zero exit is an error whose text is its stderr.

What a module may touch is the intersection of what its manifest asks for and what the table
grants: ``fs.read.workspace`` preopens the workspace read-only at ``/workspace``,
``fs.write.workspace`` read-write, ``clock`` lets it read the time. There is nothing else to
ask for: no network (WASI has no sockets here), no environment, no arguments, no other files;
without ``clock`` the clock calls answer ``ENOTCAPABLE``. Fuel (about one unit per instruction),
a memory cap and a wall-clock deadline stop a runaway module with a message saying which.
Why Wasmtime and not a plugin framework built on it: see docs/architecture.md.
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roder_core.kernel.distribution import HostContext
from roder_core.kernel.extension import (
    EXTENSION_API_VERSION,
    ExtensionManifest,
    ProcessState,
    ProvidedService,
    RoderExtension,
)
from roder_core.kernel.registry import RegistryError
from roder_core.kernel.services import ServiceRegistrar
from roder_core.kernel.tools import PolicySubject, Tool, ToolCall, ToolExecutionContext, ToolRegistry, ToolResult
from roder_core.settings.config import WasmToolConfig

#: What a module can be granted; nothing else exists for it.
WASM_CAPABILITIES = ("fs.read.workspace", "fs.write.workspace", "clock")
#: WASI errno for "the capability is missing".
ENOTCAPABLE = 76
#: Output kept from a module's stdout and stderr; more is an error, never silently cut.
MAX_OUTPUT = 4 * 1024 * 1024
GUEST_WORKSPACE = "/workspace"


@dataclass(frozen=True)
class WasmManifest:
    name: str
    description: str
    input_schema: dict[str, Any]
    capabilities: tuple[str, ...]
    stdin: str = "arguments"

    @classmethod
    def load(cls, path: Path) -> WasmManifest:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            manifest = cls(
                name=str(data["name"]),
                description=str(data["description"]),
                input_schema=dict(data.get("inputSchema") or {"type": "object", "properties": {}}),
                capabilities=tuple(str(c) for c in data.get("capabilities", [])),
                stdin=str(data.get("stdin") or "arguments"),
            )
        except FileNotFoundError:
            raise RegistryError(f"{path} is missing: a WebAssembly tool needs its manifest beside it") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise RegistryError(f"{path} is not a tool manifest ({exc})") from None
        unknown = [c for c in manifest.capabilities if c not in WASM_CAPABILITIES]
        if unknown:
            raise RegistryError(f"{path} asks for {', '.join(unknown)}; a module can only have {', '.join(WASM_CAPABILITIES)}")
        return manifest


@dataclass
class Outcome:
    text: str
    is_error: bool


@dataclass
class WasmRunner:
    """One compiled module and what it was granted; runs one call at a time."""

    name: str
    config: WasmToolConfig
    manifest: WasmManifest
    module_path: Path
    granted: frozenset[str]
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        import wasmtime

        engine_config = wasmtime.Config()
        engine_config.consume_fuel = True
        engine_config.epoch_interruption = True
        self.engine = wasmtime.Engine(engine_config)
        data = self.module_path.read_bytes()
        try:
            binary = bytes(wasmtime.wat2wasm(data.decode("utf-8"))) if self.module_path.suffix == ".wat" else data
            self.module = wasmtime.Module(self.engine, binary)
        except (wasmtime.WasmtimeError, UnicodeDecodeError) as exc:
            raise RegistryError(f"WebAssembly tool {self.name}: {self.module_path} does not compile: {exc}") from None

    def run(self, stdin: bytes, workspace: Path, cancelled: threading.Event) -> Outcome:
        import tempfile

        import wasmtime

        with self._lock, tempfile.TemporaryDirectory(prefix="roder-wasm-") as scratch:
            folder = Path(scratch)
            (folder / "in").write_bytes(stdin)
            wasi = wasmtime.WasiConfig()
            wasi.argv = [self.manifest.name]
            wasi.stdin_file = str(folder / "in")
            wasi.stdout_file = str(folder / "out")
            wasi.stderr_file = str(folder / "err")
            if self.granted & {"fs.read.workspace", "fs.write.workspace"}:
                wasi.preopen_dir(str(workspace), GUEST_WORKSPACE, fs_mutable="fs.write.workspace" in self.granted)
            store = wasmtime.Store(self.engine)
            store.set_wasi(wasi)
            store.set_fuel(self.config.fuel)
            store.set_limits(memory_size=self.config.memory_mb * 1024 * 1024)
            store.set_epoch_deadline(1)
            linker = wasmtime.Linker(self.engine)
            linker.define_wasi()
            if "clock" not in self.granted:
                self._deny_clock(linker)
            timer = threading.Timer(self.config.timeout, self.engine.increment_epoch)
            timer.start()
            finished = threading.Event()
            watcher = threading.Thread(target=self._watch, args=(cancelled, finished), daemon=True)
            watcher.start()
            try:
                instance = linker.instantiate(store, self.module)
                start = instance.exports(store)["_start"]
                assert isinstance(start, wasmtime.Func)
                start(store)
                code = 0
            except wasmtime.ExitTrap as exit_trap:
                code = exit_trap.code
            except wasmtime.Trap as trap:
                return Outcome(self._trap_message(trap, store, cancelled), True)
            except wasmtime.WasmtimeError as exc:
                return Outcome(f"{self.name}: the module could not run: {exc}", True)
            finally:
                timer.cancel()
                finished.set()
                cancelled.set()  # wakes the watcher, which sees the call finished
            return self._outcome(folder, code)

    def _watch(self, cancelled: threading.Event, finished: threading.Event) -> None:
        """A cancelled call interrupts the module at its next epoch check."""
        cancelled.wait()
        if not finished.is_set():
            self.engine.increment_epoch()

    def _deny_clock(self, linker: Any) -> None:
        import wasmtime

        linker.allow_shadowing = True
        i32, i64 = wasmtime.ValType.i32(), wasmtime.ValType.i64()

        def refused(*_args: Any) -> int:
            return ENOTCAPABLE

        linker.define_func("wasi_snapshot_preview1", "clock_time_get", wasmtime.FuncType([i32, i64, i32], [i32]), refused)
        linker.define_func("wasi_snapshot_preview1", "clock_res_get", wasmtime.FuncType([i32, i32], [i32]), refused)
        # poll_oneoff sleeps on clock subscriptions: without the clock there is no sleeping either.
        linker.define_func("wasi_snapshot_preview1", "poll_oneoff", wasmtime.FuncType([i32, i32, i32, i32], [i32]), refused)

    def _trap_message(self, trap: Any, store: Any, cancelled: threading.Event) -> str:
        text = str(trap)
        if "all fuel consumed" in text or store.get_fuel() == 0:
            where = f"[extensions.wasm.{self.name}] fuel"
            return f"{self.name} was stopped: it ran out of fuel ({self.config.fuel:,} units; raise {where})"
        if "interrupt" in text:
            if cancelled.is_set():
                return f"{self.name} was stopped: the call was cancelled"
            return f"{self.name} was stopped: it ran longer than {self.config.timeout:g} s"
        first = text.strip().splitlines()[0] if text.strip() else "trap"
        return f"{self.name} trapped: {first} (memory is capped at {self.config.memory_mb} MiB)"

    def _outcome(self, folder: Path, code: int) -> Outcome:
        out, err = folder / "out", folder / "err"
        sizes = [p.stat().st_size if p.exists() else 0 for p in (out, err)]
        if max(sizes) > MAX_OUTPUT:
            return Outcome(f"{self.name} wrote more than {MAX_OUTPUT // (1024 * 1024)} MiB of output; nothing was kept", True)
        stdout = out.read_text(encoding="utf-8", errors="replace") if out.exists() else ""
        stderr = err.read_text(encoding="utf-8", errors="replace") if err.exists() else ""
        if code != 0:
            return Outcome(stderr.strip() or stdout.strip() or f"{self.name} exited with status {code}", True)
        return Outcome(stdout, False)


class WasmTool(Tool):
    def __init__(self, runner: WasmRunner) -> None:
        self.runner = runner
        self.name = runner.manifest.name
        self.description = runner.manifest.description
        self.parameters = runner.manifest.input_schema
        writes = "fs.write.workspace" in runner.granted
        self.read_only = not writes
        self.kind = "other" if writes else "read"

    def policy_subjects(self, arguments: dict[str, Any], workspace: Path) -> list[PolicySubject]:
        return [PolicySubject(tool=self.name, writes=not self.read_only)]

    def _stdin(self, arguments: dict[str, Any]) -> bytes:
        source = self.runner.manifest.stdin
        if source.startswith("argument:"):
            return str(arguments.get(source.removeprefix("argument:"), "")).encode("utf-8")
        return json.dumps(arguments).encode("utf-8")

    async def execute(self, ctx: ToolExecutionContext, call: ToolCall) -> ToolResult:
        cancelled = threading.Event()
        work = asyncio.ensure_future(asyncio.to_thread(self.runner.run, self._stdin(call.arguments), ctx.workspace, cancelled))
        try:
            outcome = await asyncio.shield(work)
        except asyncio.CancelledError:
            cancelled.set()  # the module stops at its next epoch check; its thread then ends
            raise
        return ToolResult(id=call.id, name=call.name, text=outcome.text, is_error=outcome.is_error)


class WasmToolSet:
    def __init__(self, runner: WasmRunner) -> None:
        self.runner = runner

    def id(self) -> str:
        return f"wasm-{self.runner.name}"

    def contribute(self, registry: ToolRegistry) -> None:
        registry.register(WasmTool(self.runner))

    def process_state(self) -> ProcessState:
        granted = tuple(sorted(self.runner.granted))
        return ProcessState(f"wasm:{self.runner.name}", "wasm", "running", sandboxed=True, granted=granted)


class WasmExtension(RoderExtension):
    foreign_tools = True  # the module's manifest names its tool

    def __init__(self, name: str, config: WasmToolConfig, base: Path) -> None:
        self.name = name
        self.config = config
        self.module_path = (base / config.module).resolve() if not Path(config.module).is_absolute() else Path(config.module)
        self.problem: str | None = None
        self.manifest_data: WasmManifest | None = None
        try:
            self.manifest_data = WasmManifest.load(self.module_path.with_suffix(".json"))
        except RegistryError as exc:
            self.problem = str(exc)

    def manifest(self) -> ExtensionManifest:
        return ExtensionManifest(
            id=f"wasm:{self.name}",
            name=self.manifest_data.name if self.manifest_data else self.name,
            version="0.1.0",
            api_version=EXTENSION_API_VERSION,
            description=self.manifest_data.description if self.manifest_data else None,
            provides=[ProvidedService.ToolProvider(f"wasm-{self.name}")] if self.manifest_data else [],
            # A module asks for capabilities in its tool manifest and gets those config grants too
            # (WasmRunner.granted, shown by extensions/list); nothing here is for the profile to grant.
            required_capabilities=[],
        )

    def install(self, registry: ServiceRegistrar) -> None:
        if self.problem is not None or self.manifest_data is None:
            raise RegistryError(f"WebAssembly tool {self.name}: {self.problem}")
        unknown = [c for c in self.config.capabilities if c not in WASM_CAPABILITIES]
        if unknown:
            raise RegistryError(
                f"[extensions.wasm.{self.name}] capabilities: {', '.join(unknown)} cannot be granted to a module "
                f"(only {', '.join(WASM_CAPABILITIES)})"
            )
        try:
            import wasmtime  # noqa: F401
        except ImportError:
            raise RegistryError(
                f"WebAssembly tool {self.name}: the wasmtime package is not installed (pip install 'roder[wasm]')"
            ) from None
        granted = frozenset(self.manifest_data.capabilities) & frozenset(self.config.capabilities)
        runner = WasmRunner(self.name, self.config, self.manifest_data, self.module_path, granted)
        registry.tool_contributor(WasmToolSet(runner))


def create(host: HostContext) -> list[RoderExtension]:
    tables = host.config.extensions.wasm
    if not tables:
        return []
    return [WasmExtension(name, config, host.cwd) for name, config in tables.items() if config.enabled]


__all__ = ["WasmExtension", "create"]
