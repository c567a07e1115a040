"""The README is the front door: its two commands are what CI runs, and every link in it lands."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def heading_anchors(markdown: str) -> set[str]:
    """GitHub's anchors of the headings outside fenced code: lower case, punctuation dropped, spaces to dashes."""
    anchors = set()
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and re.match(r"#{1,6} ", line):
            text = line.lstrip("#").strip().lower().replace("`", "")
            anchors.add("".join(c for c in text if c.isalnum() or c in " -_").replace(" ", "-"))
    return anchors


def test_ci_runs_the_readme_test_command() -> None:
    ci_lines = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if "pytest" in line]
    assert ci_lines, ".ci/run must run pytest"
    for line in ci_lines:
        assert line.strip() in README, f"README must contain the CI test command: {line.strip()}"


def test_the_readme_shows_the_install_and_start_command_first() -> None:
    install = README.index("pip install -e . && roder")
    tests = README.index('python -m pip install -q -e ".[test,remote]"')
    assert install < tests < README.index("## First run") < README.index("## Usage")


def test_the_readme_stays_a_front_door() -> None:
    """The reference lives in docs/: a README that grows back into a manual fails here."""
    assert len(README.splitlines()) < 150


def test_every_readme_link_to_a_section_finds_it() -> None:
    anchors = heading_anchors(README)
    links = set(re.findall(r"\]\(#([^)]+)\)", README))
    assert "contents" in anchors
    assert "first-run" in anchors
    assert "contributing" in links, "the contents list links to Contributing"
    assert links and links <= anchors, sorted(links - anchors)


def test_every_readme_link_to_a_file_finds_it_and_its_anchor() -> None:
    targets = [t for t in re.findall(r"\]\(([^)#\s][^)\s]*)\)", README) if "://" not in t]
    assert any(t.startswith("docs/") for t in targets)
    for target in targets:
        path, _, anchor = target.partition("#")
        assert (ROOT / path).exists(), target
        if anchor:
            assert anchor in heading_anchors((ROOT / path).read_text()), target
