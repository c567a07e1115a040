"""The ``container`` runner: commands in a Podman (or Docker) container, the workspace mounted.

The session starts one long-lived container from a local image (Roder never pulls: a missing
image is an error that says how to get it) with the thread's workspace mounted at ``/workspace``
(or the ``workspace`` setting), no network (``--network none``) unless the runner's ``network``
or ``[network] commands`` grants it, every capability dropped and ``no-new-privileges``. Each
command is one ``exec`` in it through the launcher (``launcher``), with the scrubbed environment
and nothing else; its process group is killed in the container when it ends, times out or is
interrupted. Files are the mounted folder, so the file tools use the local workspace broker
(same scope and protections as the local runner) and see exactly what commands see. Resource
limits are set within Roder's own (``container_ulimits``), and ``oci_runtime`` picks the OCI
runtime (``runc`` where crun refuses a machine's cgroup layout).

The container is the sandbox: there is no bubblewrap inside it.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from roder_core.brokers import Brokers
from roder_core.brokers.host_programs import system_program
from roder_core.brokers.network import AllowlistNetworkBroker
from roder_core.brokers.runner_process import CommandExit, RunnerProcessBroker
from roder_core.brokers.secrets import EnvSecretBroker, SecretRedactor, provider_key_names, runtime_redactor
from roder_core.kernel.services import (
    ForwardedPort,
    InternalCommandResult,
    RunnerAvailability,
    RunnerDefinition,
    RunnerOpenContext,
    RunnerScope,
)
from roder_core.settings.runners import RunnerConfig

from . import CONTAINER_DESCRIPTION
from .launcher import GROUP_WAIT, GroupSniffer, kill_argv, launcher_argv
from .local import run_local

ENGINES = ("podman", "docker")
EXIT_GRACE = 0.5
#: The environment commands start from (the image's own is replaced by the scrubbed one).
BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "LANG": "C.UTF-8"}
PROBED_PROGRAMS = ("bash", "sh", "git", "rg", "awk", "setsid", "python3")


async def probe_engine(engine: str) -> tuple[bool, str, str]:
    """(works, version or reason, binary) for one engine."""
    binary = system_program(engine)
    if binary is None:
        return False, f"{engine} is not installed", ""
    result = await run_local([binary, "version", "--format", "{{.Server.Version}}" if engine == "docker" else "{{.Version}}"], 30)
    if result.exit_code != 0:
        why = (result.stderr or result.stdout).strip().splitlines()
        return False, f"{engine} is installed but does not work: {why[-1] if why else 'no output'}", binary
    return True, result.stdout.strip(), binary


#: The most ``RLIMIT_NPROC`` a container is given. A rootful Podman lowers its own limit to this
#: before it starts the OCI runtime (seen with strace: Debian 12, Podman 4.3), and without
#: CAP_SYS_RESOURCE the runtime can only lower limits, never raise them.
MAX_NPROC = 32768
#: The most ``RLIMIT_NOFILE`` a container is given (Podman's own default).
MAX_NOFILE = 1048576


def container_ulimits() -> list[str]:
    """``--ulimit`` options within Roder's own hard limits. Podman's defaults (1048576 open
    files and processes) make crun and runc fail with "setrlimit ... Operation not permitted"
    wherever the engine may not raise its limits that high (inside a VM or another container).
    ``run_args`` come after these, so a ``--ulimit`` there replaces them."""
    import resource

    def within(limit: int, ceiling: int) -> int:
        hard = resource.getrlimit(limit)[1]
        return ceiling if hard == resource.RLIM_INFINITY else min(hard, ceiling)

    nofile = within(resource.RLIMIT_NOFILE, MAX_NOFILE)
    nproc = within(resource.RLIMIT_NPROC, MAX_NPROC)
    return ["--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", f"nproc={nproc}:{nproc}"]


def start_hint(said: str, runner: str) -> str:
    """What to change in ``[runners.NAME]`` for the engine failures with a known remedy."""
    if "cgroups in hybrid mode" in said:
        return (
            f'; crun cannot run with cgroups in hybrid mode here: set oci_runtime = "runc" in [runners.{runner}] '
            "(apt-get install runc)"
        )
    if "setrlimit" in said or "error setting rlimit" in said:
        lower = '["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096"]'
        return f"; lower the limits with run_args = {lower} in [runners.{runner}]"
    return ""


class ContainerCommands:
    """``CommandTransport``: one ``exec`` per command, killed by process group in the container."""

    def __init__(self, engine: list[str], container: str, mount: str, local_workspace: str, *, setsid: bool) -> None:
        self._engine = engine
        self._container = container
        self._mount = mount
        self._local = local_workspace
        self._setsid = setsid

    def container_path(self, path: str) -> str:
        if path == self._local:
            return self._mount
        if path.startswith(self._local + "/"):
            return self._mount + path[len(self._local) :]
        return path

    async def execute(
        self,
        argv: list[str],
        *,
        cwd: str,
        env: dict[str, str],
        timeout: float | None,
        on_stdout: Callable[[bytes], None],
        on_stderr: Callable[[bytes], None],
        on_group: Callable[[int], None] | None = None,
    ) -> CommandExit:
        sniffer = GroupSniffer(on_stderr, on_group)
        command = launcher_argv(argv, self.container_path(cwd), env, setsid=self._setsid)
        proc = await asyncio.create_subprocess_exec(
            *self._engine,
            "exec",
            "-i",
            self._container,
            *command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert proc.stdout is not None and proc.stderr is not None
        pumps = asyncio.gather(_pump(proc.stdout, on_stdout), _pump(proc.stderr, sniffer.feed))
        timed_out = False
        try:
            try:
                async with asyncio.timeout(timeout):
                    await proc.wait()
            except TimeoutError:
                timed_out = True
        finally:
            await asyncio.shield(self._kill(sniffer, running=proc.returncode is None))
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await asyncio.shield(proc.wait())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(EXIT_GRACE * 4):
                    await asyncio.shield(pumps)
            sniffer.flush()
        return CommandExit(None if timed_out else proc.returncode, timed_out)

    async def _kill(self, sniffer: GroupSniffer, *, running: bool) -> None:
        pgid = await sniffer.group(GROUP_WAIT) if running else sniffer.pgid
        sniffer.stopping()
        if pgid is not None:
            await run_local([*self._engine, "exec", self._container, *kill_argv(pgid)], 30)


async def _pump(stream: asyncio.StreamReader, sink: Callable[[bytes], None]) -> None:
    while chunk := await stream.read(65536):
        sink(chunk)


class ContainerSession:
    kind = "container"
    files_local = True

    def __init__(
        self,
        name: str,
        config: RunnerConfig,
        context: RunnerOpenContext,
        engine: list[str],
        version: str,
        container: str,
        network: bool,
    ) -> None:
        self.name = name
        self._config = config
        self._engine = engine
        self._version = version
        self.container = container
        self.network = network
        self.mount = config.workspace or "/workspace"
        self.local_workspace = str(context.local_workspace)
        #: Snapshots run on this machine: the files are the mounted local folder.
        self.workspace = self.local_workspace
        self.state_dir = str(context.cache_dir)
        self.programs: dict[str, str] = {}
        self._bridges: dict[int, asyncio.Server] = {}

    async def probe(self) -> None:
        script = "; ".join(f"command -v {name} || true" for name in PROBED_PROGRAMS)
        found = await self.run_internal(["sh", "-c", script])
        self.programs = {line.rsplit("/", 1)[-1]: line for line in found.stdout.split() if line.startswith("/")}

    def brokers(self, scope: RunnerScope) -> Brokers:
        config = scope.config
        audit = scope.audit
        # the files are this machine's (the mounted folder): the local file broker serves them,
        # with every rule of the local one (the content gate, Roder's own folders, extra roots)
        fs = scope.local_brokers().fs
        local_env = dict(scope.env)
        redactor = scope.redactor if isinstance(scope.redactor, SecretRedactor) else runtime_redactor(local_env, config)
        process = RunnerProcessBroker(
            fs,
            ContainerCommands(self._engine, self.container, self.mount, self.local_workspace, setsid="setsid" in self.programs),
            base_env=BASE_ENV,
            spill_dir=scope.spill_dir,
            sandbox_level=f"container ({'network' if self.network else 'no network'})",
            programs=self.programs,
            capabilities=scope.capabilities,
            pass_env=config.secrets.pass_env,
            secret_names=provider_key_names(config),
            redactor=redactor,
            audit=audit,
            extension_id=scope.extension_id,
            default_timeout=config.limits.bash_timeout,
        )
        network = AllowlistNetworkBroker(
            config.network.allow, capabilities=scope.capabilities, audit=audit, extension_id=scope.extension_id
        )
        return Brokers(fs=fs, process=process, network=network, secrets=EnvSecretBroker(redactor, local_env, scope.capabilities))

    def describe(self) -> dict[str, Any]:
        return {
            "engine": Path(self._engine[0]).name,
            "ociRuntime": self._config.oci_runtime or "the engine's default",
            "engineVersion": self._version,
            "image": self._config.image,
            "container": self.container,
            "mount": f"{self.local_workspace} -> {self.mount}",
            "runnerWorkspace": self.mount,
            "network": self.network,
            "sandbox": "the container (no network, all capabilities dropped, no-new-privileges)"
            if not self.network
            else "the container (network granted, all capabilities dropped, no-new-privileges)",
            "programs": sorted(self.programs),
            "forwardedPorts": sorted(self._bridges),
        }

    async def run_internal(self, argv: list[str], *, timeout: float = 60.0) -> InternalCommandResult:
        return await run_local([*self._engine, "exec", self.container, *argv], timeout)

    async def forward_port(self, port: int, local_port: int = 0) -> ForwardedPort:
        """A local listener; each connection is bridged by an ``exec`` into the container that
        connects to the port there (bash's ``/dev/tcp``), so no port is published and the
        container's network stays off."""
        if "bash" not in self.programs:
            raise OSError(f"forwarding a container port needs bash in the image {self._config.image}")
        engine, container = self._engine, self.container

        async def bridge(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            # the port's answers are copied in the foreground: when the port closes, the upstream
            # copy is stopped too, so the script ends and the local client sees the close. (A
            # background job's stdin is /dev/null unless given another: hence fd 4.)
            script = f"exec 3<>/dev/tcp/127.0.0.1/{port} || exit 1; exec 4<&0; cat <&4 >&3 & up=$!; cat <&3; kill $up 2>/dev/null"
            proc = await asyncio.create_subprocess_exec(
                *engine, "exec", "-i", container, "bash", "-c", script,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
            )  # fmt: skip
            assert proc.stdin is not None and proc.stdout is not None

            async def upstream() -> None:
                assert proc.stdin is not None
                while chunk := await reader.read(65536):
                    proc.stdin.write(chunk)
                    await proc.stdin.drain()
                proc.stdin.close()

            async def downstream() -> None:
                assert proc.stdout is not None
                while chunk := await proc.stdout.read(65536):
                    writer.write(chunk)
                    await writer.drain()
                writer.close()

            try:
                await asyncio.gather(upstream(), downstream())
            except (ConnectionError, OSError):
                pass
            finally:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
                writer.close()

        server = await asyncio.start_server(bridge, "127.0.0.1", local_port)
        self._bridges[port] = server
        bound = server.sockets[0].getsockname()[1]
        return ForwardedPort(
            port, "127.0.0.1", int(bound), f"{Path(engine[0]).name} exec bridge to 127.0.0.1:{port} in the container"
        )

    async def push(self, local: Path) -> None:
        return None  # the runner's workspace is the local folder

    async def pull(self, local: Path) -> None:
        return None

    async def close(self) -> None:
        for server in self._bridges.values():
            server.close()
        await run_local([*self._engine, "rm", "-f", "-t", "0", self.container], 60)


class ContainerRunnerProvider:
    def __init__(self) -> None:
        self._probed: dict[str, tuple[bool, str, str]] = {}

    def id(self) -> str:
        return "container"

    def description(self) -> str:
        return CONTAINER_DESCRIPTION

    async def _engine(self, wanted: str = "auto") -> tuple[bool, str, str, str]:
        """(works, version or reason, binary, engine name)."""
        reasons = []
        for engine in ENGINES if wanted == "auto" else (wanted,):
            if engine not in self._probed:
                self._probed[engine] = await probe_engine(engine)
            works, detail, binary = self._probed[engine]
            if works:
                return True, detail, binary, engine
            reasons.append(detail)
        return False, "; ".join(reasons), "", ""

    async def availability(self) -> RunnerAvailability:
        works, detail, binary, engine = await self._engine()
        if not works:
            return RunnerAvailability(False, f"neither Podman nor Docker works here ({detail})")
        return RunnerAvailability(True, details={"engine": engine, "version": detail, "binary": binary})

    def check(self, definition: RunnerDefinition) -> None:
        RunnerConfig.of("container", definition.settings)
        for key in ("host", "user", "identity_file", "known_hosts", "bubblewrap"):
            if key in definition.settings:
                raise ValueError(f"{key} is an ssh setting; a container runner does not take it")

    async def open(self, definition: RunnerDefinition, context: RunnerOpenContext) -> ContainerSession:
        config = RunnerConfig.of("container", definition.settings)
        works, detail, binary, engine = await self._engine(config.engine)
        if not works:
            raise OSError(f"runner {definition.name!r}: {detail}")
        image = str(config.image)
        inspect = await run_local([binary, "image", "inspect", image], 60)
        if inspect.exit_code != 0:
            raise OSError(
                f"image {image} is not on this machine; Roder never pulls images (run `{engine} pull {image}` "
                f"or build it yourself)"
            )
        network = config.network or context.network
        mount = config.workspace or "/workspace"
        name = f"roder-{definition.name}-{secrets.token_hex(4)}"
        oci = config.oci_runtime
        engine_argv = [binary, "--runtime", oci] if oci and engine == "podman" else [binary]
        argv = [*engine_argv, "run", "-d", "--rm", "--pull=never", "--name", name]
        argv += ["--runtime", oci] if oci and engine == "docker" else []
        argv += [] if network else ["--network", "none"]
        argv += ["--cap-drop", "ALL", "--security-opt", "no-new-privileges", *container_ulimits()]
        argv += ["-v", f"{context.local_workspace}:{mount}", "-w", mount, *config.run_args]
        argv += ["--entrypoint", "sleep", image, "infinity"]
        started = await run_local(argv, 120)
        if started.exit_code != 0:
            said = (started.stderr or started.stdout).strip()
            raise OSError(f"{engine} could not start a container from {image}: {said[-500:]}{start_hint(said, definition.name)}")
        session = ContainerSession(definition.name, config, context, engine_argv, detail, name, network)
        try:
            await session.probe()
        except BaseException:
            await session.close()
            raise
        return session
