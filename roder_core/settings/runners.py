"""``[runners.NAME]`` tables of config.toml: where a thread's tools may execute.

Each table names its ``kind`` (the provider that opens it: ``local``, ``ssh``, ``container``)
and that kind's settings. Unknown keys are refused, so a misspelt ``identity_file`` is an error
at startup instead of a silently ignored setting. A project's ``.roder/config.toml`` can define
runners only once the folder is trusted (like the rest of that file).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from roder_core.ir import empty_list

#: The runner every thread uses until another is selected.
LOCAL_RUNNER = "local"


class RunnerConfig(BaseModel):
    """One ``[runners.NAME]`` table."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    kind: Literal["local", "ssh", "container"]
    description: str = ""
    #: ``turn``: snapshot the workspace when each turn starts, tied to its user message, so a
    #: rewind to that message restores what shell commands changed too (``runners/snapshot``).
    snapshots: Literal["off", "turn"] = "off"
    # ---- ssh
    host: str | None = None
    port: int = Field(default=22, ge=1, le=65535)
    user: str | None = None
    #: Private key file (``~`` allowed); without it, the SSH agent and the default keys are used.
    identity_file: str | None = None
    #: known_hosts file checked against the host's key (default: ``~/.ssh/known_hosts``).
    #: There is no way to switch host key checking off.
    known_hosts: str | None = None
    #: ``auto``: sandbox each command with bubblewrap when it works on that host; ``require``:
    #: refuse commands when it does not; ``off``: never.
    bubblewrap: Literal["auto", "require", "off"] = "auto"
    connect_timeout: float = Field(default=15.0, gt=0)
    # ---- ssh and container: the workspace path as the runner sees it
    #: ssh: the remote workspace folder (required); container: where the local workspace is
    #: mounted (default ``/workspace``).
    workspace: str | None = None
    # ---- container
    #: ``auto`` takes Podman, then Docker, whichever works.
    engine: Literal["auto", "podman", "docker"] = "auto"
    image: str | None = None
    #: Commands in the container reach the network (off by default: ``--network none``).
    network: bool = False
    #: Extra ``podman run`` / ``docker run`` options (``--memory 2g``); never a shell string.
    #: They come after Roder's own, so ``--ulimit nofile=1024:1024`` here replaces Roder's.
    run_args: list[str] = Field(default_factory=empty_list)
    #: The OCI runtime the engine starts the container with (``podman --runtime``, ``docker
    #: run --runtime``), a name or a path: ``runc`` where crun cannot run (cgroups in hybrid
    #: mode); unset, the engine's default.
    oci_runtime: str | None = Field(default=None, min_length=1, pattern=r"^\S+$")

    @model_validator(mode="after")
    def _required(self) -> RunnerConfig:
        if self.kind == "ssh":
            missing = [key for key in ("host", "workspace") if not getattr(self, key)]
            if missing:
                raise ValueError(f"an ssh runner needs {' and '.join(missing)}")
            if not str(self.workspace).startswith("/"):
                raise ValueError("workspace must be an absolute path on the remote host")
        if self.kind == "container":
            if not self.image:
                raise ValueError("a container runner needs an image (a local one: Roder never pulls)")
            if self.workspace is not None and not self.workspace.startswith("/"):
                raise ValueError("workspace must be an absolute path inside the container")
        return self

    def settings(self) -> dict[str, Any]:
        """The settings written in the table, as the provider receives them."""
        return self.model_dump(exclude={"kind", "description", "snapshots"}, exclude_unset=True, exclude_none=True)

    @classmethod
    def of(cls, kind: str, settings: dict[str, Any]) -> RunnerConfig:
        """A provider's typed view of a definition's settings (defaults filled in)."""
        return cls.model_validate({"kind": kind, **settings})
