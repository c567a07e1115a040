"""A subcommand named without its action (``roder tools``, ``roder plugin marketplace``) prints
its usage with its actions and exits 0, as ``gh repo`` and ``docker container`` do: every such
command, found from the parsers themselves, so a new one is covered as it is added."""

from __future__ import annotations

import argparse
import importlib

import pytest

from roder_tui.cli import SUBCOMMANDS, main


def _nouns() -> list[tuple[list[str], list[str]]]:
    """Every command path whose parser needs an action, with the actions it offers."""
    found: list[tuple[list[str], list[str]]] = []

    def walk(path: list[str], parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                found.append((path, list(action.choices)))
                for name, child in action.choices.items():
                    walk([*path, name], child)

    for name, (module_name, help_) in SUBCOMMANDS.items():
        parser = argparse.ArgumentParser(prog=f"roder {name}", description=help_)
        importlib.import_module(module_name).add_arguments(parser)
        walk([name], parser)
    return found


NOUNS = _nouns()


def test_the_nouns_testers_met_are_among_them() -> None:
    paths = {" ".join(path) for path, _ in NOUNS}
    assert {"tools", "mcp", "audit", "extensions", "sessions", "providers", "plugin", "plugin marketplace"} <= paths


@pytest.mark.parametrize(("path", "actions"), NOUNS, ids=[" ".join(path) for path, _ in NOUNS])
def test_a_noun_without_its_action_prints_its_actions_and_exits_0(
    path: list[str], actions: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(path) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"usage: roder {' '.join(path)} ")
    listed = {line.split()[0] for line in out.splitlines() if line.startswith("    ") and line.strip()}
    assert set(actions) <= listed, out
    assert err == ""


def test_an_option_without_an_action_is_still_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """Only the bare noun shows its usage: ``roder tools --json`` names no action, so argparse
    refuses it (exit 2) rather than acting on a guess."""
    with pytest.raises(SystemExit) as ended:
        main(["tools", "--json"])
    assert ended.value.code == 2
    assert "required: action" in capsys.readouterr().err
