"""The ``ssh`` runner: a workspace on another machine, reached with asyncssh.

File tools go through SFTP (``SftpTransport`` under the core's ``TransportFileSystem``, which
keeps the workspace scope, protected names and git-dir protection); commands run over an exec
channel (``SshCommands`` under the core's ``RunnerProcessBroker``, which keeps the grants, the
environment scrubbing and the output redaction). Policy and approvals are decided before a
broker is reached, so they are the same as for the local runner.

Each command is wrapped in bubblewrap on the host when ``bwrap`` works there (probed when the
session opens; ``runners/session`` says which): the whole filesystem read-only, the workspace
writable, protected names in it re-bound read-only, the remote user's credential folders
masked, a private ``/tmp``, PID and IPC namespaces, no network unless ``[network] commands``.
The host key must be known (``known_hosts``); there is no setting that skips that check.

asyncssh runs on a thread of its own with its own event loop: the file broker's interface is
synchronous (tools call it between awaits), and a blocking SFTP round trip there must not stall
the loop the connection itself lives on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import posixpath
import secrets
import shlex
import signal
import stat as stat_mod
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from roder_core.brokers import Brokers
from roder_core.brokers.content_gate import ContentGate, ReadRules
from roder_core.brokers.network import AllowlistNetworkBroker
from roder_core.brokers.protected_names import PROTECTED_DIRS, PROTECTED_FILES
from roder_core.brokers.runner_fs import RemoteStat, TransportFileSystem
from roder_core.brokers.runner_process import CommandExit, RunnerProcessBroker
from roder_core.brokers.secret_paths import default_deny_read
from roder_core.brokers.secrets import EnvSecretBroker, SecretRedactor, provider_key_names, runtime_redactor
from roder_core.kernel.services import (
    ForwardedPort,
    InternalCommandResult,
    RunnerAvailability,
    RunnerDefinition,
    RunnerOpenContext,
    RunnerScope,
)
from roder_core.policy.rules import RuleSet
from roder_core.settings.runners import RunnerConfig

from . import SSH_DESCRIPTION
from .launcher import GROUP_WAIT, GroupSniffer, kill_argv, launcher_argv

T = TypeVar("T")
A = TypeVar("A")
#: After the command exits, how long background children may keep writing before the kill.
EXIT_GRACE = 0.5
#: Programs whose location the tools ask for (``ProcessBroker.which``).
PROBED_PROGRAMS = ("bash", "sh", "git", "rg", "awk", "bwrap", "setsid", "python3")
#: Left out of commands' environment: with them, bash sources the remote ~/.bashrc for every
#: command (it takes them as a sign that sshd started it).
_SESSION_VARIABLES = frozenset({"SSH_CLIENT", "SSH2_CLIENT", "SSH_CONNECTION", "SSH_TTY"})
_BWRAP_TEST = [
    "bwrap",
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--unshare-pid",
    "--unshare-net",
    "--die-with-parent",
    "--new-session",
    "true",
]


class _LoopThread:
    """An event loop on a daemon thread, where the connection lives."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="roder-ssh-runner", daemon=True)
        self._thread.start()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = 120.0) -> T:
        """Run ``coro`` there and wait for it here (the synchronous file broker)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` there and await it here. Cancelling here cancels it there and waits
        until it has finished its cleanup (a command's kill on the host), so a stopped command
        is gone when the cancellation returns."""
        here = asyncio.get_running_loop()
        finished: asyncio.Future[T] = here.create_future()
        started: list[asyncio.Task[T]] = []

        def settle(task: asyncio.Task[T]) -> None:
            def transfer() -> None:
                if finished.done():
                    return
                if task.cancelled():  # not by us: the session is closing under it
                    finished.set_exception(ConnectionError("the runner's ssh session was closed"))
                elif (error := task.exception()) is not None:
                    finished.set_exception(error)
                else:
                    finished.set_result(task.result())

            here.call_soon_threadsafe(transfer)

        def start() -> None:
            task = self.loop.create_task(coro)
            started.append(task)
            task.add_done_callback(settle)

        self.loop.call_soon_threadsafe(start)
        try:
            return await asyncio.shield(finished)
        except asyncio.CancelledError:
            # ``start`` was queued first, so the task exists when this runs there
            self.loop.call_soon_threadsafe(lambda: started[0].cancel())
            with contextlib.suppress(BaseException):
                await finished
            raise

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self.loop.close()


