"""README's test command is exactly what CI runs, so a green CI means the README works."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_test_command() -> None:
    ci_lines = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if "pytest" in line]
    assert ci_lines, ".ci/run must run pytest"
    readme = (ROOT / "README.md").read_text()
    for line in ci_lines:
        assert line.strip() in readme, f"README must contain the CI test command: {line.strip()}"


def _readme_block(heading: str) -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index(heading) :]
    start = section.index("```python\n") + len("```python\n")
    return section[start : section.index("```", start)]


async def test_extension_example_in_readme_works(workspace: Path) -> None:
    """The README's extension example installs, validates and runs in a real turn."""
    from roder_ext_mock import MockProviderExtension

    from roder_core import ExtensionRegistryBuilder, ProvidedService
    from roder_core.ir import ToolResultItem
    from roder_core.runtime.runtime import Runtime, RuntimeOptions
    from roder_core.settings.paths import RoderPaths

    namespace: dict[str, object] = {}
    exec(compile(_readme_block("## Extensions"), "README.md", "exec"), namespace)
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


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = heading.strip().lower().replace("`", "")
    return "".join(c for c in text if c.isalnum() or c in " -_").replace(" ", "-")


def test_every_readme_link_to_a_section_finds_it() -> None:
    import re

    text = (ROOT / "README.md").read_text()
    in_code = False
    anchors = set()
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            anchors.add(_anchor(line.lstrip("#")))
    links = set(re.findall(r"\]\(#([^)]+)\)", text))
    assert "contents" in anchors
    assert "first-run" in anchors
    assert links and links <= anchors, sorted(links - anchors)
    contents = text.index("## Contents")
    assert contents < text.index("## Quick start") < text.index("## First run") < text.index("## Usage")
