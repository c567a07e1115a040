"""README's test command is exactly what CI runs, so a green CI means the README works."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_test_command() -> None:
    ci_lines = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if "pytest" in line]
    assert ci_lines, ".ci/run must run pytest"
    readme = (ROOT / "README.md").read_text()
    for line in ci_lines:
        assert line.strip() in readme, f"README must contain the CI test command: {line.strip()}"
