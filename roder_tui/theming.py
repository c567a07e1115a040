"""Themes: TOML files turned into Textual themes plus the styles the transcript renders with.

Built-in themes ship in the wheel as ``roder_tui/themes``; in a source checkout they are read from
the repository's ``themes/`` folder. Users add their own ``*.toml`` files to ``<config>/themes``;
a user theme with a built-in's name replaces it. A broken file is reported and skipped, never
fatal: the app still starts with the themes that loaded.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from textual.theme import Theme

DEFAULT_THEME = "roder-dark"
COLOR_KEYS = (
    "primary",
    "secondary",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "success",
    "warning",
    "error",
    "boost",
)
#: Theme variables the transcript's CSS uses; every theme gets these defaults.
VARIABLE_DEFAULTS = {
    "user-border": "#5fafff",
    "diff-added": "#87d787",
    "diff-removed": "#ff8787",
    "diff-hunk": "#87afd7",
}


class CodeStyle:
    """The Pygments style code blocks use; set from the active theme."""

    name = "monokai"


class ThemeFileError(ValueError):
    """A theme file that cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class RoderTheme:
    name: str
    dark: bool
    code_theme: str
    colors: dict[str, str]
    variables: dict[str, str] = field(default_factory=dict)
    source: str = ""

    def variable(self, key: str) -> str:
        return self.variables.get(key) or VARIABLE_DEFAULTS[key]

    def to_textual(self) -> Theme:
        from textual.theme import Theme

        color = self.colors.get
        return Theme(
            name=self.name,
            primary=self.colors["primary"],
            secondary=color("secondary"),
            accent=color("accent"),
            foreground=color("foreground"),
            background=color("background"),
            surface=color("surface"),
            panel=color("panel"),
            success=color("success"),
            warning=color("warning"),
            error=color("error"),
            boost=color("boost"),
            dark=self.dark,
            variables={**VARIABLE_DEFAULTS, **self.variables},
        )


def builtin_theme_dirs() -> list[Path]:
    """The wheel's ``roder_tui/themes`` and, in a source checkout, the repository's ``themes``."""
    here = Path(__file__).resolve().parent
    return [d for d in (here / "themes", here.parent / "themes") if d.is_dir()]


def parse_theme(path: Path, *, check_code_theme: bool = True) -> RoderTheme:
    """The theme in ``path``. ``check_code_theme=False`` skips looking ``code_theme`` up among
    Pygments' styles (which imports Pygments): for the themes shipped with Roder, read before the
    app's first frame and checked by the test suite instead."""
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ThemeFileError(f"{path}: {exc}") from exc
    colors = data.get("colors", {})
    if not isinstance(colors, dict) or "primary" not in colors:
        raise ThemeFileError(f"{path}: a [colors] table with at least `primary` is required")
    unknown = sorted(set(colors) - set(COLOR_KEYS))
    if unknown:
        raise ThemeFileError(f"{path}: unknown colour keys {', '.join(unknown)} (known: {', '.join(COLOR_KEYS)})")
    from textual.color import Color, ColorParseError

    for key, value in {**colors, **data.get("variables", {})}.items():
        try:
            Color.parse(str(value))
        except ColorParseError as exc:
            raise ThemeFileError(f"{path}: {key} = {value!r} is not a colour") from exc
    code_theme = str(data.get("code_theme", "monokai" if data.get("dark", True) else "friendly"))
    if check_code_theme and not _is_pygments_style(code_theme):
        raise ThemeFileError(f"{path}: code_theme {code_theme!r} is not a Pygments style")
    return RoderTheme(
        name=str(data.get("name") or path.stem),
        dark=bool(data.get("dark", True)),
        code_theme=code_theme,
        colors={k: str(v) for k, v in colors.items()},
        variables={k: str(v) for k, v in data.get("variables", {}).items()},
        source=str(path),
    )


def _is_pygments_style(name: str) -> bool:
    from pygments.styles import STYLE_MAP  # a name table: cheap, unlike loading every style

    if name in STYLE_MAP:
        return True
    from pygments.styles import get_style_by_name
    from pygments.util import ClassNotFound

    try:
        get_style_by_name(name)  # a style from a plugin package
    except ClassNotFound:
        return False
    return True


@dataclass
class ThemeSet:
    themes: dict[str, RoderTheme]
    errors: list[str]

    def get(self, name: str | None) -> RoderTheme:
        return self.themes.get(name or "") or self.themes.get(DEFAULT_THEME) or next(iter(self.themes.values()))


def load_themes(user_dir: Path | None) -> ThemeSet:
    """Built-in themes first, then the user's (which may override a built-in by name)."""
    themes: dict[str, RoderTheme] = {}
    errors: list[str] = []
    builtin = builtin_theme_dirs()
    dirs = [*builtin, *([user_dir] if user_dir is not None and user_dir.is_dir() else [])]
    for folder in dirs:
        for path in sorted(folder.glob("*.toml")):
            try:
                theme = parse_theme(path, check_code_theme=folder not in builtin)
            except ThemeFileError as exc:
                errors.append(str(exc))
                continue
            themes[theme.name] = theme
    if not themes:
        errors.append("no theme files found; using a built-in fallback")
        themes[DEFAULT_THEME] = RoderTheme(DEFAULT_THEME, True, "monokai", {"primary": "#5fafff"})
    return ThemeSet(themes, errors)


