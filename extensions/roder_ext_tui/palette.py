"""Built-in command-palette sources.

Each command names the method that performs it: a control-plane method the app calls as is
(``session/set_mode``, ``providers/select``), or an app action under ``tui/`` for what needs the
screen too (switching the shown thread, themes, export). The state dict holds ``threads``
(``[{id, title, updated_at, parent_id}]``), ``thread_id``, ``providers`` (``[{id, name,
default_model, auth_configured}]``), ``models`` (``[{provider, id}]``), ``provider``, ``model``,
``mode``, ``themes``, ``theme`` and ``commands`` (``[{name, description, argument_hint}]``).
"""

from __future__ import annotations

import time
from typing import Any

from roder_core.ir import Mode
from roder_core.kernel.services import PaletteCommand, PaletteSource

MODES = tuple(Mode)
MODE_HELP = {
    "plan": "read-only: the agent explores and proposes, nothing changes",
    "ask": "ask before edits and commands",
    "auto-edit": "workspace edits run without asking; commands still ask",
    "bypass": "nothing asks (use in a sandbox)",
}


class _Source:
    source_id = ""

    def id(self) -> str:
        return self.source_id


class ThreadsSource(_Source):
    source_id = "threads"

    async def commands(self, state: dict[str, Any]) -> list[PaletteCommand]:
        rows = [
            PaletteCommand("New thread", "start an empty thread in this folder", "tui/thread/new"),
            PaletteCommand("Resume thread…", "pick an earlier thread of this folder", "tui/thread/pick"),
        ]
        if state.get("thread_id"):
            rows.append(
                PaletteCommand(
                    "Fork thread",
                    "copy this thread into a new one and switch to it",
                    "tui/thread/fork",
                    {"threadId": state["thread_id"]},
                )
            )
        now = time.time()
        for thread in state.get("threads", []):
            if thread["id"] == state.get("thread_id"):
                continue
            age = _age(now - float(thread.get("updated_at") or now))
            title = thread.get("title") or "untitled"
            rows.append(
                PaletteCommand(
                    f"Switch to: {title}", f"{age} ago · {thread['id']}", "tui/thread/switch", {"threadId": thread["id"]}
                )
            )
        return rows


class ModelsSource(_Source):
    source_id = "models"

    async def commands(self, state: dict[str, Any]) -> list[PaletteCommand]:
        rows: list[PaletteCommand] = []
        current = (state.get("provider"), state.get("model"))
        # The open thread switches too (its next request uses the choice), not only new threads.
        thread = {"threadId": state["thread_id"]} if state.get("thread_id") else {}
        for provider in state.get("providers", []):
            ready = provider.get("auth_configured") is not False
            note = "" if ready else " (not configured)"
            default = provider.get("default_model") or ""
            if default:
                rows.append(
                    PaletteCommand(
                        f"Provider: {provider['name']}{note}",
                        f"use {provider['id']} with {default}",
                        "providers/select",
                        {"provider": provider["id"], **thread},
                    )
                )
            else:  # no default model to switch to: pick one of its models instead
                rows.append(
                    PaletteCommand(
                        f"Provider: {provider['name']}{note}",
                        f"pick a model of {provider['id']}",
                        "tui/model/pick",
                        {"provider": provider["id"]},
                    )
                )
        for model in state.get("models", []):
            mark = " ✓" if (model["provider"], model["id"]) == current else ""
            rows.append(
                PaletteCommand(
                    f"Model: {model['provider']}/{model['id']}{mark}",
                    "switch the model",
                    "providers/select",
                    {"provider": model["provider"], "model": model["id"], **thread},
                )
            )
        return rows


class ModesSource(_Source):
    source_id = "modes"

    async def commands(self, state: dict[str, Any]) -> list[PaletteCommand]:
        return [
            PaletteCommand(
                f"Mode: {mode}{' ✓' if mode == state.get('mode') else ''}",
                MODE_HELP[mode],
                "session/set_mode",
                {"mode": mode, "reason": "palette"},
            )
            for mode in MODES
        ]


class ThemesSource(_Source):
    source_id = "themes"

    async def commands(self, state: dict[str, Any]) -> list[PaletteCommand]:
        return [
            PaletteCommand(
                f"Theme: {name}{' ✓' if name == state.get('theme') else ''}",
                "switch theme (saved to config.toml)",
                "tui/theme/set",
                {"name": name},
            )
            for name in state.get("themes", [])
        ]


class SlashCommandsSource(_Source):
    source_id = "slash-commands"

    async def commands(self, state: dict[str, Any]) -> list[PaletteCommand]:
        return [
            PaletteCommand(
                f"/{c['name']}" + (f" {c['argument_hint']}" if c.get("argument_hint") else ""),
                c.get("description", ""),
                "tui/slash",
                {"name": c["name"]},
            )
            for c in state.get("commands", [])
        ]


class SessionSource(_Source):
    """Compaction, export and the other per-thread actions."""

    source_id = "session"

    async def commands(self, state: dict[str, Any]) -> list[PaletteCommand]:
        rows = [
            PaletteCommand(
                "Rewind…", "back to an earlier prompt: restore the conversation, the code, or both (esc esc)", "tui/rewind"
            ),
            PaletteCommand(
                "Compact context",
                "summarize older turns to free context (history stays visible)",
                "tui/slash",
                {"name": "compact"},
            ),
            PaletteCommand("Export as Markdown", "write the thread to a .md file in this folder", "tui/export", {"format": "md"}),
            PaletteCommand(
                "Export as JSON", "write the thread's JSON trajectory in this folder", "tui/export", {"format": "json"}
            ),
            PaletteCommand("Copy last answer", "to the clipboard (OSC 52 and system clipboard)", "tui/copy_last"),
            PaletteCommand("Toggle sidebar", "threads and fork tree (ctrl+b)", "tui/sidebar"),
            PaletteCommand("Background tasks", "running tasks with their last output line: open output, kill (f2)", "tui/tasks"),
            PaletteCommand("Workflows", "plan a workflow, watch its steps, pause, resume, restart a step (f3)", "tui/workflows"),
            PaletteCommand("Keys and help", "every key binding (? or F1)", "tui/help"),
        ]
        return rows if state.get("thread_id") else rows[4:]


def _age(seconds: float) -> str:
    if seconds < 60:
        return f"{int(seconds)}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m"
    if seconds < 86400:
        return f"{int(seconds // 3600)}h"
    return f"{int(seconds // 86400)}d"


PALETTE_SOURCES: list[PaletteSource] = [
    ThreadsSource(),
    ModelsSource(),
    ModesSource(),
    ThemesSource(),
    SlashCommandsSource(),
    SessionSource(),
]
