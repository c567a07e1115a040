"""What shell commands can and cannot do here, said the same way wherever the model learns it:
the turn's environment block, the ``bash`` tool's description and the notes on a failed
command. One rule decides whether commands reach the network: the sandbox keeps them off it
(but for the thread's private loopback) unless it is off or ``[network] commands`` is set.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class CommandConditions:
    #: The sandbox level in effect: workspace-write, read-only, off, or blocked (commands refused).
    sandbox: str
    network: bool

    @classmethod
    def of(cls, sandbox: str, commands_network: bool) -> CommandConditions:
        """From the effective sandbox level and ``[network] commands``."""
        return cls(sandbox, sandbox == "off" or (commands_network and sandbox != "blocked"))

    def sandbox_text(self) -> str:
        return {
            "workspace-write": "workspace-write: commands can write only inside the workspace and a private /tmp",
            "read-only": "read-only: commands cannot write files (use the file tools to change them)",
            "off": "off: commands run unconfined, as the user",
            "blocked": "blocked: the requested sandbox is unavailable here, so shell commands are refused",
        }.get(self.sandbox, self.sandbox)

    def network_text(self) -> str:
        if self.network:
            return "commands can reach the network"
        return (
            "none for commands: installs, downloads and other hosts fail (name resolution fails); "
            "only 127.0.0.1, shared by this thread's commands, works"
        )


_NETWORK_FAILURE = re.compile(
    r"Could not resolve host|Temporary failure in name resolution|Name or service not known|"
    r"nodename nor servname|getaddrinfo|EAI_AGAIN|ENOTFOUND|Failed to establish a new connection|"
    r"Connection refused|ECONNREFUSED|Network is unreachable|ENETUNREACH|No route to host|"
    r"unable to access '[a-z]+://",
    re.IGNORECASE,
)
NO_NETWORK_NOTE = (
    "[protection: no network. Commands here cannot reach other hosts (names do not resolve; only 127.0.0.1 "
    "shared by this thread's commands works), so retrying or waiting will not help: work offline, use what "
    "is installed, or tell the user which command to run with network access.]"
)


def no_network_note(output: str, conditions: CommandConditions, exit_code: int | None) -> str | None:
    """The note for a failed command whose output shows a network failure where commands have
    no network; None otherwise."""
    if conditions.network or exit_code == 0 or not _NETWORK_FAILURE.search(output):
        return None
    return NO_NETWORK_NOTE
