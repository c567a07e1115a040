"""Every validation rule of seed 003, each with its own test and error message."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import Field

from roder_core import (
    EXTENSION_API_VERSION,
    CapabilityDenial,
    CapabilityGrant,
    CapabilityRequest,
    ExtensionManifest,
    ExtensionRegistryBuilder,
    ProvidedService,
    RegistryError,
    RoderExtension,
    Tool,
    ToolRegistry,
    ToolResult,
)
from roder_core.kernel.tool_args import NonBlank, ToolArguments, arguments_schema, build_pending_schemas


class EchoTool(Tool):
    name = "echo"
    description = "Echo the text back."
    parameters = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    read_only = True

    async def execute(self, ctx: Any, call: Any) -> ToolResult:
        return ToolResult(id=call.id, name=call.name, text=call.arguments["text"])


class Contributor:
    def __init__(self, ident: str, tools: list[Any]) -> None:
        self._id, self._tools = ident, tools

    def id(self) -> str:
        return self._id

    def contribute(self, registry: ToolRegistry) -> None:
        for tool in self._tools:
            registry.register(tool)


class Engine:
    def __init__(self, ident: str) -> None:
        self._id = ident

    def id(self) -> str:
        return self._id


class Ext(RoderExtension):
    """A configurable test extension: declares ``provides`` and installs ``installs``."""

    def __init__(
        self,
        ext_id: str = "ext-a",
        provides: list[ProvidedService] | None = None,
        installs: list[tuple[str, Any]] | None = None,
        caps: list[str] | None = None,
        api: str = EXTENSION_API_VERSION,
    ) -> None:
        self.ext_id = ext_id
        self.provides = provides if provides is not None else [ProvidedService.ToolProvider("echo-tools")]
        self.installs = installs if installs is not None else [("tool_contributor", Contributor("echo-tools", [EchoTool()]))]
        self.caps = caps or []
        self.api = api

    def manifest(self) -> ExtensionManifest:
        return ExtensionManifest(
            id=self.ext_id,
            name=self.ext_id.title(),
            version="0.1.0",
            api_version=self.api,
            description="test",
            provides=self.provides,
            required_capabilities=[CapabilityRequest(c) for c in self.caps],
        )

    def install(self, registry: ExtensionRegistryBuilder) -> None:
        for method, service in self.installs:
            getattr(registry, method)(service)


def test_manifest_matches_installed_tool_provider() -> None:
    builder = ExtensionRegistryBuilder()
    builder.install(Ext())
    registry = builder.build()
    assert ProvidedService("ToolProvider", "echo-tools") in registry.provided_services()
    tools = ToolRegistry()
    for contributor in registry.tools:
        contributor.contribute(tools)
    assert tools.get("echo") is not None


def test_rule1_empty_extension_id() -> None:
    with pytest.raises(RegistryError, match="must not be empty"):
        ExtensionRegistryBuilder().install(Ext(ext_id=""))


def test_rule1_duplicate_extension_id() -> None:
    builder = ExtensionRegistryBuilder()
    builder.install(Ext())
    with pytest.raises(RegistryError, match="already installed"):
        builder.install(Ext(provides=[ProvidedService.InferenceEngine("x")], installs=[("inference_engine", Engine("x"))]))


def test_rule2_api_version_out_of_range() -> None:
    with pytest.raises(RegistryError, match=r"targets API 0\.2\.0"):
        ExtensionRegistryBuilder().install(Ext(api="0.2.0"))


def test_rule3_same_service_declared_by_two_manifests() -> None:
    builder = ExtensionRegistryBuilder()
    builder.install(Ext())
    with pytest.raises(RegistryError, match="declared by both 'ext-a' and 'ext-b'"):
        builder.install(Ext(ext_id="ext-b"))


def test_rule4_declared_service_not_installed() -> None:
    ext = Ext(provides=[ProvidedService.ToolProvider("echo-tools"), ProvidedService.MemoryStore("mem")])
    with pytest.raises(RegistryError, match=r"declares MemoryStore\(mem\) but did not install it"):
        ExtensionRegistryBuilder().install(ext)


def test_rule4_installed_service_not_declared() -> None:
    ext = Ext(provides=[], installs=[("inference_engine", Engine("sneaky"))])
    with pytest.raises(RegistryError, match="does not declare"):
        ExtensionRegistryBuilder().install(ext)


def test_rule5_two_implementations_same_service_id() -> None:
    ext = Ext(
        provides=[ProvidedService.InferenceEngine("dup")],
        installs=[("inference_engine", Engine("dup")), ("inference_engine", Engine("dup"))],
    )
    with pytest.raises(RegistryError, match="two InferenceEngine implementations use the id 'dup'"):
        ExtensionRegistryBuilder().install(ext)


def test_rule6_duplicate_tool_names_across_contributors() -> None:
    builder = ExtensionRegistryBuilder()
    builder.install(Ext())
    builder.install(
        Ext(
            ext_id="ext-b",
            provides=[ProvidedService.ToolProvider("more")],
            installs=[("tool_contributor", Contributor("more", [EchoTool()]))],
        )
    )
    with pytest.raises(RegistryError, match="duplicate tool name 'echo'"):
        builder.build()


def test_rule6_invalid_tool_spec() -> None:
    class BadSchema(EchoTool):
        name = "bad"
        parameters = {"type": "array"}

    builder = ExtensionRegistryBuilder()
    builder.install(Ext(installs=[("tool_contributor", Contributor("echo-tools", [BadSchema()]))]))
    with pytest.raises(RegistryError, match="JSON schema of type object"):
        builder.build()


def test_rule6_invalid_tool_name() -> None:
    class BadName(EchoTool):
        name = "has space"

    builder = ExtensionRegistryBuilder()
    builder.install(Ext(installs=[("tool_contributor", Contributor("echo-tools", [BadName()]))]))
    with pytest.raises(RegistryError, match="invalid tool name"):
        builder.build()


def _fresh_arguments_model() -> type[ToolArguments]:
    """A model no other test built (schemas are cached per class)."""

    class FreshArguments(ToolArguments):
        path: NonBlank = Field(description="where")
        count: int = Field(1, ge=1, description="how many")

    return FreshArguments


def test_rule6_an_argument_model_schema_is_built_at_first_use_with_the_same_result() -> None:
    """Registration checks a model-derived tool's name and description without generating its
    schema (the runtime's start would otherwise build every tool's); the first spec, or
    ``build_pending_schemas``, builds it, and it is the schema an eager build gives."""
    model = _fresh_arguments_model()

    class ModelTool(EchoTool):
        name = "model_tool"
        arguments_model = model

    builder = ExtensionRegistryBuilder()
    builder.install(Ext(installs=[("tool_contributor", Contributor("echo-tools", [ModelTool()]))]))
    tools = builder.build().tool_registry()
    assert "model_tool" in tools and not model.__pydantic_complete__
    build_pending_schemas()
    assert model.__pydantic_complete__
    (spec,) = [s for s in tools.specs() if s.name == "model_tool"]
    assert spec.parameters == arguments_schema(model)
    assert spec.parameters["required"] == ["path"] and spec.parameters["properties"]["count"]["minimum"] == 1


def test_rule6_a_model_tool_is_still_checked_when_it_registers() -> None:
    """The deferred check keeps the name and description rules and the duplicate rule."""

    class Nameless(EchoTool):
        name = "model tool"
        arguments_model = _fresh_arguments_model()

    class Silent(EchoTool):
        name = "silent"
        description = "  "
        arguments_model = _fresh_arguments_model()

    class Twin(EchoTool):
        arguments_model = _fresh_arguments_model()

    for bad, message in (
        (Nameless(), "invalid tool name"),
        (Silent(), "has no description"),
        (Twin(), "duplicate tool name 'echo'"),
    ):
        builder = ExtensionRegistryBuilder()
        builder.install(Ext(installs=[("tool_contributor", Contributor("echo-tools", [EchoTool(), bad]))]))
        with pytest.raises(RegistryError, match=message):
            builder.build()


def test_rule6_a_tool_with_its_own_schema_is_checked_when_it_registers() -> None:
    """A tool that builds its own schema (here: not an object) is refused by the build, even
    when it also names an argument model."""

    class OwnSchema(EchoTool):
        name = "own"
        arguments_model = _fresh_arguments_model()

        def schema(self) -> dict[str, Any]:
            return {"type": "array"}

    builder = ExtensionRegistryBuilder()
    builder.install(Ext(installs=[("tool_contributor", Contributor("echo-tools", [OwnSchema()]))]))
    with pytest.raises(RegistryError, match="JSON schema of type object"):
        builder.build()


def test_rule7_denied_required_capability_fails_build() -> None:
    builder = ExtensionRegistryBuilder()
    builder.install(Ext(caps=["network.web"]))
    builder.deny_capability("ext-a", CapabilityDenial("network.web", "benchmark runs must be offline"))
    with pytest.raises(RegistryError, match="benchmark runs must be offline"):
        builder.build()


def test_capability_statuses_and_json_shape() -> None:
    builder = ExtensionRegistryBuilder()
    builder.install(Ext(caps=["fs.read.workspace", "process.spawn.shell"]))
    builder.grant_capability("ext-a", CapabilityGrant("fs.read.workspace"))
    registry = builder.build()
    data = registry.to_json()
    assert data["extensions"][0]["provides"] == [{"ToolProvider": "echo-tools"}]
    assert data["extensions"][0]["required_capabilities"] == [{"id": "fs.read.workspace"}, {"id": "process.spawn.shell"}]
    assert data["capability_statuses"]["ext-a"] == [
        {"id": "fs.read.workspace", "decision": "granted"},
        {"id": "process.spawn.shell", "decision": "requested"},
    ]
    assert registry.granted_capabilities("ext-a") == frozenset({"fs.read.workspace"})


def test_registry_is_immutable() -> None:
    builder = ExtensionRegistryBuilder()
    builder.install(Ext())
    registry = builder.build()
    with pytest.raises(AttributeError):
        registry.extra = 1  # type: ignore[attr-defined]


def test_failed_install_leaves_no_half_registered_services() -> None:
    class Exploding(Ext):
        def install(self, registry: ExtensionRegistryBuilder) -> None:
            registry.tool_contributor(Contributor("echo-tools", [EchoTool()]))
            raise RuntimeError("boom")

    builder = ExtensionRegistryBuilder()
    with pytest.raises(RegistryError, match="failed to install: boom"):
        builder.install(Exploding())
    builder.install(Ext())  # the same service id is free again
    assert [m.id for m in builder.build().manifests] == ["ext-a"]


def test_provided_service_constructors_cover_every_category() -> None:
    from roder_core.kernel.extension import SERVICE_KINDS

    for kind in SERVICE_KINDS:
        service = getattr(ProvidedService, kind)("x")
        assert service == ProvidedService(kind, "x")
        assert service.to_json() == {kind: "x"}
    with pytest.raises(ValueError, match="unknown service kind"):
        ProvidedService("Nope", "x")
