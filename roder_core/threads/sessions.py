"""Thread-level helpers behind the runtime's session API: branch trees, forks, id prefixes and
extension-owned state with versions.

Kept apart from runtime.py so the rules (what a fork keeps, how a prefix resolves, how custom
state migrates) are plain functions that are easy to test and to reuse by stores and clients.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from pydantic import Field

from roder_core.errors import RoderError, ThreadNotFoundError
from roder_core.ir import IRModel, ParentRef, Thread, ThreadHeader, ThreadSummary, Turn, TurnStatus, UserMessageItem, empty_list

#: ``migrate(stored_version, data) -> data`` upgrades extension state saved by an older version.
Migration = Callable[[int, Any], Any]


class ThreadNode(IRModel):
    """One thread in a branch tree: forks hang under the thread they were forked from."""

    thread: ThreadSummary
    children: list[ThreadNode] = Field(default_factory=empty_list)


def thread_tree(rows: Iterable[ThreadSummary]) -> list[ThreadNode]:
    """Arrange listing rows into trees. A fork whose parent is not among the rows (deleted, or
    in another workspace) is a root of its own; roots keep the rows' order, children are oldest
    first."""
    rows = list(rows)
    nodes = {row.id: ThreadNode(thread=row) for row in rows}
    roots: list[ThreadNode] = []
    for row in rows:
        parent = nodes.get(row.parent.thread_id) if row.parent is not None else None
        if parent is None or parent is nodes[row.id]:
            roots.append(nodes[row.id])
        else:
            parent.children.append(nodes[row.id])
    for node in nodes.values():
        node.children.sort(key=lambda n: n.thread.created_at)
    return roots


def fork_header(parent: Thread, turn_id: str | None, title: str | None = None, before_item: str | None = None) -> ThreadHeader:
    """The header of a fork of ``parent``. The fork keeps the turns up to and including
    ``turn_id`` (the last finished turn when None: a running turn is never copied half-way by
    default), or, with ``before_item`` (a user message, the steer of a running turn included),
    everything before that message. ``parent.turn_id`` names the last turn the fork holds."""
    if before_item is not None:
        turn_id = _turn_before_message(parent, before_item)
    elif turn_id is None:
        turn_id = next((t.id for t in reversed(parent.turns) if t.status is not TurnStatus.IN_PROGRESS), None)
        if turn_id is None:
            raise RoderError(f"thread {parent.id} has no finished turn to fork from yet")
    elif all(turn.id != turn_id for turn in parent.turns):
        raise RoderError(f"thread {parent.id} has no turn {turn_id}")
    return ThreadHeader(
        cwd=parent.cwd,
        title=title if title is not None else parent.title,
        provider=parent.provider,
        model=parent.model,
        parent=ParentRef(thread_id=parent.id, turn_id=turn_id),
    )


def _turn_before_message(parent: Thread, item_id: str) -> str | None:
    """The last turn a fork before user message ``item_id`` holds (None: no turn at all)."""
    for index, turn in enumerate(parent.turns):
        for position, item in enumerate(turn.items):
            if item.id != item_id:
                continue
            if not isinstance(item, UserMessageItem):
                raise RoderError(f"item {item_id} is not a user message; forks start before a user message or after a turn")
            if position > 0:
                return turn.id
            return parent.turns[index - 1].id if index > 0 else None
    raise RoderError(f"thread {parent.id} has no message {item_id}")


def fork_in_memory(parent: Thread, header: ThreadHeader, before_item: str | None = None) -> Thread:
    """A fork of a thread that has no stored file (ephemeral), cut as ``fork_header`` decided."""
    keep: list[Turn] = []
    last = header.parent.turn_id if header.parent is not None else None
    for turn in parent.turns if last is not None else []:
        copy = turn.model_copy(deep=True)
        ids = [item.id for item in copy.items]
        if before_item in ids:
            copy.items = copy.items[: ids.index(before_item)]
            copy.status = TurnStatus.INTERRUPTED
        keep.append(copy)
        if turn.id == last:
            break
    return Thread(
        **header.model_dump(),
        mode=parent.mode,
        turns=keep,
        usage=parent.usage.model_copy(),
        custom={k: v.model_copy(deep=True) for k, v in parent.custom.items()},
    )


def turn_id_at(thread: Thread, number: int) -> str:
    """The id of the ``number``-th turn (1-based), as ``roder sessions fork --turn N`` counts."""
    if not 1 <= number <= len(thread.turns):
        raise RoderError(f"thread {thread.id} has {len(thread.turns)} turn(s); --turn must be 1..{len(thread.turns)}")
    return thread.turns[number - 1].id


def resolve_thread_id(wanted: str, known: Iterable[str]) -> str:
    """A full id, or an unambiguous prefix of one (``thr_3f2a``), like git revisions."""
    wanted = wanted.strip()
    if not wanted:
        raise ThreadNotFoundError("no thread id given")
    known = set(known)
    if wanted in known:
        return wanted
    matches = sorted(i for i in known if i.startswith(wanted) or i.startswith(f"thr_{wanted}"))
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ThreadNotFoundError(f"no thread {wanted!r} (see `roder sessions list --all`)")
    shown = ", ".join(matches[:5]) + (", ..." if len(matches) > 5 else "")
    raise ThreadNotFoundError(f"{wanted!r} matches {len(matches)} threads ({shown}); give more of the id")


def read_custom(thread: Thread, namespace: str, version: int = 1, migrate: Migration | None = None) -> Any:
    """An extension's saved state, upgraded to ``version``; None when it never saved any."""
    entry = thread.custom.get(namespace)
    if entry is None:
        return None
    if entry.version == version:
        return entry.data
    if entry.version > version:
        raise RoderError(f"thread {thread.id}: {namespace} state was saved by a newer version ({entry.version} > {version})")
    if migrate is None:
        raise RoderError(f"thread {thread.id}: {namespace} state is version {entry.version}; version {version} needs a migration")
    return migrate(entry.version, entry.data)
