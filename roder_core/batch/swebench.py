"""SWE-bench instances as batch tasks, per-test status, and the prediction patch.

An instance line (``instance_id``, ``repo``, ``base_commit``, ``problem_statement``,
``test_patch``, ``FAIL_TO_PASS``, ``PASS_TO_PASS``) becomes a task: the repository at its base
commit (from ``--repo-cache DIR/owner__name`` when given, since evaluation machines are often
offline, else from GitHub), the problem statement as the prompt, the test patch applied only
after the agent finishes, and a score that runs the listed tests (pytest node ids; other test
runners need a ``score`` key in the line). The gold ``patch`` and ``hints_text`` are never used.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any

INSTANCE_KEYS = frozenset(
    {"instance_id", "repo", "base_commit", "problem_statement", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS"}
)
#: Keys of SWE-bench datasets that play no part in a run (the gold patch least of all).
IGNORED_KEYS = frozenset(
    {"patch", "hints_text", "created_at", "version", "environment_setup_commit", "difficulty", "image_name", "repo_language"}
)


def is_instance(data: dict[str, Any]) -> bool:
    return "instance_id" in data and "problem_statement" in data


def _test_list(value: Any, name: str) -> list[str]:
    if isinstance(value, str):  # the Hugging Face datasets store the lists as JSON text
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ValueError(f"{name} is not a JSON list of test ids") from exc
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{name} must be a list of test ids")
    return value


def pytest_score(tests: Iterable[str]) -> str | None:
    """A pytest command running the files of these node ids (None: they are not pytest ids)."""
    files: list[str] = []
    for test in tests:
        if "::" not in test:
            return None
        path = test.split("::", 1)[0]
        if path not in files:
            files.append(path)
    if not files:
        return None
    # The ``pytest`` entry point of the score's environment: ``python -m pytest`` would put the
    # workspace first on sys.path, where a ``pytest.py`` the agent left would replace pytest.
    return "pytest -rA -p no:cacheprovider " + " ".join(shlex.quote(f) for f in files)


def instance_to_task(data: dict[str, Any], repo_cache: Path | None) -> dict[str, Any]:
    """The task line for an instance (roder task keys in the line are kept and win)."""
    missing = sorted(k for k in INSTANCE_KEYS if k not in data)
    if missing:
        raise ValueError(f"SWE-bench instance lacks {', '.join(missing)}")
    repo = data["repo"]
    if not isinstance(repo, str) or not re.fullmatch(r"[\w.-]+/[\w.-]+", repo):
        raise ValueError(f"repo {repo!r} is not owner/name")
    fail_to_pass = _test_list(data["FAIL_TO_PASS"], "FAIL_TO_PASS")
    pass_to_pass = _test_list(data["PASS_TO_PASS"], "PASS_TO_PASS")
    source = str(repo_cache / repo.replace("/", "__")) if repo_cache else f"https://github.com/{repo}.git"
    line: dict[str, Any] = {
        "id": data["instance_id"],
        "prompt": data["problem_statement"],
        "workspace": {"git": source, "ref": data["base_commit"]},
        "tests": data["test_patch"],
        "fail_to_pass": fail_to_pass,
        "pass_to_pass": pass_to_pass,
        "metadata": {"repo": repo, "base_commit": data["base_commit"], "format": "swe-bench"},
    }
    score = pytest_score(fail_to_pass + pass_to_pass)
    if score is not None:
        line["score"] = score
    for key, value in data.items():
        if key not in INSTANCE_KEYS and key not in IGNORED_KEYS:
            line[key] = value  # roder keys (score, setup, deadline...); unknown ones are errors
    if "score" not in line:
        raise ValueError("its tests are not pytest node ids: add a 'score' command that runs them")
    return line


_PYTEST_SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\s+(\S+)")
_PYTEST_VERBOSE = re.compile(r"^(\S+::\S+)\s+(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED)\b")
_UNITTEST = re.compile(r"^(\w+ \([\w.]+\)).*? \.\.\. (ok|FAIL|ERROR|skipped|expected failure|unexpected success)")
#: The header of each failure unittest details after the run (``FAIL: test_x (mod.Class.test_x)``):
#: printed even when output of the code under test broke the test's own ``... FAIL`` line.
_UNITTEST_DETAIL = re.compile(r"^(FAIL|ERROR): (\w+ \([\w.]+\))$")
PASSING = {"PASSED", "XFAIL", "ok", "expected failure"}


def parse_test_statuses(output: str) -> dict[str, str]:
    """Each test's status from pytest (``-rA`` summary or ``-v``) or unittest ``-v`` output.
    A test reported as not passing anywhere stays so: a passing line for it printed later (by
    the code under test, while another test runs) cannot undo the runner's verdict."""
    statuses: dict[str, str] = {}
    for line in output.splitlines():
        line = line.strip()
        for pattern, name_group, status_group in (
            (_PYTEST_SUMMARY, 2, 1),
            (_PYTEST_VERBOSE, 1, 2),
            (_UNITTEST, 1, 2),
            (_UNITTEST_DETAIL, 2, 1),
        ):
            found = pattern.match(line)
            if found:
                name, status = found.group(name_group), found.group(status_group)
                if statuses.get(name, "PASSED") in PASSING:
                    statuses[name] = status
                break
    return statuses


def swe_report(statuses: dict[str, str], fail_to_pass: list[str], pass_to_pass: list[str]) -> dict[str, Any]:
    """SWE-bench's report shape: each listed test as success or failure (a test with no status
    failed), and ``resolved`` when every one passed. ``statuses`` come from
    ``score_witness.test_statuses``, which knows which of the output's lines to believe."""
    report: dict[str, Any] = {}
    for name, tests in (("FAIL_TO_PASS", fail_to_pass), ("PASS_TO_PASS", pass_to_pass)):
        success = [t for t in tests if statuses.get(t) in PASSING]
        report[name] = {"success": success, "failure": [t for t in tests if t not in success]}
    report["resolved"] = not report["FAIL_TO_PASS"]["failure"] and not report["PASS_TO_PASS"]["failure"]
    return report


#: Folders whose new files are never part of a prediction (caches, environments, Roder's own).
SCRATCH_DIRS = frozenset(
    {
        "__pycache__",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        ".tox",
        ".nox",
        ".venv",
        "venv",
        "node_modules",
        ".roder",
        ".eggs",
        ".hypothesis",
    }
)
SCRATCH_SUFFIXES = (".pyc", ".pyo", ".orig", ".rej", ".bak", ".swp", ".log")
#: New files at the repository root with these name starts are the agent's own experiments.
SCRATCH_ROOT_PREFIXES = ("reproduce", "repro", "scratch", "debug", "tmp", "temp")


def is_scratch(path: str) -> bool:
    parts = PurePosixPath(path).parts
    name = parts[-1]
    if any(p in SCRATCH_DIRS or p.endswith(".egg-info") for p in parts[:-1]) or name.endswith(SCRATCH_SUFFIXES):
        return True
    return len(parts) == 1 and (name.startswith(SCRATCH_ROOT_PREFIXES) or re.fullmatch(r"test_.*\.py", name) is not None)


def patch_paths(changes: list[tuple[str, str]]) -> list[str]:
    """The prediction's files: every change to a file that existed before the agent, and every
    new file that is not scratch (``is_scratch``)."""
    return [path for status, path in changes if status != "A" or not is_scratch(path)]
