"""``/plugin``: browse the added marketplaces, preview a plugin and install it with keys.

Typing searches (``marketplaces/search``); up/down move; enter previews the highlighted plugin
(``plugins/preview_install``: its components, the dependencies it brings and everything that
would run code); ``v`` picks the next variant (``name@marketplace``) when several catalogs offer
the name; ``i`` installs after the preview, asking first when the plugin runs code (``y`` to
accept) and then, when it declares ``userConfig`` options, asking for them in a dialog
(``PluginOptionsScreen``; sensitive ones are typed unechoed); ``e`` enables an installed one
(``plugins/enable``, after the same dialog for required options it still lacks, from
``plugins/read``); ``d`` disables one; ``ctrl+o`` adds what is typed in the search field (a folder,
a git URL, ``owner/repo`` or an https URL) as a marketplace (``marketplaces/add``, as ``/plugin
marketplace add SOURCE`` does); esc closes. Everything goes through the app server's
typed methods (``client.call``), the ones ``roder plugin`` calls too.
"""

from __future__ import annotations

from typing import Any

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from roder_core.server.app_client import AppClient
from roder_core.server.protocol_plugins import (
    MARKETPLACES_ADD,
    MARKETPLACES_SEARCH,
    PLUGINS_DISABLE,
    PLUGINS_ENABLE,
    PLUGINS_INSTALL,
    PLUGINS_PREVIEW_INSTALL,
    PLUGINS_READ,
    InstallParams,
    LiveChange,
    MarketplaceAddParams,
    PluginOption,
    PluginOptionsParams,
    PluginParams,
    PluginsChanged,
    PluginVariant,
    PreviewResult,
    SearchParams,
    SearchResult,
)
from roder_tui.wording import plural


def preview_text(data: PreviewResult) -> str:
    """The preview as the screen shows it (and what the user accepts)."""
    plugin = data.plugin
    lines = [f"{plugin.id}  version {data.version}", f"source: {plugin.source_description}"]
    if plugin.description:
        lines.append(" ".join(plugin.description.split()))
    components = data.components
    for values, label in ((components.commands, "commands"), (components.skills, "skills"), (components.agents, "agents")):
        if values:
            lines.append(f"{label}: {', '.join(values)}")
    for server in components.mcp_servers:
        lines.append(f"MCP server: {server['id']}")
    if not data.components_known:
        lines.append("components: known once the command source has run")
    lines += [f"brings dependency {d.id} {d.version}" for d in data.dependencies]
    for option in data.user_config:
        need = "required" if option.required else "optional"
        lines.append(f"asks for option {option.title or option.key} ({need}{', sensitive' if option.sensitive else ''})")
    if data.runs_code:
        lines.append("Runs code while enabled:")
        lines += [f"  • {line}" for line in data.runs_code]
    else:
        lines.append("Runs no code of its own.")
    lines += [f"! {p}" for p in data.problems]
    if plugin.installed:
        lines.append("installed (enabled) · d disables" if plugin.enabled else "installed (disabled) · e enables")
    return "\n".join(lines)


