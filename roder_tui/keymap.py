"""Every key binding of the app, in one table.

The app's bindings, the help screen (``?``/F1) and the key table in docs/app.md all come from here, so
they cannot drift apart. App-level bindings have ids; ``[keys]`` in config.toml remaps them, e.g.
``toggle_sidebar = "ctrl+e"``. A key the user chose wins everywhere, also while typing in the
prompt (which binds keys of its own, such as f6 and ctrl+e); ``keymap_notes`` says what a remap
takes over or cannot do, so no remap is silently dead.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding, BindingType


@dataclass(frozen=True)
class Key:
    keys: str  # Textual key spec, comma-separated alternatives
    action: str
    description: str
    scope: str  # where the key works: app, prompt, transcript, approval, picker
    binding_id: str | None = None  # remappable app binding
    priority: bool = False

    @property
    def display(self) -> str:
        return display(self.keys)


def display(keys: str) -> str:
    """``"f1,question_mark"`` -> ``"f1 / ?"``."""
    return " / ".join(k.strip() for k in keys.split(",")).replace("question_mark", "?")


#: Opens the notices log; a cut toast's marker names it.
NOTICES_KEY = "f4"

KEYS: tuple[Key, ...] = (
    # app-wide
    Key("ctrl+q", "quit", "quit Roder", "app", "quit", priority=True),
    Key(
        "ctrl+c",
        "ctrl_c",
        "interrupt the running turn; clear the prompt; on an empty prompt press twice to quit (copies a selection first)",
        "app",
        None,
        priority=True,
    ),
    Key(
        "ctrl+p",
        "command_palette",
        "command palette: threads, models, modes, themes, commands, export",
        "app",
        "command_palette",
        priority=True,
    ),
    Key("shift+tab", "cycle_mode", "cycle mode: plan → ask → auto-edit → bypass", "app", "cycle_mode", priority=True),
    Key("ctrl+b", "toggle_sidebar", "show or hide the sidebar (threads, fork tree)", "app", "toggle_sidebar"),
    Key("alt+right", "sidebar_wider", "widen the sidebar", "app", "sidebar_wider"),
    Key("alt+left", "sidebar_narrower", "narrow the sidebar", "app", "sidebar_narrower"),
    Key("f1", "help", "this help", "app", "help"),
    Key("question_mark", "help", "this help (outside the prompt)", "transcript"),
    Key("f2", "tasks", "background tasks: last output line, open output, kill", "app", "tasks"),
    Key("f3", "workflows", "workflows: plan, watch steps, open a step's thread, pause, resume, restart", "app", "workflows"),
    Key(
        NOTICES_KEY,
        "notices",
        "notices: every notification of this session, whole (a toast may be cut)",
        "app",
        "notices",
        priority=True,
    ),
    Key("ctrl+n", "new_thread", "new thread", "app", "new_thread"),
    Key("ctrl+r", "resume_picker", "resume an earlier thread (picker)", "app", "resume_picker"),
    Key("ctrl+t", "focus_transcript", "move focus to the transcript", "app", "focus_transcript"),
    Key("ctrl+l", "focus_prompt", "move focus to the prompt", "app", "focus_prompt"),
    Key(
        "escape",
        "interrupt",
        "interrupt the running turn (closes completion first); twice on an empty prompt: rewind to an earlier prompt",
        "app",
        "interrupt",
    ),
    Key("ctrl+g", "external_editor", "edit the prompt in $VISUAL / $EDITOR", "app", "external_editor", priority=True),
    Key("alt+v", "paste_image", "attach the image on the system clipboard to the next prompt", "app", "paste_image"),
    Key("ctrl+shift+c", "copy_focused", "copy the focused message (or the last answer)", "app", "copy_focused"),
    Key(
        "ctrl+o",
        "team_next_pane",
        "agent team: focus the next pane (the lead, then each member); the prompt goes to the focused one",
        "app",
        "team_next_pane",
    ),
    # prompt
    Key("enter", "", "send; while a turn runs, queue it as a steer message", "prompt"),
    Key("ctrl+j,shift+enter", "", "new line (shift+enter only where the terminal tells them apart; tmux: see docs)", "prompt"),
    Key("up,down", "", "previous / next prompt from history (on the first / last line)", "prompt"),
    Key("pageup,pagedown", "", "scroll the transcript a page (the prompt keeps the focus)", "prompt"),
    Key("ctrl+u,ctrl+k", "", "delete to the start / end of the line (as typed, however it wraps)", "prompt"),
    Key("/", "", "command completion (built-in and custom commands)", "prompt"),
    Key("@", "", "complete a workspace file; it is attached when you send (images as pictures)", "prompt"),
    Key("!", "", "!cmd runs a shell command through the policy and shows it", "prompt"),
    Key(
        "tab",
        "",
        "accept a completion; enter accepts it too, and on a /command runs it at once; esc closes it. With none open: "
        "focus the sidebar when shown (its threads, then the fork tree; ctrl+l comes back)",
        "prompt",
    ),
    # transcript
    Key("j,down", "", "next message", "transcript"),
    Key("k,up", "", "previous message", "transcript"),
    Key("enter", "", "expand or collapse (tool output, reasoning, summaries)", "transcript"),
    Key("y", "", "copy the focused message", "transcript"),
    Key("f", "", "fork here: before a prompt (to edit and resend it), or after the focused answer's turn", "transcript"),
    Key("home,g", "", "first message, focused (loads the start of a long thread); y copies it", "transcript"),
    Key("end,G", "", "last message, focused, and follow new output", "transcript"),
    Key("pageup,pagedown", "", "scroll a page", "transcript"),
    # approval modal
    Key("y", "", "allow once", "approval"),
    Key("s", "", "allow for this session", "approval"),
    Key("a", "", "always allow: saves the exact rule shown to config.toml", "approval"),
    Key("n", "", "deny (the model is told)", "approval"),
    Key("escape", "", "deny and interrupt the turn", "approval"),
    # plan review
    Key("j,down", "", "next block of the plan", "plan"),
    Key("k,up", "", "previous block of the plan", "plan"),
    Key("c", "", "comment on the focused block (a heading: its whole section)", "plan"),
    Key("w", "", "send the plan back for a rewrite with the comments (and instructions)", "plan"),
    Key("a", "", "approve, then choose the mode to continue in (ask, auto-edit, bypass); open comments go with it", "plan"),
    Key("r", "", "reject, with a reason", "plan"),
    Key("escape", "", "later: the plan keeps waiting (/plan-review opens it again)", "plan"),
    # pickers and screens
    Key("enter", "", "choose", "picker"),
    Key("up,down", "", "move in the list (the palette: pageup / pagedown too; typing filters it)", "picker"),
    Key("escape", "", "close", "picker"),
)

SCOPE_TITLES = {
    "app": "Anywhere",
    "prompt": "Prompt",
    "transcript": "Transcript (ctrl+t to focus)",
    "approval": "Approval dialog",
    "plan": "Plan review",
    "picker": "Pickers, help and palette",
}


def app_bindings() -> list[BindingType]:
    return [
        Binding(k.keys, k.action, k.description, show=False, id=k.binding_id, priority=k.priority)
        for k in KEYS
        if k.scope == "app"
    ]


def keys_by_scope() -> dict[str, list[Key]]:
    grouped: dict[str, list[Key]] = {scope: [] for scope in SCOPE_TITLES}
    for key in KEYS:
        grouped[key.scope].append(key)
    return grouped


def markdown_table() -> str:
    """The key table of docs/app.md (a test checks the page contains every row)."""
    lines: list[str] = []
    for scope, keys in keys_by_scope().items():
        lines.append(f"**{SCOPE_TITLES[scope]}**\n")
        lines.append("| key | does |")
        lines.append("| --- | --- |")
        for key in keys:
            shown = key.display
            lines.append(f"| `{shown}` | {key.description} |")
        lines.append("")
    return "\n".join(lines)


def typed(key: str) -> bool:
    """A key that types a character into the prompt: it cannot also be an app key there."""
    from textual.keys import key_to_character

    character = key_to_character(key)
    return character is not None and character.isprintable()


def keymap_notes(keymap: dict[str, str]) -> list[str]:
    """One line per remap that is not plainly fine: an unknown binding id, a key two actions
    share, a prompt key it takes over, a typed character (it works outside the prompt only)."""
    from textual.widgets import TextArea

    known = {k.binding_id: k for k in KEYS if k.binding_id}
    prompt_keys = {key.strip(): b.description for b in TextArea.BINDINGS if isinstance(b, Binding) for key in b.key.split(",")}
    final = {binding_id: [key.strip() for key in keymap.get(binding_id, k.keys).split(",")] for binding_id, k in known.items()}
    notes: list[str] = []
    for binding_id, keys in keymap.items():
        key = known.get(binding_id)
        if key is None:
            notes.append(f"[keys] {binding_id}: no such key binding (known: {', '.join(sorted(known))})")
            continue
        for chosen in (k.strip() for k in keys.split(",")):
            others = [other for other, taken in final.items() if other != binding_id and chosen in taken]
            if others:
                notes.append(f"[keys] {chosen} is bound to both {binding_id} and {', '.join(others)}")
            elif typed(chosen):
                notes.append(f"[keys] {chosen} types into the prompt: it runs {binding_id} only outside the prompt")
            elif chosen in prompt_keys:
                yielded = prompt_keys[chosen].lower()
                notes.append(f"[keys] {chosen} now runs {binding_id} also while typing (the prompt's {yielded} gives way)")
    return notes
