"""An attack on argument aliasing: two spellings of one argument naming different files (or
different commands) must not let policy judge one and the tool act on the other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.tools.test_model_habits_shapes import _one


@pytest.mark.parametrize(
    "arguments",
    [
        {"file_path": "ok.txt", "filePath": "secret.txt", "content": "gone\n"},
        {"filePath": "secret.txt", "file_path": "ok.txt", "content": "gone\n"},
        {"path": "ok.txt", "file_path": "secret.txt", "content": "gone\n"},
        {"file_path": "secret.txt", "path": "ok.txt", "content": "gone\n"},
    ],
    ids=["snake-then-camel", "camel-then-snake", "path-and-alias", "alias-then-path"],
)
async def test_two_spellings_of_a_path_never_split_policy_from_the_write(
    workspace: Path, roder_home: Path, arguments: dict[str, Any]
) -> None:
    (roder_home / "config.toml").write_text('[policy]\ndeny = ["write(secret.txt)"]\n')
    (workspace / "secret.txt").write_text("keep\n")
    _rt, [result] = await _one(workspace, "write", **arguments)
    # whatever the tool did, the denied file is untouched: either the call was denied, or the
    # write went to the other file, which policy then judged
    assert (workspace / "secret.txt").read_text() == "keep\n", result.text
    if not result.is_error:
        assert (workspace / "ok.txt").read_text() == "gone\n", result.text
