"""Output styles: a plugin's ``output-styles/*.md``, chosen with ``/output-style``.

A style is markdown with frontmatter (``name``, ``description``, ``keep-coding-instructions``)
whose body tells the model how to answer (explanatory, terse, teaching...). Enabled plugins'
styles are named ``<plugin>:<style>``. The choice is the user's and lasts across sessions:
``<data dir>/plugins/output_style.json``. The chosen style's text joins the system prompt
(``OutputStyleContext`` in the skills extension reads the choice at every request, so a change
applies from the next request on); ``/output-style default`` goes back to none.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from roder_core.brokers.project_reader import ProjectReader
from roder_core.customization.definitions import DefinitionError, read_definition_file
from roder_core.plugins.enabled import ActivePlugins
from roder_core.plugins.records import PluginDirs, read_json, write_json
from roder_core.settings.paths import RoderPaths

CHOICE_FILE = "output_style.json"
#: Names that mean "no style".
DEFAULT_NAMES = frozenset({"default", "none", "off"})


class OutputStyleError(ValueError):
    """An unknown style name; the message lists the known ones."""


@dataclass(frozen=True)
class OutputStyle:
    name: str
    description: str
    prompt: str
    keep_coding_instructions: bool
    path: Path


def plugin_output_styles(active: ActivePlugins, problems: list[str] | None = None) -> dict[str, OutputStyle]:
    """Every enabled plugin's styles by ``plugin:style``; an unreadable file is one problem line."""
    found: dict[str, OutputStyle] = {}
    if not active.plugins:
        return found
    from roder_core.plugins.manifest import boolean  # loaded with the plugins' layouts

    for plugin in active.plugins:
        for stem, path in plugin.layout.output_styles:
            try:
                meta, body = read_definition_file(path, ProjectReader(plugin.layout.root))
            except (OSError, UnicodeDecodeError, DefinitionError) as exc:
                if problems is not None:
                    problems.append(f"plugin {plugin.id}: output style {path.name}: {exc}")
                continue
            own = str(meta.get("name") or "").strip() or stem
            name = f"{plugin.name}:{own}"
            keep = boolean(meta.get("keep-coding-instructions", False))
            found.setdefault(name, OutputStyle(name, str(meta.get("description") or "").strip(), body.strip(), bool(keep), path))
    return found


def _choice_file(paths: RoderPaths) -> Path:
    return PluginDirs.of(paths).root / CHOICE_FILE


def chosen_style(paths: RoderPaths) -> str | None:
    data = read_json(_choice_file(paths), {})
    name = data.get("style") if isinstance(data, dict) else None
    return name if isinstance(name, str) and name else None


def choose_style(paths: RoderPaths, styles: dict[str, OutputStyle], name: str) -> str | None:
    """Record the user's choice (a full ``plugin:style`` name, or a style name only one plugin
    has; ``default`` clears it); returns the name chosen, None for the default."""
    wanted = name.strip()
    if wanted.lower() in DEFAULT_NAMES:
        write_json(_choice_file(paths), {})
        return None
    matches = [n for n in styles if n == wanted] or [n for n in styles if n.split(":", 1)[1] == wanted]
    if len(matches) != 1:
        known = ", ".join(sorted(styles)) or "none (no enabled plugin has output styles)"
        what = "is ambiguous" if matches else "is not an output style"
        raise OutputStyleError(f"{wanted!r} {what}; styles: {known}; or default")
    write_json(_choice_file(paths), {"style": matches[0]})
    return matches[0]


def style_instructions(style: OutputStyle) -> str:
    """The system-prompt text of a chosen style."""
    keep = (
        "Keep following your coding instructions; this style changes how you communicate."
        if style.keep_coding_instructions
        else "This style takes precedence over general guidance on how to communicate."
    )
    return f"Output style {style.name} (chosen by the user with /output-style). {keep}\n\n{style.prompt}"
