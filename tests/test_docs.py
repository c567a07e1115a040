"""The documentation site: every page is in the navigation, user pages speak the user's language,
and the extension example the docs show works. (`mkdocs build --strict` in .ci/run checks every
link and anchor of the site.)"""

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: Design-process references that mean nothing to a user ("issue 14", "seed 003", "seeds/").
JARGON = re.compile(r"\bissue #?\d+\b|\bseeds? 0\d\d\b|\bseeds/", re.IGNORECASE)


def _nav_pages(nav: Any) -> set[str]:
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, list):
        return set().union(*(_nav_pages(entry) for entry in nav))
    return set().union(*(_nav_pages(value) for value in nav.values()))


def test_every_page_is_in_the_navigation_and_every_entry_exists() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    nav = _nav_pages(config["nav"])
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert nav == pages, {"not in nav": sorted(pages - nav), "missing": sorted(nav - pages)}


def test_the_site_build_validates_links_and_anchors() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["strict"] is True
    assert config["validation"]["anchors"] == "warn"  # a warning fails a strict build
    assert "mkdocs build --strict" in (ROOT / ".ci" / "run").read_text()


def test_user_docs_carry_no_internal_jargon() -> None:
    """docs/architecture.md may cite the design seeds it follows; the user pages may not."""
    for page in [*DOCS.glob("*.md"), ROOT / "README.md", ROOT / "CONTRIBUTING.md"]:
        if page.name == "architecture.md":
            continue
        found = JARGON.findall(page.read_text())
        assert not found, f"{page.relative_to(ROOT)}: {found}"


def _first_python_block(page: Path) -> str:
    text = page.read_text()
    start = text.index("```python\n") + len("```python\n")
    return text[start : text.index("```", start)]


async def test_the_extension_example_of_the_docs_works(workspace: Path) -> None:
    """The first example of docs/extensions.md installs, validates and runs in a real turn."""
    from roder_ext_mock import MockProviderExtension

    from roder_core import ExtensionRegistryBuilder, ProvidedService
    from roder_core.ir import ToolResultItem
    from roder_core.runtime.runtime import Runtime, RuntimeOptions
    from roder_core.settings.paths import RoderPaths

    namespace: dict[str, object] = {}
    exec(compile(_first_python_block(DOCS / "extensions.md"), "docs/extensions.md", "exec"), namespace)
    builder = ExtensionRegistryBuilder()
    builder.install(namespace["create"](None))  # type: ignore[operator]
    builder.install(
        MockProviderExtension(
            [
                {"tool_calls": [{"name": "shout", "arguments": {"text": "hello"}}]},
                {"text": "done"},
            ]
        )
    )
    registry = builder.build()
    assert ProvidedService.ToolProvider("shout-tools") in registry.provided_services()
    shout = registry.tool_registry().get("shout")
    assert shout is not None
    assert shout.spec().parameters["required"] == ["text"]  # the schema comes from the argument model
    runtime = Runtime(registry, RuntimeOptions(cwd=workspace, paths=RoderPaths.from_env(), provider="mock"))
    thread = await runtime.start_thread()
    turn = await runtime.run_turn(thread.id, "shout hello")
    assert turn.status == "completed"
    results = [i for i in runtime.thread(thread.id).items() if isinstance(i, ToolResultItem)]
    assert [r.text for r in results] == ["HELLO"]
    await runtime.close()


@pytest.mark.timeout(700)  # a collection of several areas in a child, on a loaded machine
def test_the_quick_lane_leaves_out_the_slow_areas() -> None:
    """CONTRIBUTING's `-m "not slow"` lane selects no end-to-end, runner, batch, security or
    packaging test, and keeps the rest."""
    import subprocess
    import sys

    contributing = (ROOT / "CONTRIBUTING.md").read_text()
    assert 'python -m pytest -q -m "not slow"' in contributing
    areas = ["tests/e2e", "tests/runners", "tests/batch", "tests/security", "tests/test_packaging.py", "tests/test_readme.py"]
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "not slow", "-p", "no:cacheprovider", *areas],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    selected = [line for line in listed.stdout.splitlines() if "::" in line]
    assert selected, listed.stdout + listed.stderr
    assert all(line.startswith("tests/test_readme.py::") for line in selected), selected


#: Keep a Changelog's kinds of change, plus the project's own "Performance" (CONTRIBUTING.md).
CHANGE_KINDS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security", "Performance")


def test_the_changelog_keeps_a_changelog() -> None:
    """Its shape, as keepachangelog.com gives it: `## [Unreleased]` first, then releases newest
    first as `## [X.Y.Z] - YYYY-MM-DD`, each with its kinds of change once; every bracketed
    version has its link at the end (without one a Markdown renderer shows the brackets), and
    the newest release is the package's version or older."""
    import roder_core

    text = (ROOT / "CHANGELOG.md").read_text()
    lines = text.splitlines()
    assert lines[0] == "# Changelog"
    versions = [line for line in lines if line.startswith("## ")]
    assert versions[0] == "## [Unreleased]"
    released = [re.fullmatch(r"## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})", line) for line in versions[1:]]
    assert all(released), [line for line, match in zip(versions[1:], released, strict=True) if not match]
    numbers = [tuple(int(part) for part in match[1].split(".")) for match in released if match]
    dates = [match[2] for match in released if match]
    assert numbers == sorted(numbers, reverse=True) and len(set(numbers)) == len(numbers)
    assert dates == sorted(dates, reverse=True)
    assert numbers[0] <= tuple(int(part) for part in roder_core.__version__.split(".")[:3])
    for section in re.split(r"^## ", text, flags=re.MULTILINE)[1:]:
        kinds = re.findall(r"^### (.+)$", section, flags=re.MULTILINE)
        assert set(kinds) <= set(CHANGE_KINDS), (section.splitlines()[0], kinds)
        assert len(kinds) == len(set(kinds)), (section.splitlines()[0], kinds)
    links = dict(re.findall(r"^\[([^\]]+)\]: (\S+)$", text, flags=re.MULTILINE))
    for name in ["Unreleased", *(".".join(map(str, number)) for number in numbers)]:
        assert name in links, f"[{name}] has no link at the end of CHANGELOG.md"
    assert links["Unreleased"].endswith(f"compare/v{'.'.join(map(str, numbers[0]))}...HEAD")
