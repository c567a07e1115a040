"""How a runtime is set up: its options, and the scope a broker set is built for.

Apart from ``runtime.py`` so that the modules the runtime drives (the broker factory, the turn
runner) can name these types without importing the runtime itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from roder_core.settings.config import RoderConfig
from roder_core.settings.paths import RoderPaths

if TYPE_CHECKING:
    from roder_core.brokers import Brokers
    from roder_core.brokers.content_gate import ReadRules
    from roder_core.brokers.sandbox import SandboxStatus
    from roder_core.policy.audit import AuditLog


class BrokerHost(Protocol):
    """The runtime as a broker factory sees it (``Runtime`` provides it)."""

    @property
    def options(self) -> RuntimeOptions: ...

    @property
    def audit(self) -> AuditLog: ...

    @property
    def redact(self) -> Callable[[str], str]: ...

    @property
    def sandbox(self) -> SandboxStatus: ...

    @property
    def read_rules(self) -> ReadRules: ...


@dataclass(frozen=True)
class BrokerScope:
    """What a broker set is scoped to: one workspace and one extension's granted capabilities."""

    workspace: Path
    capabilities: frozenset[str]
    extension_id: str
    runtime: BrokerHost


BrokerFactory = Callable[[BrokerScope], "Brokers"]


@dataclass
class RuntimeOptions:
    cwd: Path
    paths: RoderPaths
    config: RoderConfig = field(default_factory=RoderConfig)
    mode: str = "ask"
    provider: str | None = None
    model: str | None = None
    #: False in headless runs: anything that would ask a person is denied instead.
    interactive: bool = True
    trusted: bool = False
    broker_factory: BrokerFactory | None = None
    max_iterations: int | None = None
    #: Removes known secret values from text before it is stored or shown.
    redactor: Callable[[str], str] | None = None
    #: The environment commands inherit (scrubbed of secrets); None: this process's.
    env: Mapping[str, str] | None = None
    #: What commands inherit instead of ``env`` when set (batch rollouts build it from an allowlist).
    command_env: Mapping[str, str] | None = None
    #: Paths the command sandbox hides (batch rollouts: the operator's credential files).
    hidden_paths: tuple[Path, ...] = ()
