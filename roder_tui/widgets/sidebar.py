"""The sidebar: this workspace's threads (title, age, status) and the current thread's fork tree.

Toggled with ctrl+b and hidden automatically below 80 columns. Selecting a row switches the
transcript to that thread.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Label

if TYPE_CHECKING:
    from textual.widgets import OptionList, Tree

    from roder_core.ir import ThreadSummary

#: The wall clock ages are measured against (a seam for deterministic snapshots).
clock = time.time
#: By ``ThreadStatus`` value (the wire's strings: the IR, and pydantic with it, loads after the first frame).
STATUS_MARK: dict[str, str] = {"active": "●", "waitingApproval": "?", "error": "✗"}
#: Marks a fork (a thread with a parent) in the list and the tree.
FORK_MARK = "⑂"
#: Ages ("3m") are redrawn this often; nothing else in the sidebar moves while idle.
AGE_REFRESH_SECONDS = 30.0


def age(seconds: float) -> str:
    seconds = max(seconds, 0)
    for limit, unit, size in ((60, "s", 1), (3600, "m", 60), (86400, "h", 3600)):
        if seconds < limit:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds // 86400)}d"


def fork_family(threads: list[ThreadSummary], current: str) -> tuple[str, dict[str, list[str]]]:
    """The root ancestor of ``current`` and a parent -> children map of known threads."""
    by_id = {t.id: t for t in threads}
    children: dict[str, list[str]] = {}
    for t in threads:
        if t.parent is not None:
            children.setdefault(t.parent.thread_id, []).append(t.id)
    root, seen = current, set()
    while root in by_id and root not in seen:
        parent = by_id[root].parent
        if parent is None:
            break
        seen.add(root)
        root = parent.thread_id
    return root, children


class Sidebar(Vertical):
    DEFAULT_CSS = """
    Sidebar {
        width: 26%; min-width: 24; max-width: 60; dock: left; background: $surface;
        border-right: vkey $panel; padding: 0 1;
    }
    Sidebar > Label { color: $text-muted; text-style: bold; margin: 1 0 0 0; }
    Sidebar > OptionList { height: 1fr; border: none; background: $surface; }
    Sidebar > Tree {
        height: auto; max-height: 12; background: $surface; overflow-x: hidden; scrollbar-size-horizontal: 0;
    }
    """

    class Selected(Message):
        def __init__(self, thread_id: str) -> None:
            super().__init__()
            self.thread_id = thread_id

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.threads: list[ThreadSummary] = []
        self.current: str | None = None
        # The list and tree are built with the first data (after the runtime starts), so the
        # first frame does not parse and render two more widget types.
        self.thread_list: OptionList | None = None
        self.fork_tree: Tree[str] | None = None

    def on_mount(self) -> None:
        self.set_interval(AGE_REFRESH_SECONDS, self.refresh_ages)

    def refresh_ages(self) -> None:
        """Redraw the rows so their ages stay true (the data is unchanged)."""
        if self.thread_list is not None and self.display:
            self.show(self.threads, self.current)

    def on_resize(self) -> None:
        if self.fork_tree is not None:
            self._show_tree()  # labels are fitted to the width

    def compose(self) -> ComposeResult:
        yield Label("Threads", id="threads-label")
        yield Label("Fork tree", id="forks-label")

    def _widgets(self) -> tuple[OptionList, Tree[str]]:
        if self.thread_list is None or self.fork_tree is None:
            from textual.widgets import OptionList, Tree

            self.thread_list = OptionList(id="thread-list")
            self.fork_tree = Tree("forks", id="fork-tree")
            self.fork_tree.show_root = False
            self.mount(self.thread_list, after="#threads-label")
            self.mount(self.fork_tree, after="#forks-label")
        return self.thread_list, self.fork_tree

    def show(self, threads: list[ThreadSummary], current: str | None) -> None:
        self.threads, self.current = threads, current
        thread_list, _tree = self._widgets()
        now = clock()
        thread_list.clear_options()
        highlighted = None
        from textual.widgets.option_list import Option

        for index, t in enumerate(threads):
            mark = STATUS_MARK.get(t.status, " ")
            title = (t.title or "untitled").replace("[", r"\[")
            here = "▶ " if t.id == current else ""
            here += f"{FORK_MARK} " if t.parent is not None else ""
            thread_list.add_option(Option(f"{mark} {here}{title}  [dim]{age(now - t.updated_at)}[/dim]", id=t.id))
            if t.id == current:
                highlighted = index
        if highlighted is not None:
            thread_list.highlighted = highlighted
        self._show_tree()

    def _show_tree(self) -> None:
        _list, tree = self._widgets()
        tree.clear()
        if self.current is None:
            return
        by_id = {t.id: t for t in self.threads}
        root, children = fork_family(self.threads, self.current)

        room = max((tree.size.width or self.size.width - 2) - 1, 8)

        def label(thread_id: str, depth: int) -> Text:
            t = by_id.get(thread_id)
            title = (t.title if t else "") or "untitled"
            mark = ("▶ " if thread_id == self.current else "") + (f"{FORK_MARK} " if t and t.parent else "")
            text = Text(mark + " ".join(title.split()), no_wrap=True, overflow="ellipsis")
            text.truncate(max(room - 4 * depth - 2, 6), overflow="ellipsis")
            return text

        def add(node: Any, thread_id: str, depth: int) -> None:
            branch = node.add(label(thread_id, depth), data=thread_id, expand=True)
            for child in children.get(thread_id, []) if depth < 20 else []:
                add(branch, child, depth + 1)
            if not children.get(thread_id):
                branch.allow_expand = False

        add(tree.root, root, 0)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id:
            self.post_message(self.Selected(event.option.id))

    def on_tree_node_selected(self, event: Tree.NodeSelected[str]) -> None:
        event.stop()
        if event.node.data:
            self.post_message(self.Selected(event.node.data))
