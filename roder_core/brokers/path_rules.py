"""How a ``[policy]`` rule names paths, shared by the policy engine and the content gate.

``policy.rules`` decides tool calls with these; ``ConfigReadRules`` gives the content gate
(``content_gate``) the read rules of a config where no runtime exists yet (Roder's own reads of
project files while extensions load), without importing the policy engine.
"""

from __future__ import annotations

import os
import re
from collections.abc import Hashable, Iterable
from fnmatch import fnmatchcase
from functools import lru_cache
from pathlib import Path

from roder_core.brokers.gitignore import glob_to_regex

#: ``tool`` or ``tool(spec)``.
RULE_SYNTAX = re.compile(r"^\s*([A-Za-z0-9_.*?\-\[\]]+)\s*(?:\((.*)\))?\s*$", re.DOTALL)


def _in_pathlib_form(value: str) -> bool:
    """Whether ``Path(value).as_posix()`` is ``value`` itself (no empty or ``.`` components, no
    trailing ``/``): ``path_matches`` takes such a path as it is, any other is put in that form."""
    return (
        bool(value)
        and value != "."
        and "//" not in value
        and "/./" not in value
        and not value.startswith("./")
        and not value.endswith(("/", "/."))
    )


def path_matches(pattern: str, value: str, workspace: Path) -> bool:
    """Whether a path (workspace-relative posix, or absolute) matches a rule's path pattern.

    The content gate asks this for every file a search lists (100,000 in a large tree), so the
    path is worked on as a string: in pathlib's form, then joined to the workspace or cut
    relative to it, as ``Path.relative_to`` would (lexically)."""
    if not _in_pathlib_form(value):
        value = Path(value).as_posix()
    folder = str(workspace)
    if pattern.startswith("~/"):
        pattern = os.path.expanduser(pattern)
    if pattern.startswith("/"):
        target, body = value if os.path.isabs(value) else (folder if value == "." else folder.rstrip("/") + "/" + value), pattern
        head = "^"
    else:
        below = lexical_relative(value, folder) if os.path.isabs(value) else value
        if below is None:
            return False
        target, body = below, pattern.removeprefix("./")
        anchored = pattern.startswith("./") or "/" in body.rstrip("/")
        head = "^" if anchored else "^(?:.*/)?"
    return _path_regex(head, body.rstrip("/")).match(target) is not None


def lexical_relative(path: str, folder: str) -> str | None:
    """``Path(path).relative_to(folder).as_posix()`` for an absolute ``path`` in pathlib's form
    and a normal absolute ``folder``, as string operations (lexical, like ``relative_to``);
    None where ``path`` is not ``folder`` or below it."""
    if path == folder:
        return "."
    inside = folder.rstrip("/") + "/"
    if path.startswith(inside) and not path.startswith("//"):  # pathlib's root "//" is another root
        return path[len(inside) :]
    return None


@lru_cache(maxsize=1024)
def _path_regex(head: str, glob: str) -> re.Pattern[str]:
    return re.compile(head + glob_to_regex(glob) + "(?:/.*)?$", re.DOTALL)


class ConfigReadRules:
    """The read rules among ``[policy]`` ask and deny texts (``content_gate.ReadRules``): a rule
    whose tool part matches ``read`` (``read(.env)``, ``*(secrets/**)``, a bare ``read``)."""

    def __init__(self, ask: Iterable[str] = (), deny: Iterable[str] = ()) -> None:
        self._rules: list[tuple[str, str, str | None]] = []
        for verdict, texts in (("deny", deny), ("ask", ask)):
            for text in texts:
                match = RULE_SYNTAX.match(text)
                if match is None or not fnmatchcase("read", match.group(1)):
                    continue
                spec = match.group(2)
                self._rules.append((verdict, text.strip(), spec.strip() if spec is not None else None))

    def has_refusals(self) -> bool:
        return bool(self._rules)

    def gate_key(self) -> Hashable:
        """Fixed rules: equal texts answer alike, so readers of one config share a gate."""
        return tuple(self._rules)

    def read_rule(self, path: str, workspace: Path) -> tuple[str, str] | None:
        for verdict, text, spec in self._rules:
            if spec is None or (not spec.startswith("domain:") and path_matches(spec, path, workspace)):
                return verdict, text
        return None
