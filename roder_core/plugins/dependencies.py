"""Plugin ``dependencies``: what a plugin needs installed and enabled beside it.

``dependencies: ["name" | {name, version?: semver range, marketplace?}]`` in ``plugin.json`` or
the catalog entry. A dependency comes from the plugin's own marketplace unless it names another
one, which the plugin's marketplace must list in ``allowCrossMarketplaceDependenciesOn``.
Installing resolves the whole tree first (a cycle or a missing plugin is an error naming the
chain, and nothing is installed), shows what every dependency runs in the same preview, then
installs dependencies before the plugin. Enabling a plugin enables its dependencies; disabling
or uninstalling a plugin that an enabled plugin depends on is refused, naming the dependent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_PART = re.compile(r"^(\d+|[xX*])(?:\.(\d+|[xX*]))?(?:\.(\d+|[xX*]))?(?:[-+].*)?$")
_COMPARATOR = re.compile(r"^(\^|~|>=|<=|>|<|=)?\s*v?(.+)$")


@dataclass(frozen=True)
class Dependency:
    name: str
    version: str | None = None
    marketplace: str | None = None

    def describe(self) -> str:
        where = f"@{self.marketplace}" if self.marketplace else ""
        return f"{self.name}{where}" + (f" {self.version}" if self.version else "")


def parse_dependencies(raw: Any, where: str, problems: list[str]) -> list[Dependency]:
    """The ``dependencies`` list; an unusable item is skipped with one line."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        problems.append(f"{where}: 'dependencies' must be a list; ignored")
        return []
    found = []
    for item in raw:
        if isinstance(item, str) and item.strip():
            name, at, where = item.strip().partition("@")
            found.append(Dependency(name, marketplace=where if at else None))
        elif isinstance(item, dict) and isinstance(item.get("name"), str) and item["name"].strip():
            version = item.get("version")
            market = item.get("marketplace")
            found.append(
                Dependency(
                    item["name"].strip(),
                    str(version).strip() if isinstance(version, str | int | float) and str(version).strip() else None,
                    str(market).strip() if isinstance(market, str) and market.strip() else None,
                )
            )
        else:
            problems.append(f"{where}: dependency {item!r} is not a name or {{name, version?, marketplace?}}; skipped")
    return found


def _version(text: str) -> tuple[int, ...] | None:
    match = _PART.match(text.strip())
    if match is None:
        return None
    return tuple(int(p) for p in match.groups() if p is not None and p not in ("x", "X", "*"))


def _padded(parts: tuple[int, ...]) -> tuple[int, int, int]:
    a, b, c = (*parts, 0, 0, 0)[:3]
    return a, b, c


def _comparator(version: tuple[int, int, int], text: str) -> bool:
    match = _COMPARATOR.match(text.strip())
    if match is None:
        raise ValueError(text)
    op, rest = match.group(1) or "=", match.group(2)
    wanted = _version(rest)
    if wanted is None:
        raise ValueError(text)
    if not wanted:  # "*" or "x"
        return True
    low = _padded(wanted)
    if op == "^":
        first = next((i for i, p in enumerate(low) if p != 0), len(wanted) - 1)
        first = min(first, len(wanted) - 1)
        high = (*low[:first], low[first] + 1, *([0] * (2 - first)))
        return low <= version < _padded(high)
    if op == "~":
        index = 1 if len(wanted) >= 2 else 0
        high = (*low[:index], low[index] + 1, *([0] * (2 - index)))
        return low <= version < _padded(high)
    if op == "=":
        if len(wanted) < 3:  # "1.2" means 1.2.x
            return version[: len(wanted)] == wanted
        return version == low
    return {">=": version >= low, "<=": version <= low, ">": version > low, "<": version < low}[op]


def satisfies(version: str | None, spec: str | None) -> bool:
    """Whether ``version`` meets an npm-style range (``^1.2``, ``~1.2.3``, ``>=1 <2``, ``1.x``,
    ``a || b``). No range, ``*`` or ``latest`` accepts anything; an unversioned plugin meets
    only those. Raises ``ValueError`` for a range that cannot be read."""
    if spec is None or spec.strip() in ("", "*", "latest", "x"):
        return True
    parsed = _version(version or "")
    if parsed is None or not parsed:
        return False
    current = _padded(parsed)
    for alternative in spec.split("||"):
        text = re.sub(r"(\^|~|>=|<=|>|<|=)\s+", r"\1", alternative.strip())
        if " - " in text:
            low, _, high = text.partition(" - ")
            if _comparator(current, f">={low}") and _comparator(current, f"<={high}"):
                return True
            continue
        if all(_comparator(current, part) for part in text.split()):
            return True
    return False
