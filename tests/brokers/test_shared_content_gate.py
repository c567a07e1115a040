"""One content gate per workspace and inputs (``content_gate.shared_gate``).

Every reader of a workspace with the same read rules and secret masks gets the same gate
object (a runtime's start asked for a dozen), and a reader made after any of those inputs
changed (a rule added to the config, a ``deny_read`` entry, the runtime's live rules) refuses
what the new inputs refuse.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from roder_core.brokers.content_gate import _resolved, shared_gate
from roder_core.brokers.project_reader import ProjectFileRefused, ProjectReader
from roder_core.policy.rules import RuleSet
from roder_core.settings.config import RoderConfig, config_reader
from roder_core.settings.paths import RoderPaths


def _config(deny: list[str], deny_read: list[str] = ()) -> RoderConfig:  # type: ignore[assignment]
    return RoderConfig.model_validate({"policy": {"deny": deny}, "sandboxing": {"deny_read": list(deny_read)}})


def _gate(reader: ProjectReader) -> object:
    return reader._fs.gate


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    for name in ("a.txt", "b.txt", "c.txt"):
        (root / name).write_text(f"content of {name}\n")
    return root


@pytest.fixture
def paths(tmp_path: Path) -> RoderPaths:
    return RoderPaths.from_env({"RODER_HOME": str(tmp_path / "home"), "HOME": str(tmp_path)})


def test_readers_with_the_same_inputs_share_one_gate(project: Path, paths: RoderPaths) -> None:
    env = {"HOME": str(project.parent)}
    first = config_reader(project, _config(["read(a.txt)"]), paths, env)
    again = config_reader(project, _config(["read(a.txt)"]), paths, env)  # an equal config, another object
    assert _gate(first) is _gate(again)
    with pytest.raises(ProjectFileRefused, match=r"a\.txt is withheld by the rule deny read"):
        again.read_text(project / "a.txt")


def test_a_changed_rule_or_mask_is_seen_by_the_next_reader(project: Path, paths: RoderPaths) -> None:
    env = {"HOME": str(project.parent)}
    before = config_reader(project, _config(["read(a.txt)"]), paths, env)
    assert before.read_text(project / "b.txt") == "content of b.txt\n"

    denied = config_reader(project, _config(["read(a.txt)", "read(b.txt)"]), paths, env)
    assert _gate(denied) is not _gate(before)
    with pytest.raises(ProjectFileRefused, match=r"b\.txt is withheld by the rule deny read"):
        denied.read_text(project / "b.txt")

    masked = config_reader(project, _config(["read(a.txt)"], [str(project / "c.txt")]), paths, env)
    with pytest.raises(ProjectFileRefused, match=r"c\.txt is a secret path"):
        masked.read_text(project / "c.txt")
    # the earlier inputs still get their own gate, which still answers as before
    assert config_reader(project, _config(["read(a.txt)"]), paths, env).read_text(project / "c.txt") == "content of c.txt\n"


def test_live_rules_are_shared_and_their_changes_seen(project: Path) -> None:
    rules = RuleSet(deny=["read(a.txt)"])
    gate = shared_gate(project, rules=rules)
    assert shared_gate(project, rules=rules) is gate
    assert gate.refusal(project / "c.txt") is None
    rules.add("deny", "read(c.txt)")  # a rule added from an approval applies at once
    assert shared_gate(project, rules=rules) is gate
    assert gate.refusal(project / "c.txt") == "c.txt is withheld by the rule deny read(c.txt)"
    # another live rule set (another runtime) is another gate, whatever it holds
    assert shared_gate(project, rules=RuleSet(deny=["read(a.txt)"])) is not gate


def test_another_workspace_or_home_is_another_gate(project: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    assert shared_gate(project, masked=[tmp_path / "k"]) is not shared_gate(other, masked=[tmp_path / "k"])
    assert shared_gate(project, masked=[project / "a.txt"]) is not shared_gate(project, masked=[project / "b.txt"])
    refused = shared_gate(project, masked=[project / "b.txt"]).refusal(project / "b.txt")
    assert refused is not None and "secret path" in refused


def test_masks_resolve_through_links_like_realpath(tmp_path: Path) -> None:
    """A gate resolves each mask's parent folder once and looks at the last name alone; that
    must give ``os.path.realpath``'s answer for every mask: through a linked folder, a link as
    the last name, a dangling link, a loop, a missing name, ``.``/``..`` and a relative path."""
    (tmp_path / "real" / "sub").mkdir(parents=True)
    (tmp_path / "ws").mkdir()
    (tmp_path / "real" / "plain").write_text("x")
    links = {
        "linkdir": "real",
        "real/sub/tows": "../ws",
        "real/to-secret": str(tmp_path / "ws" / "secret"),
        "loop1": "loop2",
        "loop2": "loop1",
        "dangling": "nowhere",
    }
    for name, target in links.items():
        (tmp_path / name).symlink_to(target)
    names = ["real", "linkdir", "sub", "tows", "to-secret", "plain", "loop1", "dangling", "ws", "missing"]
    parents: dict[str, str] = {}
    for combo in itertools.chain.from_iterable(itertools.product(names, repeat=k) for k in (1, 2, 3)):
        tail = "/".join(combo)
        for mask in (f"{tmp_path}/{tail}", f"{tmp_path}/real/../{tail}", f"{tmp_path}/./{tail}/", f"rel/{tail}"):
            assert _resolved(mask, parents) == os.path.realpath(mask), mask


def test_a_mask_under_a_linked_folder_guards_what_the_link_reaches(tmp_path: Path, project: Path) -> None:
    """``~/keys/id`` where ``~/keys`` links into the workspace: the file the mask resolves to is
    refused, by its own name and through the link."""
    home = tmp_path / "home"
    home.mkdir()
    (project / "keys").mkdir()
    (project / "keys" / "id").write_text("secret\n")
    (home / "keys").symlink_to(project / "keys")
    gate = shared_gate(project, masked=[home / "keys" / "id"])
    assert gate.refusal(project / "keys" / "id") is not None
    assert gate.refusal(home / "keys" / "id") is not None
    assert gate.refusal(project / "a.txt") is None


@pytest.mark.parametrize(
    ("rule", "forms"),
    [
        ("read(.env)", [".env", "sub/.env", "sub/./.env", "sub//.env", "./sub/.env/"]),
        ("read(./top.key)", ["top.key", "./top.key", ".//top.key"]),
        ("read(secrets/**)", ["secrets/a", "secrets/./deep/b", "secrets//c/"]),
    ],
)
def test_the_gate_reads_every_spelling_of_a_path_the_same(tmp_path: Path, rule: str, forms: list[str]) -> None:
    """The gate works on path strings (a search asks it once per listed file): a path with
    ``.`` components, doubled or trailing slashes is refused as its plain form is, given
    absolute or relative, and a path outside the workspace or merely sharing its prefix is not."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    gate = shared_gate(workspace, rules=RuleSet(deny=[rule]))
    real = Path(os.path.realpath(workspace))
    for form in forms:
        assert gate.refusal(f"{real}/{form}") is not None, form
        assert gate.refusal(real / form) is not None, form
    assert gate.refusal(f"{real}-other/{forms[0]}") is None  # shares the workspace's prefix only
    assert gate.refusal(f"{real}/elsewhere.txt") is None
