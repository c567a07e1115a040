"""Domain data crosses into protocol models through one conversion (``from_domain``) that refuses
to drop a field: protocol models ignore unknown keys, so a key renamed on one side would otherwise
vanish while the model's field kept its default."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from roder_core.server.protocol import ProtocolModel, from_domain

METHODS_DIR = Path(__file__).resolve().parents[2] / "roder_core" / "server" / "methods"


class Inner(ProtocolModel):
    name: str
    size: int = 0


class Outer(ProtocolModel):
    title: str
    items: list[Inner] = []
    extra_info: dict[str, object] = {}


def test_every_key_that_arrives_is_kept() -> None:
    data = {"title": "t", "items": [{"name": "a", "size": 2}], "extraInfo": {"anything": 1}}
    outer = from_domain(Outer, data)
    assert outer.items[0].size == 2
    assert from_domain(Outer, {"title": "t", "extra_info": {}}).extra_info == {}  # Python names count too


def test_a_renamed_key_fails_instead_of_defaulting() -> None:
    with pytest.raises(TypeError, match=r"Outer would drop titel"):
        from_domain(Outer, {"titel": "renamed", "title": "t"})


def test_a_renamed_key_inside_a_list_fails_too() -> None:
    with pytest.raises(TypeError, match=r"items\.0\.bytes"):
        from_domain(Outer, {"title": "t", "items": [{"name": "a", "bytes": 3}]})


def test_every_result_built_from_domain_data_goes_through_the_boundary() -> None:
    """No handler validates a protocol model from a dict directly (``Model.model_validate(...)``):
    ``from_domain`` is the one way in. (``attach.py`` re-validates one protocol model's own dump.)"""
    offenders = []
    for path in sorted(METHODS_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "model_validate" and path.name != "attach.py":
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []
