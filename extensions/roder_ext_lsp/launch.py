"""How a language server starts, and whether it may start in this folder at all.

A language server reads the project's own configuration, and some run what it names: a
``tsconfig.json`` names TypeScript language-service plugins, typescript-language-server prefers
the project's own ``node_modules/typescript``, rust-analyzer runs build scripts, a server found
through a ``PATH`` entry inside the project is the project's program. In a folder the user
trusts, servers start as configured. In a folder the user has not trusted, the rule is:

* only a server Roder knows how to start without running the project's code starts, and only
  with the switches that ensure it (the built-in typescript-language-server and pyright);
* every other server (other built-ins, ``[lsp.servers]`` in config.toml, plugins' ``.lsp.json``)
  waits until the folder is trusted (``roder trust``), and the edit's result says so in a line;
* the program, and the ``node``/``python3`` it runs, come from outside the project: ``PATH``
  entries inside the project or relative to it are dropped, a program that resolves into the
  project is refused, and ``NODE_*``/``PYTHON*`` variables (``NODE_OPTIONS=--require``,
  ``PYTHONPATH``) are left out of the server's environment;
* typescript-language-server gets ``tsserver.path``: a TypeScript installed outside the project
  (so never the project's ``node_modules/typescript``), whose plugin search starts in its own
  ``node_modules`` and climbs only its own parents (tsserver loads a ``tsconfig.json`` plugin
  from there unless ``--allowLocalPluginLoads``, which typescript-language-server never
  passes); no global plugins and no automatic type acquisition;
* pyright runs ``python3`` from that ``PATH`` to find the search paths (its script drops the
  working folder from ``sys.path`` first), and reads a ``venv`` named by ``pyrightconfig.json``
  as folders, without running its interpreter.

The server runs confined either way (``brokers.confined``: the workspace read-only, no network),
so what a project's code could do inside it is bounded; the rule above keeps it from running.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roder_ext_lsp.servers import ServerSpec

#: Built-in servers that start in an untrusted folder (with the switches below).
SAFE_WHEN_UNTRUSTED = frozenset({"typescript", "pyright"})
#: Variables that make node or python load code named by the environment.
_LOADER_PREFIXES = ("NODE_", "PYTHON")


@dataclass(frozen=True)
class Launch:
    """How to start the server: its command line, its own variables, its initialization options."""

    argv: list[str]
    env: dict[str, str]
    extra_env: dict[str, str] = field(default_factory=dict)
    initialization_options: dict[str, Any] = field(default_factory=dict)
    #: Folders the server reads to run that its command line does not name (its TypeScript);
    #: the program's own package, wherever its link leads, is ``confined.program_folders``'.
    needs: tuple[Path, ...] = ()


def plan(spec: ServerSpec, workspace: Path, env: Mapping[str, str], trusted: bool) -> Launch | str:
    """The server's launch, or (a string) one line saying why it does not start here."""
    if trusted:
        configured = dict(spec.initialization_options)
        if spec.source == "built-in" and spec.name == "typescript":
            configured = {**_typescript_options(env.get("PATH"), None, None), **configured}
        return Launch([spec.command, *spec.args], dict(env), dict(spec.env), configured, _typescript_of(configured))
    if spec.source != "built-in" or spec.name not in SAFE_WHEN_UNTRUSTED:
        return f"{spec.name} starts only in trusted folders (it can run the project's own code): `roder trust` to allow it"
    root = workspace.resolve()
    path = outside_path(env.get("PATH", ""), root)
    program = shutil.which(spec.command, path=path)
    if program is None or _inside(Path(program), root):
        return f"{spec.name} is not installed outside this untrusted folder"
    child_env = {k: v for k, v in env.items() if not k.startswith(_LOADER_PREFIXES)}
    child_env["PATH"] = path
    options: dict[str, Any] = {}
    if spec.name == "typescript":
        options = _typescript_options(path, program, root)
        if "path" not in options.get("tsserver", {}):
            return "typescript has no TypeScript installed outside this untrusted folder to run"
    return Launch([program, *spec.args], child_env, {}, options, _typescript_of(options))


def _typescript_of(options: dict[str, Any]) -> tuple[Path, ...]:
    """The TypeScript package the options name (``.../typescript/lib/tsserver.js``)."""
    tsserver = options.get("tsserver") or {}
    named = tsserver.get("path") or tsserver.get("fallbackPath") if isinstance(tsserver, dict) else None
    return (Path(named).parent.parent,) if isinstance(named, str) and named else ()


def outside_path(path: str, root: Path) -> str:
    """``PATH`` without entries relative to the working folder or inside ``root``."""
    kept = [entry for entry in path.split(os.pathsep) if os.path.isabs(entry) and not _inside(Path(entry), root)]
    return os.pathsep.join(kept)


def _inside(path: Path, root: Path) -> bool:
    return Path(os.path.realpath(path)).is_relative_to(root)


def _typescript_options(path: str | None, pinned_from: str | None, root: Path | None) -> dict[str, Any]:
    """typescript-language-server needs a TypeScript to run. Trusted (``pinned_from`` None): the
    project's own when it has one (the server looks there first), else the one whose ``tsc`` is
    on PATH. Untrusted: that one or the one installed beside the server itself, as
    ``tsserver.path``, which the server uses before the project's; and no plugins."""
    candidates = []
    if tsc := shutil.which("tsc", path=path):
        candidates.append(Path(os.path.realpath(tsc)).parent.parent / "lib" / "tsserver.js")
    if pinned_from is not None:
        package = Path(os.path.realpath(pinned_from)).parent.parent
        candidates += [package / "node_modules" / "typescript" / "lib" / "tsserver.js"]
        candidates += [package.parent / "typescript" / "lib" / "tsserver.js"]
    found = next((c for c in candidates if c.is_file() and not (root and _inside(c, root))), None)
    options: dict[str, Any] = {"disableAutomaticTypingAcquisition": True}
    if pinned_from is None:
        return options | ({"tsserver": {"fallbackPath": str(found)}} if found else {})
    return options | {"plugins": [], "tsserver": {"path": str(found)} if found else {}}
