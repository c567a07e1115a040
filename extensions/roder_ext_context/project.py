"""Project instructions: AGENTS.md files (CLAUDE.md where a folder has no AGENTS.md).

Read from the repository root down to the working directory (the most specific last), after
the user's global one in the config directory. They are plain text for the model, never code or
config, so they are read whether or not the folder is trusted (as every peer does), always through
the project reader (``brokers.project_reader``): a link out of the project, a secret or a withheld
file is skipped with a notice, never read.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from roder_core.brokers.project_reader import ProjectFileRefused, ProjectReader, notice, project_root
from roder_core.kernel.services import ContextBlock, ContextQuery
from roder_core.settings.config import RoderConfig, config_reader
from roder_core.settings.paths import RoderPaths

INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md")
#: Longer files are cut (with a note): a runaway file must not eat the context window.
MAX_FILE_CHARS = 40_000


def instructions_in(reader: ProjectReader, folder: Path) -> Path | None:
    for name in INSTRUCTION_FILES:
        candidate = folder / name
        if reader.is_file(candidate):
            return candidate
    return None


def instruction_files(cwd: Path, user: ProjectReader, project: ProjectReader) -> list[tuple[ProjectReader, Path]]:
    """Global file first, then repository root -> working directory (only the working directory
    outside a repository: folders above it are not this project's)."""
    found: list[tuple[ProjectReader, Path]] = []
    own = instructions_in(user, user.root)
    if own is not None:
        found.append((user, own))
    root = project.root
    chain = [cwd, *[p for p in cwd.parents if p == root or root in p.parents]]
    for folder in reversed(chain):
        path = instructions_in(project, folder)
        if path is not None and all(path != seen for _, seen in found):
            found.append((project, path))
    return found


def _read(reader: ProjectReader, path: Path) -> str | None:
    """The file's text through the project reader (links out of the project, secrets, withheld
    files, FIFOs and hard links refused, with a notice)."""
    try:
        text = reader.read_text(path, errors="replace")
    except FileNotFoundError:
        return None
    except ProjectFileRefused as exc:
        return f"[roder: {notice(exc)}]"
    if len(text) > MAX_FILE_CHARS:
        text = text[:MAX_FILE_CHARS] + f"\n[roder: cut at {MAX_FILE_CHARS} characters of {len(text)}]"
    return text.strip() or None


class ProjectInstructions:
    def __init__(self, config: RoderConfig, paths: RoderPaths, env: Mapping[str, str]) -> None:
        self.config = config
        self.paths = paths
        self.env = env
        #: The readers of the folders asked about, built once per runtime (the config's masks
        #: and read rules they carry do not change while it runs), not again for every model call.
        self._readers: dict[Path, ProjectReader] = {}

    def _reader(self, root: Path) -> ProjectReader:
        reader = self._readers.get(root)
        if reader is None:
            reader = self._readers[root] = config_reader(root, self.config, self.paths, self.env)
        return reader

    def id(self) -> str:
        return "project-instructions"

    async def load_context(self, query: ContextQuery) -> list[ContextBlock]:
        cwd = Path(query.cwd).resolve()
        user = self._reader(self.paths.config_dir)
        project = self._reader(project_root(cwd))
        sections = []
        for reader, path in instruction_files(cwd, user, project):
            text = _read(reader, path)
            if text is not None:
                sections.append(f'<instructions path="{path}">\n{text}\n</instructions>')
        if not sections:
            return []
        text = (
            "# Project instructions\n"
            "These come from the user's global AGENTS.md and the project's AGENTS.md/CLAUDE.md files "
            "(repository root first, the working directory last; later ones are more specific). Follow them.\n\n"
            + "\n\n".join(sections)
        )
        return [ContextBlock(source="project", kind="project-instructions", text=text, priority=20)]
