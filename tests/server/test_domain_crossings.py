"""Every domain class whose JSON crosses into the protocol, checked field by field in both
directions.

Domain classes write their JSON by hand (``to_json``, camelCase) and protocol models read it with
``extra="ignore"`` (peers and files from a newer Roder still load). ``from_domain`` refuses a key
the model would drop; this test adds the other direction and the coverage: each class is built
with every field set (so every conditional key is written), converted as its handler converts
it, and every field of the protocol model, at any depth, must have come from the domain. A key
renamed on either side, a field the domain stops writing, or a field the model adds that nobody
fills fails here, not in a client. A new class with ``to_json`` fails until it is listed below.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import pytest

from roder_core import ir
from roder_core.auth.logins import LoginStatus
from roder_core.customization.slash_commands import CommandInfo, CommandOutcome
from roder_core.customization.subagents import TraceRecord
from roder_core.ir import Turn, UserMessageItem
from roder_core.kernel.extension import ProcessState
from roder_core.kernel.services import MemoryRecord
from roder_core.kernel.tool_catalog import SourceStatus
from roder_core.plugins.claude_import import ImportItem, ImportPlan
from roder_core.plugins.layout import PluginLayout
from roder_core.plugins.options import OptionSpec
from roder_core.plugins.records import KnownMarketplace
from roder_core.plugins.service import PluginService
from roder_core.plugins.store import Preview, Variant
from roder_core.runtime.runner_snapshots import Snapshot
from roder_core.server.methods.auth import status_result
from roder_core.server.protocol import ExtensionProcessInfo, ProtocolModel, ToolSourceInfo, from_domain
from roder_core.server.protocol_auth import AuthStatusResult
from roder_core.server.protocol_features import CommandInfoModel, CommandsRunResult, MemoryModel, SubagentTrace
from roder_core.server.protocol_plugins import (
    ImportPreviewResult,
    InstalledPlugin,
    ListInstalledResult,
    MarketplaceInfo,
    MarketplacePluginResult,
    PluginOption,
    PluginVariant,
    PreviewComponents,
    PreviewResult,
    SearchResultList,
)
from roder_core.server.protocol_runners import SnapshotInfo
from roder_core.settings.paths import RoderPaths
from tests.plugins.support import marketplace, write, write_json

ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- samples


def sample(cls: type[Any], _stack: tuple[type[Any], ...] = (), **overrides: Any) -> Any:
    """An instance of dataclass ``cls`` with every field set to a value that is not its default
    (so a key written only when set is written), nested dataclasses built the same way."""
    hints = typing.get_type_hints(cls, localns=vars(ir))  # ``Turn`` may be imported for type checking only
    values = dict(overrides)
    for spec in dataclasses.fields(cls):
        if spec.init and spec.name not in values:
            values[spec.name] = _value(hints[spec.name], spec.name, (*_stack, cls))
    return cls(**values)


def _value(hint: Any, name: str, stack: tuple[type[Any], ...]) -> Any:
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        return _value(next(a for a in args if a is not type(None)), name, stack)
    if origin is Literal:
        return args[0]
    if origin is tuple and (len(args) != 2 or args[1] is not Ellipsis):
        return tuple(_value(arg, name, stack) for arg in args)
    if origin in (list, tuple, set, frozenset):
        if args and args[0] in stack:  # a tree (a preview's dependencies): one level is enough
            return origin()
        item = _value(args[0], name, stack)
        return origin([item]) if origin is not tuple else (item,)
    if origin is dict:
        return {f"{name}-key": _value(args[1], name, stack)}
    simple: dict[Any, Any] = {str: f"{name}-value", bool: True, int: 3, float: 1.5, Any: f"{name}-value"}
    if hint in simple:
        return simple[hint]
    if hint is Path:
        return Path(f"/sample/{name}")
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return next(iter(hint))
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return sample(hint, stack)
    raise TypeError(f"no sample value for {name}: {hint!r}; give the crossing a sample of its own")


#: Keys a domain writes only when they have a value (a row with none leaves the model's default):
#: the real rows below may leave these unset; the full samples above may not.
WRITTEN_WHEN_SET: dict[type[ProtocolModel], frozenset[str]] = {
    PluginOption: frozenset({"default", "min", "max"}),
    MarketplaceInfo: frozenset({"official", "catalog_only"}),
}


def unset(model: ProtocolModel, allowed: frozenset[str] = frozenset(), where: str = "", *, real: bool = False) -> list[str]:
    """Fields of ``model`` (at any depth, by path without list indexes) the data never set, but
    those ``allowed``; ``real``: also those its domain writes only when set."""
    optional = WRITTEN_WHEN_SET.get(type(model), frozenset()) if real else frozenset()
    found = [
        f"{where}{name}"
        for name in type(model).model_fields
        if name not in model.model_fields_set and f"{where}{name}" not in allowed and name not in optional
    ]
    for name in model.model_fields_set:
        value = getattr(model, name)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, ProtocolModel):
                found += unset(item, allowed, f"{where}{name}.", real=real)
    return sorted(set(found))


# --------------------------------------------------------------------------- the crossings


@dataclass(frozen=True)
class Crossing:
    """One domain class and the protocol model its JSON becomes, converted as the handler does."""

    model: type[ProtocolModel]
    make: Callable[[], Any]
    #: The conversion a handler uses (its ``to_json`` unless said otherwise).
    dump: Callable[[Any], Mapping[str, Any]] = lambda obj: obj.to_json()
    #: What the handler adds beside the domain's keys (the service's own fields of a row).
    added: Mapping[str, Any] = field(default_factory=dict)
    #: Top-level keys the handler leaves out on purpose (``from_domain(omit=)``).
    omit: frozenset[str] = frozenset()
    #: Model fields the domain leaves to their defaults on purpose (by path).
    defaulted: frozenset[str] = frozenset()


def _option(**overrides: Any) -> OptionSpec:
    # a sensitive option's default is never sent: the sample's option is not sensitive
    return sample(OptionSpec, sensitive=False, type="string", **overrides)


def _layout() -> PluginLayout:
    return sample(PluginLayout, user_config={"opt": _option(key="opt")})


def _preview() -> Preview:
    return sample(Preview, layout=_layout(), staged=None, dependencies=[sample(Preview, layout=None, staged=None)])


CROSSINGS: dict[type[Any], Crossing] = {
    Snapshot: Crossing(SnapshotInfo, lambda: sample(Snapshot)),
    MemoryRecord: Crossing(MemoryModel, lambda: sample(MemoryRecord, scope="project")),
    SourceStatus: Crossing(ToolSourceInfo, lambda: sample(SourceStatus, detail={"transport": "stdio"})),
    ProcessState: Crossing(ExtensionProcessInfo, lambda: sample(ProcessState)),
    CommandInfo: Crossing(CommandInfoModel, lambda: sample(CommandInfo, kind="custom")),
    LoginStatus: Crossing(AuthStatusResult, lambda: sample(LoginStatus), dump=lambda s: status_result(s).model_dump()),
    OptionSpec: Crossing(PluginOption, _option),
    PluginLayout: Crossing(PreviewComponents, _layout),
    Variant: Crossing(PluginVariant, lambda: sample(Variant)),
    Preview: Crossing(PreviewResult, _preview),
    CommandOutcome: Crossing(
        CommandsRunResult, lambda: sample(CommandOutcome, kind="action", turn=Turn(items=[UserMessageItem(text="hi")]))
    ),
    TraceRecord: Crossing(SubagentTrace, lambda: sample(TraceRecord)),
    ImportPlan: Crossing(ImportPreviewResult, lambda: sample(ImportPlan, plugins=[sample(ImportItem)])),
    # a marketplace row: the record's keys plus what the service reads from the catalog
    KnownMarketplace: Crossing(
        MarketplaceInfo,
        lambda: sample(KnownMarketplace),
        added={
            "name": "m",
            "description": "d",
            "owner": "o",
            "pluginCount": 2,
            "declaredBy": "user",
            "added": True,
            "problems": ["p"],
        },
    ),
}

#: Classes whose JSON crosses the protocol verbatim in a free-form field (``dict[str, Any]``:
#: nothing can be dropped) or never reaches a protocol model at all.
NOT_A_MODEL: dict[str, str] = {
    "RpcError": "the JSON-RPC error object itself, written by the dispatcher",
    "TokenSet": "stored in credentials.json; never sent to a client",
    "Question": "the ask_user tool's questions, carried verbatim in userInput/requested",
    "ExtensionRegistry": "extensions/list's seed-003 manifests, carried verbatim (snake_case by contract)",
    "ProvidedService": "inside a manifest, carried verbatim",
    "CapabilityRequest": "inside a manifest, carried verbatim",
    "CapabilityStatus": "inside extensions/list's capability statuses, carried verbatim",
    "ExtensionManifest": "carried verbatim in extensions/list",
    "IndexedEntryPoint": "the entry-point index cache file; never sent",
    "InstallRecord": "an installed_plugins.json entry (Claude Code's format); installed rows are PluginService's",
    "PluginSource": "a plugin's source, carried verbatim (its kind's own keys)",
}


@pytest.mark.parametrize("cls", list(CROSSINGS), ids=lambda c: c.__name__)
def test_every_field_crosses_in_both_directions(cls: type[Any]) -> None:
    crossing = CROSSINGS[cls]
    data = {**crossing.added, **crossing.dump(crossing.make())}
    model = from_domain(crossing.model, data, omit=crossing.omit)  # raises on a key the model would drop
    assert unset(model, crossing.defaulted) == [], f"{crossing.model.__name__} fields {cls.__name__} never wrote"


def test_a_dropped_or_renamed_field_fails() -> None:
    """The check itself: a domain key renamed, or one the domain stops writing, is caught."""
    snapshot = sample(Snapshot).to_json()
    renamed = {("created" if k == "createdAt" else k): v for k, v in snapshot.items()}
    with pytest.raises(Exception, match="created"):
        from_domain(SnapshotInfo, renamed)
    without_label = {k: v for k, v in snapshot.items() if k != "label"}
    assert unset(from_domain(SnapshotInfo, without_label)) == ["label"]
    nested = sample(Preview, layout=_layout(), staged=None, dependencies=[]).to_json()
    del nested["components"]["userConfig"][0]["description"]
    assert unset(from_domain(PreviewResult, nested)) == ["components.user_config.description"]


def _classes_with_to_json() -> set[str]:
    found = set()
    for folder in ("roder_core", "extensions"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef) and any(
                    isinstance(item, ast.FunctionDef) and item.name == "to_json" for item in node.body
                ):
                    found.add(node.name)
    return found


def test_every_class_that_writes_json_is_accounted_for() -> None:
    listed = {cls.__name__ for cls in CROSSINGS} | set(NOT_A_MODEL)
    missing = _classes_with_to_json() - listed
    assert not missing, f"list these in CROSSINGS (their protocol model) or NOT_A_MODEL (why none): {sorted(missing)}"
    gone = set(NOT_A_MODEL) - _classes_with_to_json()
    assert not gone, f"no longer write JSON; drop them from NOT_A_MODEL: {sorted(gone)}"


def _catalog(root: Path) -> Path:
    """A local marketplace with one plugin that has a command, an option and a dependency-free
    manifest: enough for every row the plugin service writes."""
    plugin = root / "tool"
    write_json(
        plugin / ".claude-plugin" / "plugin.json",
        {"name": "tool", "version": "1.0.0", "userConfig": {"REGION": {"type": "string", "title": "Region", "default": "eu"}}},
    )
    write(plugin / "commands" / "hello.md", "---\ndescription: say hello\n---\nSay hello.\n")
    entry = {"name": "tool", "source": "./tool", "version": "1.0.0", "description": "a tool", "category": "dev"}
    return marketplace(root, "local", [entry])


def test_the_plugin_services_rows_cross_whole(tmp_path: Path, workspace: Path) -> None:
    """The rows ``PluginService`` builds beside the records (marketplaces, catalog, previews,
    installed plugins) become their protocol models with no field dropped or left unwritten,
    but the keys a row writes only when set (named here)."""
    service = PluginService(RoderPaths.from_env(), workspace, False)
    added = service.add(str(_catalog(tmp_path / "catalog")))
    assert unset(from_domain(MarketplaceInfo, added), real=True) == []
    for row in service.list_marketplaces():
        assert unset(from_domain(MarketplaceInfo, row), real=True) == []
    found = from_domain(SearchResultList, service.search("tool"))
    assert unset(found, real=True) == [] and found.results
    assert unset(from_domain(MarketplacePluginResult, service.plugin("tool@local")), real=True) == []
    preview, shown = service.preview("tool@local")
    assert unset(from_domain(PreviewResult, shown), real=True) == []
    row = service.install("tool@local", preview.consent, preview)
    assert unset(from_domain(InstalledPlugin, row), real=True) == []
    listing = from_domain(ListInstalledResult, service.list_installed())
    assert unset(listing, real=True) == [] and listing.plugins[0].components.user_config[0].default == "eu"
