"""Tool arguments as pydantic models: one class gives the JSON schema and the checked values.

A tool declares its arguments once::

    class ReadArguments(ToolArguments):
        path: NonBlank = Field(description="file to read")
        offset: int = Field(1, ge=1, description="first line to return (1-based)")

    class ReadTool(Tool):
        arguments_model = ReadArguments    # the schema providers see comes from this
        async def execute(self, ctx, call):
            args = parse_arguments(ReadArguments, call)   # raises ToolArgumentError

``arguments_schema`` turns the model into the plain JSON schema every provider accepts (no
``$ref``/``$defs``, titles, defaults or ``null`` branches; ``additionalProperties: false`` on
every object). Arguments that do not fit the model never reach the tool: the turn answers the
call with an error result naming each wrong field, which the model can correct and retry.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Protocol, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError


class Call(Protocol):
    """A tool call as argument parsing sees it (``kernel.tools.ToolCall`` is one)."""

    name: str
    arguments: dict[str, Any]


class ToolArgumentError(ValueError):
    """Arguments that do not fit a tool's model; the message says what to send instead."""


class ToolArguments(BaseModel):
    """Base of every tool's argument model.

    Unknown arguments are ignored (the schema already tells the model not to send any), so a
    stray extra key never fails a call that is otherwise right. A model is built at its first
    use (its schema for a request, or a call to check): tools a run never offers nor calls
    (team tools outside a team, ``lsp`` before a server runs) cost only their class."""

    model_config = ConfigDict(extra="ignore", defer_build=True)


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


#: A string argument that must hold something other than whitespace (paths, patterns, commands).
NonBlank = Annotated[str, AfterValidator(_not_blank)]

ArgumentsT = TypeVar("ArgumentsT", bound=ToolArguments)

#: Schema keys providers do not need (or, for some, refuse): titles and defaults.
_DROPPED_KEYS = frozenset({"title", "default"})


def arguments_schema(model: type[ToolArguments], *, choices: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
    """The JSON schema of ``model`` as providers accept it; ``choices`` adds an ``enum`` to a
    string field whose allowed values are known only at run time (installed skills, agents)."""
    schema: dict[str, Any] = _copy_json(_schema_of(model))
    for name, values in (choices or {}).items():
        schema["properties"][name]["enum"] = list(values)
    return schema


def _copy_json(node: Any) -> Any:
    """A deep copy of JSON data (dicts, lists, scalars): about four times faster than
    ``copy.deepcopy``, and every tool's schema is copied for every model call."""
    if isinstance(node, dict):
        return {key: _copy_json(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_copy_json(item) for item in node]
    return node


#: Argument models of registered tools whose schema nobody asked for yet (``defer_schema``).
_pending: dict[type[ToolArguments], None] = {}
#: Building a model is not safe from two threads at once: the app builds the pending schemas on
#: a worker thread while its event loop may already ask for one (``build_pending_schemas``).
_building = threading.Lock()


def _schema_of(model: type[ToolArguments]) -> dict[str, Any]:
    """Built once per model: every turn asks every tool for its spec."""
    with _building:
        return _built_schema(model)


@functools.cache
def _built_schema(model: type[ToolArguments]) -> dict[str, Any]:
    _pending.pop(model, None)
    raw = model.model_json_schema(mode="validation")
    cleaned: dict[str, Any] = _clean(raw, raw.get("$defs", {}))
    return cleaned


def defer_schema(model: type[ToolArguments]) -> None:
    """Note a registered tool's model whose schema is built at its first use, so that
    ``build_pending_schemas`` can build it ahead of that use."""
    _pending[model] = None


def build_pending_schemas() -> None:
    """Build the schemas of registered tools nobody asked for yet: the app does this on a
    thread once its runtime is idle, a ``roder serve`` host before it says it is ready, so the
    first request's tool list does not wait for them."""
    for model in list(_pending):
        _schema_of(model)


def _clean(node: Any, defs: Mapping[str, Any]) -> Any:
    if isinstance(node, list):
        return [_clean(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return _clean(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
    branches = node.get("anyOf")
    if isinstance(branches, list):
        # ``X | None = None``: the argument is optional; providers get X alone.
        kept = [branch for branch in branches if branch != {"type": "null"}]
        if len(kept) == 1:
            merged = {**{k: v for k, v in node.items() if k != "anyOf"}, **kept[0]}
            return _clean(merged, defs)
    cleaned = {key: _clean(value, defs) for key, value in node.items() if key not in _DROPPED_KEYS and key != "$defs"}
    if cleaned.get("type") == "object":
        cleaned.setdefault("properties", {})
        cleaned["additionalProperties"] = False
    if "properties" in node:
        # Property names are data, not schema keywords: a field named "title" is kept.
        cleaned["properties"] = {name: _clean(value, defs) for name, value in node["properties"].items()}
    return cleaned


def parse_arguments(model: type[ArgumentsT], call: Call) -> ArgumentsT:
    """The call's arguments as ``model``; raises ``ToolArgumentError`` naming every wrong field."""
    try:
        return model.model_validate(call.arguments)
    except ValidationError as exc:
        raise ToolArgumentError(describe_problems(call.name, exc)) from None


def describe_problems(tool: str, exc: ValidationError) -> str:
    """``invalid arguments for read: offset must be greater than or equal to 1 (got 0); ...``"""
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "arguments"
        if error["type"] == "missing":
            problems.append(f"missing required argument {where!r}")
            continue
        message = error["msg"].removeprefix("Value error, ")
        message = message[0].lower() + message[1:] if message else message
        shown = repr(error.get("input"))
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        problems.append(f"{where}: {message} (got {shown})")
    return f"invalid arguments for {tool}: " + "; ".join(problems)