def _sftp_errors(exc: Exception, path: str) -> Exception:
    import asyncssh

    if isinstance(exc, asyncssh.SFTPNoSuchFile):
        return FileNotFoundError(f"{path}: no such file or folder")
    if isinstance(exc, asyncssh.SFTPPermissionDenied):
        return PermissionError(f"{path}: permission denied on the remote host")
    if isinstance(exc, asyncssh.SFTPFailure) and "directory" in str(exc).lower():
        return NotADirectoryError(f"{path}: {exc}")
    return OSError(f"{path}: {exc}")


def _remote_stat(attrs: Any) -> RemoteStat:
    mode = attrs.permissions or 0
    kind: Any = "other"
    if stat_mod.S_ISLNK(mode):
        kind = "symlink"
    elif stat_mod.S_ISDIR(mode):
        kind = "dir"
    elif stat_mod.S_ISREG(mode):
        kind = "file"
    return RemoteStat(kind, int(attrs.size or 0), float(attrs.mtime or 0), getattr(attrs, "nlink", None))


class SftpTransport:
    """``FileTransport`` over one SFTP channel (each call a round trip on the ssh thread)."""

    def __init__(self, loop: _LoopThread, sftp: Any) -> None:
        self._loop = loop
        self._sftp = sftp

    def _call(self, path: str, coro: Coroutine[Any, Any, T]) -> T:
        import asyncssh

        try:
            return self._loop.call(coro)
        except asyncssh.SFTPError as exc:
            raise _sftp_errors(exc, path) from None

    def realpath(self, path: str) -> str:
        real = self._call(path, self._sftp.realpath(path))
        # OpenSSH resolves a missing last component too; the broker needs to know it is missing
        self._call(path, self._sftp.lstat(real))
        return str(real)

    def lstat(self, path: str) -> RemoteStat:
        return _remote_stat(self._call(path, self._sftp.lstat(path)))

    def read(self, path: str, max_bytes: int | None) -> bytes:
        async def read() -> bytes:
            async with self._sftp.open(path, "rb") as handle:
                data: bytes = await handle.read(-1 if max_bytes is None else max_bytes)
                return data

        return self._call(path, read())

    def write_atomic(self, path: str, data: bytes) -> None:
        folder, name = posixpath.split(path)
        tmp = posixpath.join(folder, f".{name}.roder-{secrets.token_hex(4)}.tmp")

        async def write() -> None:
            mode = 0o644
            with contextlib.suppress(Exception):
                mode = stat_mod.S_IMODE((await self._sftp.lstat(path)).permissions or 0o644)
            try:
                async with self._sftp.open(tmp, "wb", asyncssh_attrs(0o600)) as handle:
                    await handle.write(data)
                await self._sftp.chmod(tmp, mode)
                await self._sftp.posix_rename(tmp, path)
            except BaseException:
                with contextlib.suppress(Exception):
                    await self._sftp.remove(tmp)
                raise

        self._call(path, write())

    def mkdir(self, path: str) -> None:
        self._call(path, self._sftp.mkdir(path))

    def unlink(self, path: str) -> None:
        self._call(path, self._sftp.remove(path))

    def rename(self, source: str, target: str) -> None:
        self._call(source, self._sftp.posix_rename(source, target))

    def listdir(self, path: str) -> list[tuple[str, RemoteStat]]:
        names = self._call(path, self._sftp.readdir(path))
        return [(str(n.filename), _remote_stat(n.attrs)) for n in names if n.filename not in (".", "..")]


def asyncssh_attrs(mode: int) -> Any:
    import asyncssh

    return asyncssh.SFTPAttrs(permissions=mode)


def _exit_code(status: int | None, signal_name: str | None) -> int | None:
    if status is not None:
        return status
    if signal_name:
        with contextlib.suppress(KeyError):
            return -signal.Signals["SIG" + signal_name].value
    return None


