"""Claude Code's spellings of the common tools, so hook scripts written for Claude Code port over.

Claude Code hooks see ``tool_name`` "Bash"/"Read"/"Edit"/... and ``tool_input`` with its own
field names (``file_path`` where Roder says ``path``, a Bash ``timeout`` in milliseconds).
Hooks get those spellings; an ``updatedInput`` they send back is translated to Roder's names
before the tool runs. Tools not listed here (MCP tools, extension tools) pass through unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Roder tool name -> Claude Code tool name.
TOOL_NAMES: dict[str, str] = {
    "read": "Read",
    "write": "Write",
    "edit": "Edit",
    "bash": "Bash",
    "grep": "Grep",
    "glob": "Glob",
    "ls": "LS",
    "web_fetch": "WebFetch",
}
_FILE_TOOLS = frozenset({"read", "write", "edit"})


def claude_tool_name(tool: str) -> str:
    return TOOL_NAMES.get(tool, tool)


def to_claude_input(tool: str, arguments: dict[str, Any], cwd: Path) -> dict[str, Any]:
    """Roder's arguments in Claude Code's field names (file paths made absolute, as Claude Code sends them)."""
    data = dict(arguments)
    if tool in _FILE_TOOLS and "path" in data:
        data["file_path"] = str(cwd / str(data.pop("path")))
    if tool == "bash" and isinstance(data.get("timeout"), int | float):
        data["timeout"] = int(data["timeout"] * 1000)
    if tool == "grep" and "case_insensitive" in data:
        data["-i"] = data.pop("case_insensitive")
    return data


def from_claude_input(tool: str, data: dict[str, Any]) -> dict[str, Any]:
    """A hook's ``updatedInput`` (Claude Code's field names) back in Roder's names."""
    arguments = dict(data)
    if tool in _FILE_TOOLS and "file_path" in arguments:
        arguments["path"] = arguments.pop("file_path")
    if tool == "bash" and isinstance(arguments.get("timeout"), int | float):
        arguments["timeout"] = arguments["timeout"] / 1000
    if tool == "grep" and "-i" in arguments:
        arguments["case_insensitive"] = arguments.pop("-i")
    return arguments