class PluginOptionsScreen(ModalScreen[dict[str, str] | None]):
    """The plugin's ``userConfig`` options, one field each; enter in the last field (or
    ctrl+s) sends, esc cancels the install (or the enable). Sensitive fields do not show what is
    typed."""

    BINDINGS = [Binding("ctrl+s", "send", "Send"), Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    PluginOptionsScreen { align: center middle; }
    PluginOptionsScreen > Vertical {
        width: 100%; max-width: 90; height: auto; max-height: 100%;
        background: $surface; border: round $accent; padding: 0 1;
    }
    PluginOptionsScreen .option-label { margin-top: 1; text-style: bold; }
    PluginOptionsScreen #options-keys { color: $text-muted; }
    """

    def __init__(self, plugin: str, options: list[PluginOption]) -> None:
        super().__init__()
        self.plugin = plugin
        self.options = options

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = f"{self.plugin} options"
            for option in self.options:
                need = "required" if option.required else "optional"
                yield Static(f"{option.title or option.key} ({option.type}, {need})", classes="option-label", markup=False)
                if option.description:
                    yield Static(option.description, markup=False)
                default = "" if option.default is None or option.sensitive else str(option.default)
                yield Input(value=default, password=option.sensitive, id=f"option-{option.key}")
            yield Static("enter: next / send · esc: cancel", id="options-keys", markup=False)

    def on_mount(self) -> None:
        self.query(Input).first().focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        fields = list(self.query(Input))
        index = fields.index(event.input)
        if index + 1 < len(fields):
            fields[index + 1].focus()
        else:
            self.action_send()

    def action_send(self) -> None:
        answers = {o.key: self.query_one(f"#option-{o.key}", Input).value for o in self.options}
        self.dismiss({key: value for key, value in answers.items() if value != ""})

    def action_cancel(self) -> None:
        self.dismiss(None)


def live_note(change: LiveChange | PluginsChanged, verb: str) -> str:
    """What of a plugin change applies now (``applied``: commands, skills, hooks, MCP and LSP
    servers, Roder extensions, ...), what waits for roder to start again (``next_start``: only a
    part no service of the session reloads) and what was refused (``not_loaded``).
    ``verb``: load, stop or change."""
    when = {"load": "in use", "stop": "gone", "change": "applied"}[verb] + " from the next message"
    note = f"{_listed(change.applied)} {when}" if change.applied else when
    if change.next_start:
        note += f"; its {' and '.join(change.next_start)} {'stop' if verb == 'stop' else 'load'} when roder starts next"
    return "; ".join([note, *change.not_loaded])


def _listed(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


#: What the /plugin screen's keys do, shown under the list.
PLUGIN_KEYS = (
    "type to search · enter preview · i install · v variant · e/d enable/disable · ctrl+o add what is typed as a marketplace"
)


class PluginScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("enter", "preview", "Preview", show=False),
        Binding("i", "install", "Install", show=False),
        Binding("y", "accept", "Accept", show=False),
        Binding("n", "refuse", "Refuse", show=False),
        Binding("v", "variant", "Variant", show=False),
        Binding("e", "enable", "Enable", show=False),
        Binding("d", "disable", "Disable", show=False),
        Binding("ctrl+o", "add_marketplace", "Add marketplace", show=False),
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
    PluginScreen #plugin-keys { dock: bottom; height: auto; color: $text-muted; }
    """

    def __init__(self, client: AppClient) -> None:
        super().__init__()
        self.client = client
        self.results: list[SearchResult] = []
        self.variant_index: dict[str, int] = {}
        self.preview: PreviewResult | None = None
        self.asking = False

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = "/plugin · esc to close"
            # The keys wrap in a line of their own: in the border title they were cut at every
            # width (ctrl+o, which adds a marketplace, never showed).
            yield Static(PLUGIN_KEYS, id="plugin-keys", markup=False)
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

    async def attempt(self, what: str, call: Any) -> Any:
        """Await a typed call; a failure is shown on the screen and never closes it."""
        try:
            return await call
        except Exception as exc:
            self.status(f"{what} failed: {exc}")
            return None

    async def search(self, query: str) -> None:
        data = await self.attempt("search", self.client.call(MARKETPLACES_SEARCH, SearchParams(query=query)))
        if data is None:
            return
        self.results = data.results
        options = self.query_one(OptionList)
        options.clear_options()
        for result in self.results:
            variants = result.variants
            installed = any(v.installed for v in variants)
            more = f"  ({len(variants)} variants)" if len(variants) > 1 else ""
            label = f"{'✓ ' if installed else '  '}{result.name}{more}  {' '.join(result.description.split())[:70]}"
            options.add_option(Option(Content(label), id=result.name))  # a catalog's text, never markup
        if self.results:
            options.highlighted = 0
            self.status(plural(len(self.results), "plugin"))
        else:
            self.status(
                "no plugins match (ctrl+o adds what you typed as a marketplace)"
                if query
                else "no marketplaces yet: type a folder, a git URL or owner/repo and press ctrl+o to add one"
            )

    def selected(self) -> PluginVariant | None:
        options = self.query_one(OptionList)
        if options.highlighted is None or not self.results:
            return None
        result = self.results[options.highlighted]
        return result.variants[self.variant_index.get(result.name, 0) % len(result.variants)]

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
        self.status(f"previewing {variant.id}…")
        data = await self.attempt("preview", self.client.call(PLUGINS_PREVIEW_INSTALL, PluginParams(plugin=variant.id)))
        if data is None:
            return
        self.preview = data
        self.query_one("#plugin-preview", Static).update(preview_text(data))
        self.query_one(OptionList).focus()
        self.status(f"{variant.id}: i installs" if not data.plugin.installed else f"{variant.id} is installed")

    async def action_variant(self) -> None:
        options = self.query_one(OptionList)
        if options.highlighted is None or not self.results:
            return
        name = self.results[options.highlighted].name
        self.variant_index[name] = self.variant_index.get(name, 0) + 1
        await self.action_preview()

    async def action_install(self) -> None:
        variant = self.selected()
        if variant is None:
            return
        if self.preview is None or self.preview.plugin.id != variant.id:
            await self.action_preview()
        if self.preview is None:
            return
        if self.preview.runs_code:
            self.asking = True
            self.status(f"{variant.id} runs the code listed below. Install it? y accepts, n refuses")
            return
        await self._ask_options(None)

    async def action_accept(self) -> None:
        if self.asking and self.preview is not None:
            self.asking = False
            await self._ask_options(self.preview.consent)

    def action_refuse(self) -> None:
        if self.asking:
            self.asking = False
            self.status("not installed")

    async def _ask_options(self, consent: str | None) -> None:
        """Ask for the plugin's options first when it declares any, then install."""
        assert self.preview is not None
        preview = self.preview
        if not preview.user_config:
            await self._install(consent, {})
            return

        async def answered(options: dict[str, str] | None) -> None:
            if options is None:
                self.status("not installed")
            else:
                await self._install(consent, options)

        self.app.push_screen(PluginOptionsScreen(preview.plugin.id, preview.user_config), answered)

    async def _install(self, consent: str | None, options: dict[str, str]) -> None:
        assert self.preview is not None
        identifier = self.preview.plugin.id
        self.status(f"installing {identifier}…")
        params = InstallParams(plugin=identifier, consent=consent, options=options)
        result = await self.attempt("install", self.client.call(PLUGINS_INSTALL, params))
        if result is not None:
            await self.refresh_results()
            version = result.installed.version
            shown = f" {version}" if version and version != "unknown" else ""
            self.status(f"installed {identifier}{shown}: {live_note(result, 'load')}")
            self.app.notify(f"installed {identifier}", title="/plugin")

    async def refresh_results(self) -> None:
        """Search again (installed marks change), keeping the highlighted plugin."""
        options = self.query_one(OptionList)
        name = self.results[options.highlighted].name if options.highlighted is not None and self.results else None
        await self.search(self.query_one(Input).value)
        names = [r.name for r in self.results]
        if name in names:
            options.highlighted = names.index(name)

    async def action_disable(self) -> None:
        variant = self.selected()
        if variant is None or not variant.installed:
            return
        result = await self.attempt("disable", self.client.call(PLUGINS_DISABLE, PluginParams(plugin=variant.id)))
        if result is not None:
            await self.refresh_results()
            self.status(f"disabled {variant.id}: {live_note(result, 'stop')}")

    async def action_enable(self) -> None:
        """Enable the highlighted installed variant, asking first for required options it lacks."""
        variant = self.selected()
        if variant is None or not variant.installed or variant.enabled:
            return
        read = await self.attempt("enable", self.client.call(PLUGINS_READ, PluginParams(plugin=variant.id)))
        if read is None:
            return
        if not read.plugin.missing_options:
            await self._enable(variant.id, {})
            return

        async def answered(options: dict[str, str] | None) -> None:
            if options is None:
                self.status("not enabled")
            else:
                await self._enable(variant.id, options)

        self.app.push_screen(PluginOptionsScreen(variant.id, read.plugin.missing_options), answered)

    async def _enable(self, identifier: str, options: dict[str, str]) -> None:
        params = PluginOptionsParams(plugin=identifier, options=options)
        result = await self.attempt("enable", self.client.call(PLUGINS_ENABLE, params))
        if result is not None:
            await self.refresh_results()
            switched = f"; disabled {', '.join(result.disabled_variants)}" if result.disabled_variants else ""
            self.status(f"enabled {identifier}: {live_note(result, 'load')}{switched}")

    async def action_add_marketplace(self) -> None:
        source = self.query_one(Input).value.strip()
        if not source:
            self.status("type a marketplace to add (a folder, a git URL, owner/repo or an https URL), then ctrl+o")
            return
        await self.add_marketplace(source)

    async def add_marketplace(self, source: str) -> None:
        """``marketplaces/add``, then list what it offers."""
        self.status(f"adding the marketplace {source}…")
        added = await self.attempt(
            "adding the marketplace", self.client.call(MARKETPLACES_ADD, MarketplaceAddParams(source=source))
        )
        if added is None:
            return
        with self.prevent(Input.Changed):  # the search below is the one the cleared field would start
            self.query_one(Input).value = ""
        await self.search("")
        self.status(f"added the marketplace {added.marketplace.name}: {plural(len(self.results), 'plugin')}")

    def action_close(self) -> None:
        self.dismiss(None)