class SshCommands:
    """``CommandTransport`` over exec channels; kills the command's process group on the host."""

    def __init__(self, loop: _LoopThread, conn: Any, *, setsid: bool) -> None:
        self._loop = loop
        self._conn = conn
        self._setsid = setsid

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
        main = asyncio.get_running_loop()
        # the callbacks belong to the caller's loop: hand each call over to it
        stdout = _handover(main, on_stdout)
        stderr = _handover(main, on_stderr)
        group = _handover(main, on_group) if on_group is not None else None
        command = shlex.join(launcher_argv(argv, cwd, env, setsid=self._setsid))
        return await self._loop.run(self._execute(command, timeout, stdout, stderr, group))

    async def _execute(
        self,
        command: str,
        timeout: float | None,
        on_stdout: Callable[[bytes], None],
        on_stderr: Callable[[bytes], None],
        on_group: Callable[[int], None] | None,
    ) -> CommandExit:
        import asyncssh

        sniffer = GroupSniffer(on_stderr, on_group)
        loop = asyncio.get_running_loop()
        exited: asyncio.Future[int | None] = loop.create_future()
        closed: asyncio.Future[None] = loop.create_future()

        class Session(asyncssh.SSHClientSession[bytes]):
            def data_received(self, data: bytes, datatype: Any) -> None:
                if datatype == asyncssh.EXTENDED_DATA_STDERR:
                    sniffer.feed(data)
                else:
                    on_stdout(data)

            def exit_status_received(self, status: int) -> None:
                if not exited.done():
                    exited.set_result(status)

            def exit_signal_received(self, signal: str, core_dumped: bool, msg: str, lang: str) -> None:
                if not exited.done():
                    exited.set_result(_exit_code(None, signal))

            def connection_lost(self, exc: Exception | None) -> None:
                if not closed.done():
                    closed.set_result(None)

        channel, _session = await self._conn.create_session(Session, command, encoding=None)
        timed_out = False
        try:
            try:
                ending: set[asyncio.Future[Any]] = {exited, closed}
                async with asyncio.timeout(timeout):
                    await asyncio.shield(asyncio.wait(ending, return_when=asyncio.FIRST_COMPLETED))
            except TimeoutError:
                timed_out = True
            else:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(EXIT_GRACE):
                        await asyncio.shield(closed)
        finally:
            # timeout, interrupt or done: nothing the command started outlives it
            await asyncio.shield(self._kill(sniffer, running=not (exited.done() or closed.done())))
            channel.close()
            sniffer.flush()
        code = exited.result() if exited.done() else None
        return CommandExit(None if timed_out else code, timed_out)

    async def _kill(self, sniffer: GroupSniffer, *, running: bool) -> None:
        pgid = await sniffer.group(GROUP_WAIT) if running else sniffer.pgid
        sniffer.stopping()
        if pgid is None:
            return
        with contextlib.suppress(Exception):
            async with asyncio.timeout(15):
                await self._conn.run(shlex.join(kill_argv(pgid)), check=False)


def _tar(folder: Path) -> bytes:
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for child in sorted(folder.iterdir()):
            archive.add(child, arcname=child.name)
    return buffer.getvalue()


def _untar(data: bytes, folder: Path) -> None:
    import io
    import shutil
    import tarfile

    for child in folder.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        archive.extractall(folder, filter="data")


def _handover(loop: asyncio.AbstractEventLoop, callback: Callable[[A], None]) -> Callable[[A], None]:
    def deliver(value: A) -> None:
        loop.call_soon_threadsafe(callback, value)

    return deliver


