"""Terminal-Bench / Harbor task folders as batch tasks.

A task folder holds ``task.toml`` (``[agent] timeout_sec``, ``[verifier] timeout_sec`` and
``env``, ``[environment] build_timeout_sec``, ``[metadata]``), ``instruction.md`` (the prompt),
``tests/`` (``test.sh`` and what it needs), optionally ``solution/`` (never shown to the agent)
and ``environment/`` (the Docker build context). ``roder batch DIR`` runs DIR itself when it is
a task folder, else every task folder directly inside it.

A task whose ``environment/`` has a Dockerfile (or whose ``[environment] docker_image`` names a
local image) runs in a container of that image (``containers``): the agent's tools there, the
tests at ``/tests`` and the logs at ``/logs`` as Harbor has them. Without one there is no
container: the workspace is a copy of ``environment/`` (an empty folder without one), ``tests/``
is copied in only after the agent finishes and the score runs ``bash "$TESTS_DIR/test.sh"`` in
the workspace, sandboxed, with ``$LOGS_DIR/verifier`` for its ``reward.txt`` or ``reward.json``.

Terminal-Bench 1 folders (``task.yaml``, ``run-tests.sh``, a root ``Dockerfile``) are the older
layout: each is refused with a message that says so and what to convert.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

SCORE = 'bash "$TESTS_DIR/test.sh"'


class HarborError(ValueError):
    """A task folder that cannot be read; the message names the folder."""


TERMINAL_BENCH_1 = (
    "{folder}: a Terminal-Bench 1 task folder (task.yaml, run-tests.sh), the older layout; convert it to "
    "Harbor's: task.toml ([agent] / [verifier] timeout_sec), instruction.md (task.yaml's instruction), "
    "environment/Dockerfile (with its files), tests/test.sh (run-tests.sh, writing /logs/verifier/reward.txt) "
    "and solution/solve.sh (Harbor's terminal-bench adapter does this)"
)


def is_task_folder(path: Path) -> bool:
    return (path / "task.toml").is_file() or _is_terminal_bench_1(path)


def _is_terminal_bench_1(path: Path) -> bool:
    return not (path / "task.toml").is_file() and (path / "task.yaml").is_file()


def task_folders(root: Path) -> list[Path]:
    if is_task_folder(root):
        return [root]
    found = sorted(p for p in root.iterdir() if p.is_dir() and is_task_folder(p))
    if not found:
        raise HarborError(f"{root}: no task.toml (or Terminal-Bench 1 task.yaml) in it or in the folders directly inside it")
    return found


def _seconds(table: dict[str, Any], key: str, where: str) -> float | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise HarborError(f"{where}: {key} must be a positive number of seconds")
    return float(value)


def folder_to_task(folder: Path) -> dict[str, Any]:
    """The task line for one task folder."""
    if _is_terminal_bench_1(folder):
        raise HarborError(TERMINAL_BENCH_1.format(folder=folder))
    where = str(folder / "task.toml")
    texts: dict[str, str] = {}
    for name in ("task.toml", "instruction.md"):
        try:
            texts[name] = (folder / name).read_text(encoding="utf-8")
        except OSError as exc:
            raise HarborError(f"{folder}: {exc.strerror or exc} ({name})") from exc
        except UnicodeDecodeError as exc:
            raise HarborError(f"{folder / name}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x})") from exc
    try:
        config = tomllib.loads(texts["task.toml"])
    except tomllib.TOMLDecodeError as exc:
        raise HarborError(f"{where}: not valid TOML ({exc})") from exc
    instruction = texts["instruction.md"].strip()
    if not instruction:
        raise HarborError(f"{folder}: instruction.md is empty")
    if not (folder / "tests" / "test.sh").is_file():
        raise HarborError(f"{folder}: tests/test.sh is missing")
    agent, verifier = config.get("agent", {}), config.get("verifier", {})
    environment = config.get("environment", {})
    name = config.get("task", {}).get("name") or folder.name
    line: dict[str, Any] = {
        "id": str(name),
        "prompt": instruction,
        "score": SCORE,
        "tests_folder": str(folder / "tests"),
        "metadata": {**config.get("metadata", {}), "format": "harbor", "task_folder": str(folder)},
        "score_env": {str(k): str(v) for k, v in verifier.get("env", {}).items()},
        "network": bool(environment.get("allow_internet", False)),
    }
    for key, table, field in (
        ("timeout_sec", agent, "deadline"),
        ("timeout_sec", verifier, "score_timeout"),
        ("build_timeout_sec", environment, "setup_timeout"),
    ):
        value = _seconds(table, key, where)
        if value is not None:
            line[field] = value
    context = folder / "environment"
    if (context / "Dockerfile").is_file():
        line["container"] = str(context / "Dockerfile")
    elif isinstance(environment.get("docker_image"), str):
        line["image"] = environment["docker_image"]
    elif context.is_dir():
        line["workspace"] = str(context)
    return line
