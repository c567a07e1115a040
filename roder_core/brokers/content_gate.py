"""The one decision of what file content may reach the model.

``deny = ["read(.env)"]`` and the secret masks must hold however the content would travel: an
explicit read, a grep over the whole workspace, a glob or ls listing, an ``@file`` mention, an
editor's ``fs/read_text_file``, the app server's ``fs/*``, and Roder's own reads of project
files (``project_reader``). Each of those asks ``ContentGate.refusal`` about every file it is
about to reveal, by name or by content; nothing else decides.

Two kinds of refusal:

- a **mask**: a secret path (``secret_paths``: credential stores, Roder's data and config, the
  ``[sandboxing] deny_read`` entries) that lies inside a root the tools can reach (a workspace
  that is the home folder, an extra root), refused always;
- a **read rule** of ``[policy]``: ``deny`` refuses always; ``ask`` refuses wherever nobody was
  asked about that very file (a grep hit, a glob entry, an AGENTS.md), while an explicit read the
  policy engine already asked about (``asked=True``) goes ahead.

Both the path as written and its resolved form are checked, so a symlink to ``.env`` is
withheld like ``.env`` itself.

Callers take their gate from ``shared_gate``: one object per workspace and inputs (roots, read
rules, masks), built once and handed to every reader of that workspace, since building one
resolves every mask (a runtime's start asked for a dozen, at tens of ms each).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from pathlib import Path
from typing import Protocol

from roder_core.brokers.path_rules import lexical_relative


class ReadRules(Protocol):
    """The ``[policy]`` rules as far as reading goes (``policy.rules.RuleSet``)."""

    def read_rule(self, path: str, workspace: Path) -> tuple[str, str] | None:
        """("deny" or "ask", the rule's text) for the strongest read rule matching ``path``
        (workspace-relative posix, or absolute), or None."""
        ...

    def has_refusals(self) -> bool:
        """Whether any deny or ask rule exists (so ``read_rule`` could ever answer)."""
        ...

    def gate_key(self) -> Hashable:
        """What tells these rules apart for ``shared_gate``: equal keys must mean equal answers
        for as long as the gate lives (fixed rules: their texts; live rules: the object)."""
        ...


class ContentGate:
    """May the content (or the name) of a file reach the model? One instance per workspace."""

    def __init__(
        self,
        workspace: Path,
        *,
        roots: Iterable[Path] = (),
        rules: ReadRules | None = None,
        masked: Iterable[Path] = (),
    ) -> None:
        self.workspace = Path(os.path.realpath(workspace))
        reach = [self.workspace, *(Path(os.path.realpath(r)) for r in roots)]
        self._rules = rules
        # Only masks the tools could reach matter (inside a root); one that holds a root (a
        # workspace under a masked folder) would hide the whole workspace, so it is left to the
        # sandbox, as ``secret_paths.masks`` does.
        # Compared as strings of normal absolute paths (what ``is_relative_to`` decides, without
        # building Path objects for the many masks that lie outside every root).
        inside = [str(r).rstrip("/") + "/" for r in reach]
        parents: dict[str, str] = {}
        chosen: list[Path] = []
        for mask in masked:
            for form in dict.fromkeys((os.path.normpath(mask), _resolved(os.fspath(mask), parents))):
                if any(form.startswith(prefix) and len(form) > len(prefix) for prefix in inside) and Path(form) not in chosen:
                    chosen.append(Path(form))
        self._masked = tuple(str(mask) for mask in chosen)
        self._folder = str(self.workspace)

    def may_refuse(self) -> bool:
        """Whether anything could be refused at all: a mask inside a root, or a deny or ask rule.
        Searches skip asking file by file when nothing could be refused."""
        return bool(self._masked) or (self._rules is not None and self._rules.has_refusals())

    def _shown(self, path: str) -> str:
        below = lexical_relative(path, self._folder)
        return path if below is None else below

    def refusal(self, path: str | Path, *, asked: bool = False, resolved: bool = False) -> str | None:
        """Why ``path`` (absolute) must not reach the model, or None. ``asked``: a person was
        asked about this exact read, so ``ask`` rules let it through. ``resolved``: the caller
        reached ``path`` without following links (a directory-fd walk), so it is its real form.

        A search asks this for every file it lists, so the path forms are normal strings
        (``normpath``, ``realpath``) compared as such, without a ``Path`` per file."""
        forms = [os.path.normpath(path)]
        if not resolved:
            try:
                real = os.path.realpath(path)
            except OSError:
                real = forms[0]
            if real != forms[0]:
                forms.append(real)
        for form in forms:
            mask = next((m for m in self._masked if lexical_relative(form, m) is not None), None)
            if mask is not None:
                return f"{self._shown(forms[0])} is a secret path ({mask}), which never reaches the model"
        if self._rules is None:
            return None
        for form in forms:
            key = self._shown(form)
            found = self._rules.read_rule(key, self.workspace)
            if found is None:
                continue
            verdict, text = found
            if verdict == "deny":
                return f"{self._shown(forms[0])} is withheld by the rule deny {text}"
            if not asked:
                return f"{self._shown(forms[0])} is withheld by the rule ask {text} (read it by name to be asked)"
        return None


def _resolved(mask: str, parents: dict[str, str]) -> str:
    """``os.path.realpath(mask)``, with each parent folder resolved once per gate (the masks
    share a few dozen folders, and Python's ``realpath`` looks at every component again for
    each). A normal absolute path whose parent resolves to ``R`` resolves to ``R/name`` unless
    ``R/name`` is itself a link; anything else (a link, a relative or unusual path) takes the
    whole ``realpath``."""
    if not os.path.isabs(mask) or mask.startswith("//") or mask != os.path.normpath(mask) or mask == "/":
        return os.path.realpath(mask)
    head, name = os.path.split(mask)
    real_head = parents.get(head)
    if real_head is None:
        real_head = parents[head] = os.path.realpath(head)
    candidate = os.path.join(real_head, name)
    return os.path.realpath(mask) if os.path.islink(candidate) else candidate


#: How many gates ``shared_gate`` keeps (a batch worker meets a new workspace every rollout).
SHARED_GATES = 32
_gates: OrderedDict[Hashable, ContentGate] = OrderedDict()
_gates_lock = threading.Lock()


def shared_gate(
    workspace: Path,
    *,
    roots: Iterable[Path] = (),
    rules: ReadRules | None = None,
    masked: Iterable[Path] = (),
) -> ContentGate:
    """The one gate for ``workspace`` with these roots, read rules and masks: the same object
    for every caller that passes the same inputs, a new one as soon as any of them differs (a
    rule added to a config, another ``deny_read`` entry, another home folder). Live rules (the
    runtime's) are keyed by the object, so the gate sees their changes as they happen."""
    roots = tuple(roots)
    masked = tuple(masked)
    key = (
        os.path.realpath(workspace),
        tuple(os.path.normpath(r) for r in roots),
        None if rules is None else (type(rules), rules.gate_key()),
        tuple(os.path.normpath(m) for m in masked),
    )
    with _gates_lock:
        gate = _gates.get(key)
        if gate is not None:
            _gates.move_to_end(key)
            return gate
    gate = ContentGate(workspace, roots=roots, rules=rules, masked=masked)
    with _gates_lock:
        gate = _gates.setdefault(key, gate)  # a racing caller's gate wins: still one per key
        _gates.move_to_end(key)
        while len(_gates) > SHARED_GATES:
            _gates.popitem(last=False)
    return gate