class SshSession:
    """One connection to the host, its SFTP channel and what was probed there."""

    kind = "ssh"
    files_local = False

    def __init__(
        self,
        name: str,
        config: RunnerConfig,
        context: RunnerOpenContext,
        loop: _LoopThread,
        conn: Any,
        sftp: Any,
        probe: dict[str, Any],
    ) -> None:
        self.name = name
        self._config = config
        self._context = context
        self._loop = loop
        self._conn = conn
        self._sftp = sftp
        self._probe = probe
        self.workspace = probe["workspace"]
        self.state_dir = posixpath.join(probe["home"] or "/tmp", ".cache", "roder")
        self._listeners: dict[int, Any] = {}
        self.sandbox, self.sandbox_reason = self._sandbox_choice()

    def _sandbox_choice(self) -> tuple[str, str]:
        wanted = self._config.bubblewrap
        works, why = self._probe["bwrap"]
        if wanted == "off":
            return "off", 'bubblewrap = "off" in the runner\'s settings'
        if works:
            return "bubblewrap", f"bubblewrap works on {self._config.host}"
        return ("blocked" if wanted == "require" else "off"), why

    # ------------------------------------------------------------------ brokers

    def brokers(self, scope: RunnerScope) -> Brokers:
        config = scope.config
        audit = scope.audit
        fs = TransportFileSystem(
            SftpTransport(self._loop, self._sftp),
            self.workspace,
            local_workspace=scope.workspace,
            capabilities=scope.capabilities,
            audit=audit,
            extension_id=scope.extension_id,
            # the runtime's live rules: a read rule an answer adds applies to this session at once
            gate=ContentGate(Path(self.workspace), rules=_read_rules(scope)),
        )
        local_env = dict(scope.env)
        redactor = scope.redactor if isinstance(scope.redactor, SecretRedactor) else runtime_redactor(local_env, config)
        blocked = None
        if self.sandbox == "blocked":
            blocked = (
                f"runner {self.name!r} requires bubblewrap, which does not work on {self._config.host}: {self.sandbox_reason}"
            )
        network = config.network.commands
        process = RunnerProcessBroker(
            fs,
            SshCommands(self._loop, self._conn, setsid="setsid" in self._probe["programs"]),
            base_env=self._probe["env"],
            spill_dir=scope.spill_dir,
            sandbox_level="workspace-write" if self.sandbox == "bubblewrap" else "off",
            wrap=(lambda argv, cwd: self._bubblewrap(argv, cwd, network)) if self.sandbox == "bubblewrap" else None,
            blocked=blocked,
            programs=self._probe["programs"],
            capabilities=scope.capabilities,
            pass_env=config.secrets.pass_env,
            secret_names=provider_key_names(config),
            redactor=redactor,
            audit=audit,
            extension_id=scope.extension_id,
            default_timeout=config.limits.bash_timeout,
        )
        network_broker = AllowlistNetworkBroker(
            config.network.allow, capabilities=scope.capabilities, audit=audit, extension_id=scope.extension_id
        )
        return Brokers(
            fs=fs, process=process, network=network_broker, secrets=EnvSecretBroker(redactor, local_env, scope.capabilities)
        )

    async def _bubblewrap(self, argv: list[str], cwd: str, network: bool) -> list[str]:
        """bwrap around ``argv`` on the host, with the protected names present right now re-bound read-only."""
        workspace = self.workspace
        names = sorted(PROTECTED_DIRS | PROTECTED_FILES)
        find = ["find", workspace, "-xdev", "-maxdepth", "6", "("]
        for index, name in enumerate(names):
            find += (["-o"] if index else []) + ["-name", name]
        find += [")", "-prune", "-print0"]
        listed = await self.run_internal(find, timeout=30)
        protected = [p for p in listed.stdout.split("\0") if p.startswith(workspace + "/")]
        wrapped = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        wrapped += ["--bind", workspace, workspace]
        for path in protected:
            wrapped += ["--ro-bind", path, path]
        for path in self._probe["masks"]:
            if path == workspace or path.startswith(workspace + "/"):
                continue
            wrapped += ["--tmpfs", path] if path in self._probe["mask_dirs"] else ["--ro-bind", "/dev/null", path]
        wrapped += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--new-session", "--die-with-parent", "--cap-drop", "ALL"]
        if not network:
            wrapped.append("--unshare-net")
        wrapped += ["--chdir", cwd, "--", *argv]
        return wrapped

    # ------------------------------------------------------------------ the rest of the session

    def describe(self) -> dict[str, Any]:
        config = self._config
        return {
            "host": config.host,
            "port": config.port,
            "user": self._probe["user"],
            "runnerWorkspace": self.workspace,
            "serverVersion": self._probe["server"],
            "sandbox": self.sandbox,
            "sandboxReason": self.sandbox_reason,
            "programs": sorted(self._probe["programs"]),
            "forwardedPorts": sorted(self._listeners),
        }

    async def run_internal(self, argv: list[str], *, timeout: float = 60.0) -> InternalCommandResult:
        async def run() -> InternalCommandResult:
            async with asyncio.timeout(timeout):
                result = await self._conn.run(shlex.join(argv), check=False, encoding="utf-8", errors="replace")
            return InternalCommandResult(result.exit_status, str(result.stdout or ""), str(result.stderr or ""))

        try:
            return await self._loop.run(run())
        except TimeoutError:
            return InternalCommandResult(None, "", f"{argv[0]} did not finish within {timeout:.0f} s on {self._config.host}")

    async def forward_port(self, port: int, local_port: int = 0) -> ForwardedPort:
        async def forward() -> int:
            listener = await self._conn.forward_local_port("127.0.0.1", local_port, "127.0.0.1", port)
            self._listeners[port] = listener
            return int(listener.get_port())

        bound = await self._loop.run(forward())
        return ForwardedPort(port, "127.0.0.1", bound, f"ssh local forwarding to 127.0.0.1:{port} on {self._config.host}")

    async def push(self, local: Path) -> None:
        """The local folder's files into the remote workspace, as one tar stream over exec."""
        archive = await asyncio.to_thread(_tar, local)

        async def extract() -> Any:
            command = shlex.join(["tar", "-x", "-f", "-", "-C", self.workspace])
            return await self._conn.run(command, input=archive, encoding=None, check=False)

        result = await self._loop.run(extract())
        if result.exit_status != 0:
            raise OSError(f"copying the workspace to {self._config.host} failed: {bytes(result.stderr or b'').decode()[:300]}")

    async def pull(self, local: Path) -> None:
        """Replace the local folder's files with the remote workspace's."""

        async def archive() -> Any:
            command = shlex.join(["tar", "-c", "-f", "-", "-C", self.workspace, "."])
            return await self._conn.run(command, encoding=None, check=False)

        result = await self._loop.run(archive())
        if result.exit_status != 0:
            raise OSError(f"copying the workspace from {self._config.host} failed: {bytes(result.stderr or b'').decode()[:300]}")
        await asyncio.to_thread(_untar, bytes(result.stdout or b""), local)

    async def close(self) -> None:
        async def close() -> None:
            # running commands and background tasks first: each kills its process group on
            # the host while the connection still can
            current = asyncio.current_task()
            running = [task for task in asyncio.all_tasks() if task is not current]
            for task in running:
                task.cancel()
            if running:
                await asyncio.wait(running, timeout=30)
            for listener in self._listeners.values():
                listener.close()
            self._sftp.exit()
            self._conn.close()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(10):
                    await self._conn.wait_closed()

        try:
            await self._loop.run(close())
        finally:
            self._loop.stop()


