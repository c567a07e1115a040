"""Notes that name the protection behind a sandboxed command's failure.

A command stopped by the sandbox only sees an errno ("Read-only file system", "Operation not
permitted"); the model and the user should also learn which protection it was and what to do, so
the shell tool appends one line per protection the output shows signs of.
"""

from __future__ import annotations

_GIT = (
    "[protection: sandbox git dirs read-only. Every git dir is read-only to sandboxed commands, so git "
    "commands that change the repository (add, commit, checkout, ...) fail here; reading (status, log, "
    "diff, show) works. Tell the user which git command to run themselves.]"
)
_READ_ONLY = (
    "[protection: sandbox read-only paths. Only the workspace and a private /tmp are writable; inside the "
    "workspace, git dirs and protected names (.roder, .envrc, .mcp.json, .vscode, ... at any depth) are not, "
    "nor files that run code at the user's next action (virtualenvs, site-packages, *.pth, pre-commit and "
    "lefthook configs, ...) unless the user approved this very command: ask them to run it, or to approve it.]"
)
_BUSY = (
    "[protection: sandbox read-only mounts. Git dirs and protected names are mounted read-only in place, "
    "so they cannot be moved, renamed or removed either.]"
)
_NOT_PERMITTED = (
    "[protection: sandbox without privileges. Commands have no capabilities and a seccomp filter refuses "
    "mount, ptrace, namespaces, unix sockets and kernel interfaces (`roder doctor` lists them).]"
)
_PROCESSES = "[protection: process limit ([limits] processes): the command may not start more processes.]"
_KILLED = (
    "[the command was killed (SIGKILL); if it used a lot of memory, that is the memory limit "
    "([limits] memory_mb) for the command and everything it started.]"
)


def refusal_notes(output: str, sandbox: str, exit_code: int | None) -> list[str]:
    """The notes for one command's output (none when nothing points at a protection)."""
    notes: list[str] = []
    if sandbox != "off" and "Read-only file system" in output:
        notes.append(_GIT if ".git" in output else _READ_ONLY)
    if sandbox != "off" and "Device or resource busy" in output:
        notes.append(_BUSY)
    if sandbox != "off" and "Operation not permitted" in output:
        notes.append(_NOT_PERMITTED)
    if "fork" in output and "Resource temporarily unavailable" in output:
        notes.append(_PROCESSES)
    if exit_code == 137:
        notes.append(_KILLED)
    return notes
