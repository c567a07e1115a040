"""``/plugin``: browse the added marketplaces, preview a plugin and install it with keys.

Typing searches (``marketplaces/search``); up/down move; enter previews the highlighted plugin
(``plugins/preview_install``: its components and everything that would run code); ``v`` picks
the next variant (``name@marketplace``) when several catalogs offer the name; ``i`` installs
after the preview, asking first when the plugin runs code (``y`` to accept); ``d`` disables an
installed one; esc closes. Everything goes through the app server's methods.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

Request = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


def preview_text(data: dict[str, Any]) -> str:
    """The preview as the screen shows it (and what the user accepts)."""
    plugin = data["plugin"]
    lines = [f"{plugin['id']}  version {data['version']}", f"source: {plugin['sourceDescription']}"]
    if plugin.get("description"):
        lines.append(" ".join(plugin["description"].split()))
    components = data.get("components") or {}
    for key, label in (("commands", "commands"), ("skills", "skills"), ("agents", "agents")):
        if components.get(key):
            lines.append(f"{label}: {', '.join(components[key])}")
    for server in components.get("mcpServers") or []:
        lines.append(f"MCP server: {server['id']}")
    if not data.get("componentsKnown"):
        lines.append("components: known once the command source has run")
    if data["runsCode"]:
        lines.append("Runs code while enabled:")
        lines += [f"  • {line}" for line in data["runsCode"]]
    else:
        lines.append("Runs no code of its own.")
    lines += [f"! {p}" for p in data.get("problems") or []]
    if plugin.get("installed"):
        lines.append(f"installed ({'enabled' if plugin.get('enabled') else 'disabled'}) · d disables")
    return "\n".join(lines)


class PluginScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("enter", "preview", "Preview", show=False),
        Binding("i", "install", "Install", show=False),
        Binding("y", "accept", "Accept", show=False),
        Binding("n", "refuse", "Refuse", show=False),
        Binding("v", "variant", "Variant", show=False),
        Binding("d", "disable", "Disable", show=False),
    ]
    DEFAULT_CSS = """
    PluginScreen { align: center middle; }
    PluginScreen > Vertical {
        width: 100%; max-width: 110; height: 100%; max-height: 40;
        background: $surface; border: round $primary; padding: 0 1;
    }
    PluginScreen OptionList { height: 1fr; border: none; }
    PluginScreen #plugin-detail { height: 1fr; border-top: solid $primary-darken-2; }
    PluginScreen #plugin-status { color: $warning; height: auto; }
    """

    def __init__(self, request: Request) -> None:
        super().__init__()
        self.request = request
        self.results: list[dict[str, Any]] = []
        self.variant_index: dict[str, int] = {}
        self.preview: dict[str, Any] | None = None
        self.asking = False

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = "/plugin · type to search · enter preview · i install · v variant · d disable · esc close"
            yield Input(placeholder="search plugins", id="plugin-filter")
            yield OptionList(id="plugin-list")
            yield Static("", id="plugin-status", markup=False)
            with VerticalScroll(id="plugin-detail"):
                yield Static("", id="plugin-preview", markup=False)

    async def on_mount(self) -> None:
        self.query_one(Input).focus()
        await self.search("")

    # ------------------------------------------------------------------ data

    def status(self, text: str) -> None:
        self.query_one("#plugin-status", Static).update(text)

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return await self.request(method, params)
        except Exception as exc:  # every failure is shown on the screen; it never closes it
            self.status(f"{method} failed: {exc}")
            return None

    async def search(self, query: str) -> None:
        data = await self.call("marketplaces/search", {"query": query})
        if data is None:
            return
        self.results = data["results"]
        options = self.query_one(OptionList)
        options.clear_options()
        for result in self.results:
            variants = result["variants"]
            installed = any(v["installed"] for v in variants)
            more = f"  ({len(variants)} variants)" if len(variants) > 1 else ""
            label = f"{'✓ ' if installed else '  '}{result['name']}{more}  {' '.join(result['description'].split())[:70]}"
            options.add_option(Option(label, id=result["name"]))
        if self.results:
            options.highlighted = 0
            self.status(f"{len(self.results)} plugins")
        else:
            self.status("no plugins match" if query else "no marketplaces: `roder plugin marketplace add-default` adds one")

    def selected(self) -> dict[str, Any] | None:
        options = self.query_one(OptionList)
        if options.highlighted is None or not self.results:
            return None
        result = self.results[options.highlighted]
        index = self.variant_index.get(result["name"], 0) % len(result["variants"])
        variant: dict[str, Any] = result["variants"][index]
        return variant

    # ------------------------------------------------------------------ keys

    async def on_input_changed(self, event: Input.Changed) -> None:
        self.preview = None
        await self.search(event.value)

    def on_key(self, event: events.Key) -> None:
        """Up/down move the list while the search field has focus; letters go to the field."""
        options = self.query_one(OptionList)
        if event.key in ("up", "down") and self.results:
            current = options.highlighted or 0
            options.highlighted = max(0, min(len(self.results) - 1, current + (1 if event.key == "down" else -1)))
            self.preview = None
            event.stop()

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        await self.action_preview()

    async def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        await self.action_preview()

    async def action_preview(self) -> None:
        variant = self.selected()
        if variant is None:
            return
        self.status(f"previewing {variant['id']}…")
        data = await self.call("plugins/preview_install", {"plugin": variant["id"]})
        if data is None:
            return
        self.preview = data
        self.query_one("#plugin-preview", Static).update(preview_text(data))
        self.query_one(OptionList).focus()
        self.status(f"{variant['id']}: i installs" if not data["plugin"]["installed"] else f"{variant['id']} is installed")

    async def action_variant(self) -> None:
        options = self.query_one(OptionList)
        if options.highlighted is None or not self.results:
            return
        name = self.results[options.highlighted]["name"]
        self.variant_index[name] = self.variant_index.get(name, 0) + 1
        await self.action_preview()

    async def action_install(self) -> None:
        variant = self.selected()
        if variant is None:
            return
        if self.preview is None or self.preview["plugin"]["id"] != variant["id"]:
            await self.action_preview()
        if self.preview is None:
            return
        if self.preview["runsCode"]:
            self.asking = True
            self.status(f"{variant['id']} runs the code listed below. Install it? y accepts, n refuses")
            return
        await self._install(None)

    async def action_accept(self) -> None:
        if self.asking and self.preview is not None:
            self.asking = False
            await self._install(self.preview["consent"])

    def action_refuse(self) -> None:
        if self.asking:
            self.asking = False
            self.status("not installed")

    async def _install(self, consent: str | None) -> None:
        assert self.preview is not None
        identifier = self.preview["plugin"]["id"]
        self.status(f"installing {identifier}…")
        result = await self.call("plugins/install", {"plugin": identifier, "consent": consent})
        if result is not None:
            await self.refresh_results()
            self.status(f"installed {identifier} {result['installed']['version']}: restart roder to use it")
            self.app.notify(f"installed {identifier}", title="/plugin")

    async def refresh_results(self) -> None:
        """Search again (installed marks change), keeping the highlighted plugin."""
        options = self.query_one(OptionList)
        name = self.results[options.highlighted]["name"] if options.highlighted is not None and self.results else None
        await self.search(self.query_one(Input).value)
        names = [r["name"] for r in self.results]
        if name in names:
            options.highlighted = names.index(name)

    async def action_disable(self) -> None:
        variant = self.selected()
        if variant is None or not variant["installed"]:
            return
        if await self.call("plugins/disable", {"plugin": variant["id"]}) is not None:
            await self.refresh_results()
            self.status(f"disabled {variant['id']} (from the next session on)")

    def action_close(self) -> None:
        self.dismiss(None)