async def _probe(conn: Any, sftp: Any, config: RunnerConfig) -> dict[str, Any]:
    """What the host offers: its environment, programs, bubblewrap, credential paths to mask."""
    import asyncssh

    async def run(argv: list[str]) -> Any:
        return await conn.run(shlex.join(argv), check=False, encoding="utf-8", errors="replace")

    try:
        workspace = str(await sftp.realpath(config.workspace))
        attrs = await sftp.stat(workspace)
    except asyncssh.SFTPError as exc:
        raise OSError(f"the remote workspace {config.workspace} cannot be used: {exc}") from None
    if not stat_mod.S_ISDIR(attrs.permissions or 0):
        raise OSError(f"the remote workspace {config.workspace} is not a folder")
    env_out = await conn.run("env -0", check=False, encoding=None)
    env: dict[str, str] = {}
    for entry in bytes(env_out.stdout or b"").split(b"\0"):
        name, sep, value = entry.decode("utf-8", "replace").partition("=")
        if sep and name and name not in _SESSION_VARIABLES:
            env[name] = value
    script = "; ".join(f"command -v {name} || true" for name in PROBED_PROGRAMS)
    located = await run(["sh", "-c", script])
    programs = {posixpath.basename(line): line for line in str(located.stdout).split() if line.startswith("/")}
    bwrap: tuple[bool, str]
    if "bwrap" not in programs:
        bwrap = (False, f"bubblewrap is not installed on {config.host}; commands run there without a sandbox")
    else:
        tried = await run(_BWRAP_TEST)
        detail = (str(tried.stderr) or str(tried.stdout)).strip()[:300]
        bwrap = (tried.exit_status == 0, "" if tried.exit_status == 0 else f"bubblewrap does not work on {config.host}: {detail}")
    home = env.get("HOME", "")
    candidates = [str(p) for p in default_deny_read(Path(home))] if home else []
    masks: list[str] = []
    mask_dirs: set[str] = set()
    if candidates:
        # resolved there (``/var/run`` is often a link to ``/run``): bwrap binds onto real paths
        check = "; ".join(
            f'r=$(readlink -f {shlex.quote(p)}) && if [ -d "$r" ]; then echo "d$r"; elif [ -e "$r" ]; then echo "f$r"; fi'
            for p in candidates
        )
        found = await run(["sh", "-c", check])
        for line in str(found.stdout).splitlines():
            if len(line) > 1 and line[1:] not in masks:
                masks.append(line[1:])
                if line[0] == "d":
                    mask_dirs.add(line[1:])
    return {
        "workspace": workspace,
        "env": env,
        "home": home,
        "user": env.get("USER") or env.get("LOGNAME") or config.user or "",
        "programs": programs,
        "bwrap": bwrap,
        "masks": masks,
        "mask_dirs": mask_dirs,
        "server": str(conn.get_extra_info("server_version") or ""),
    }