#: Claude Code theme colour names that mean one of Roder's (other names match Roder's own).
CLAUDE_COLOR_NAMES = {"claude": "primary", "text": "foreground", "permission": "accent", "suggestion": "secondary"}


def plugin_theme(path: Path, plugin: str, themes: ThemeSet) -> RoderTheme:
    """A plugin's theme file ``{name, base, overrides}`` (Claude Code's format) as a Roder theme
    named ``<plugin>:<name>``: the colours of the built-in theme matching ``base`` (light or
    dark) with the overrides Roder has a colour for."""
    import json

    from textual.color import Color, ColorParseError

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ThemeFileError(f"{path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ThemeFileError(f"{path}: a theme file is a JSON object {{name, base, overrides}}")
    light = "light" in str(data.get("base") or "dark").lower()
    base = themes.themes.get("roder-light" if light else DEFAULT_THEME) or themes.get(None)
    raw = data.get("overrides")
    overrides: dict[str, Any] = raw if isinstance(raw, dict) else {}
    colors = dict(base.colors)
    ignored = []
    for key, value in overrides.items():
        target = CLAUDE_COLOR_NAMES.get(str(key), str(key))
        try:
            parsed = Color.parse(str(value))
        except ColorParseError:
            ignored.append(str(key))
            continue
        if target in COLOR_KEYS:
            colors[target] = parsed.hex
        else:
            ignored.append(str(key))
    name = f"{plugin}:{data.get('name') or path.stem}"
    source = f"{path}" + (f" (no Roder colour for: {', '.join(sorted(ignored))})" if ignored else "")
    return RoderTheme(name, not light, base.code_theme, colors, dict(base.variables), source)


def add_plugin_themes(themes: ThemeSet, cwd: Path) -> list[RoderTheme]:
    """The themes of the user's enabled plugins (a project's own plugin settings are not read
    here: the folder may not be trusted), added to ``themes``; a bad file is one error line."""
    from roder_core.plugins.enabled import active_plugins
    from roder_core.settings.paths import RoderPaths

    added = []
    for plugin in active_plugins(RoderPaths.from_env(), cwd, False).plugins:
        for path in plugin.layout.themes:
            try:
                theme = plugin_theme(path, plugin.name, themes)
            except ThemeFileError as exc:
                themes.errors.append(str(exc))
                continue
            themes.themes[theme.name] = theme
            added.append(theme)
    return added


def rich_styles(theme: RoderTheme) -> dict[str, str]:
    """Rich style names the finished-message renderer looks up, derived from the theme colours
    so finished and streaming messages read alike."""
    c = theme.colors
    primary, accent = c.get("primary", "cyan"), c.get("accent", "yellow")
    secondary = c.get("secondary", primary)
    panel = c.get("panel", "grey23")
    muted = _blend(c.get("foreground", "#e4e4e4"), c.get("background", "#121212"), 0.4)
    return {
        "markdown.h1": f"bold {primary}",
        "markdown.h2": f"bold {primary}",
        "markdown.h3": f"bold {secondary}",
        "markdown.h4": f"bold {secondary}",
        "markdown.h5": f"italic {secondary}",
        "markdown.h6": f"italic {secondary}",
        "markdown.code": f"bold {accent} on {panel}",
        "markdown.link": f"underline {primary}",
        "markdown.link_url": f"underline {secondary}",
        "markdown.item.bullet": f"bold {accent}",
        "markdown.item.number": f"bold {accent}",
        "markdown.block_quote": f"italic {secondary}",
        "markdown.hr": secondary,
        "markdown.table.border": secondary,
        "markdown.table.header": f"bold {primary}",
        "roder.accent": f"bold {accent}",
        "roder.error": c.get("error", "red"),
        "roder.success": f"bold {c.get('success', 'green')}",
        "roder.warning": f"bold {c.get('warning', 'yellow')}",
        "roder.muted": muted,
        "roder.steer": f"italic {muted}",
        "diff.added": theme.variable("diff-added"),
        "diff.removed": theme.variable("diff-removed"),
        "diff.hunk": theme.variable("diff-hunk"),
    }


def _blend(foreground: str, background: str, amount: float) -> str:
    """``foreground`` moved ``amount`` of the way towards ``background`` (a muted text colour)."""
    from textual.color import Color

    return Color.parse(foreground).blend(Color.parse(background), amount).hex


def save_theme_choice(config_file: Path, name: str) -> None:
    """Persist the chosen theme in config.toml (comments and layout kept)."""
    from roder_core.settings.config import ConfigWriter

    ConfigWriter(config_file).set("theme", name)