class SshRunnerProvider:
    def id(self) -> str:
        return "ssh"

    def description(self) -> str:
        return SSH_DESCRIPTION

    async def availability(self) -> RunnerAvailability:
        try:
            import asyncssh
        except ImportError:
            from roder_core.kernel.install_hints import extra_install_hint

            return RunnerAvailability(False, f"asyncssh is not installed: {extra_install_hint('remote')}")
        return RunnerAvailability(True, details={"asyncssh": asyncssh.__version__})

    def check(self, definition: RunnerDefinition) -> None:
        config = RunnerConfig.of("ssh", definition.settings)
        for key in ("engine", "image", "network", "run_args", "oci_runtime"):
            if key in definition.settings:
                raise ValueError(f"{key} is a container setting; an ssh runner does not take it")
        if config.identity_file and not Path(os.path.expanduser(config.identity_file)).is_file():
            raise ValueError(f"identity_file {config.identity_file} does not exist")

    async def open(self, definition: RunnerDefinition, context: RunnerOpenContext) -> SshSession:
        config = RunnerConfig.of("ssh", definition.settings)
        loop = _LoopThread()
        if context.runner_workspace:
            config = config.model_copy(update={"workspace": context.runner_workspace})
        try:
            conn, sftp, probe = await loop.run(_connect(config, create=bool(context.runner_workspace)))
        except BaseException:
            loop.stop()
            raise
        return SshSession(definition.name, config, context, loop, conn, sftp, probe)


async def _connect(config: RunnerConfig, *, create: bool = False) -> tuple[Any, Any, dict[str, Any]]:
    """Connect, open SFTP and probe; ``create`` makes the workspace folder (a batch rollout's)."""
    import asyncssh

    known_hosts = os.path.expanduser(config.known_hosts or "~/.ssh/known_hosts")
    if not os.path.isfile(known_hosts):
        raise OSError(f"known_hosts file {known_hosts} does not exist; Roder checks the host key of every ssh runner")
    options: dict[str, Any] = {
        "port": config.port,
        "known_hosts": known_hosts,
        "connect_timeout": config.connect_timeout,
    }
    if config.user:
        options["username"] = config.user
    if config.identity_file:
        options["client_keys"] = [os.path.expanduser(config.identity_file)]
    target = f"{config.user + '@' if config.user else ''}{config.host}:{config.port}"
    try:
        conn = await asyncssh.connect(config.host, **options)
    except (OSError, asyncssh.Error) as exc:
        raise OSError(f"could not connect to {target}: {exc}") from None
    try:
        sftp = await conn.start_sftp_client()
        if create:
            await sftp.makedirs(str(config.workspace), exist_ok=True)
        probe = await _probe(conn, sftp, config)
    except BaseException:
        conn.close()
        raise
    return conn, sftp, probe


def _read_rules(scope: RunnerScope) -> ReadRules:
    """The read rules of the runner's content gate: the runtime's, live, when it passes them."""
    if scope.read_rules is not None:
        return scope.read_rules
    config = scope.config
    return RuleSet(config.policy.allow, config.policy.ask, config.policy.deny)
