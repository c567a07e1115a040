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

import contextlib
import functools
import json
import re
import threading
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, ClassVar, Protocol, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, ValidationError, model_validator


class Call(Protocol):
    """A tool call as argument parsing sees it (``kernel.tools.ToolCall`` is one)."""

    name: str
    arguments: dict[str, Any]


class ToolArgumentError(ValueError):
    """Arguments that do not fit a tool's model; the message says what to send instead."""


class ToolArguments(BaseModel):
    """Base of every tool's argument model.

    Unknown arguments are ignored (the schema already tells the model not to send any), so a
    stray extra key never fails a call that is otherwise right; the result names them
    (``kernel.tools.with_ignored_note``). A model is built at its first
    use (its schema for a request, or a call to check): tools a run never offers nor calls
    (team tools outside a team, ``lsp`` before a server runs) cost only their class."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    #: Other agents' names for this tool's arguments, read as the field they name when that
    #: field was not sent too (``cwd`` for ``workdir``, ``input`` for ``patch``): a name with one
    #: meaning, which the model learned from another tool's schema.
    habit_names: ClassVar[Mapping[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _forgive_shapes(cls, data: Any) -> Any:
        """Read the shapes models send for what the schema asks, where only one reading exists
        (``forgiven_shapes``); pydantic's lax mode already takes ``"10"`` and ``"true"``."""
        return forgiven_shapes(cls, data)


def _allows(annotation: Any, kinds: tuple[type, ...]) -> bool:
    """Whether a field's type (through ``Annotated``, unions and generics) takes one of ``kinds``."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _allows(typing.get_args(annotation)[0], kinds)
    if origin in (typing.Union, types.UnionType):
        return any(_allows(arg, kinds) for arg in typing.get_args(annotation))
    if annotation is Any:
        return True
    plain = origin or annotation
    return isinstance(plain, type) and issubclass(plain, kinds)


_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")


def _field_named(model: type[BaseModel], key: str, given: Mapping[str, Any]) -> str | None:
    """The field an unknown key stands for: its camelCase spelling (``oldString``,
    ``replaceAll``), ``file_path``/``filePath`` for ``path``, ``old_str`` for ``old_string`` (the
    names of Anthropic's text editor tool), or one of the model's ``habit_names``; None when it
    is none of them, or when that field was sent as well (then the key is an extra and is ignored)."""
    fields = model.model_fields
    snake = _CAMEL.sub(r"_\1", key).lower()
    name = "path" if snake in ("file_path", "filepath") else snake
    if name not in fields:
        habits: Mapping[str, str] = getattr(model, "habit_names", {})
        name = habits.get(key) or habits.get(name) or (name + "ing" if name.endswith("_str") else name)
    return name if name in fields and name not in given else None


def forgiven_shapes(model: type[BaseModel], data: Any) -> Any:
    """``data`` with the unambiguous habits of real models read as meant:

    - ``null`` for an optional argument whose type has no null: the default applies;
    - a list or object argument sent as a JSON string (``"[{...}]"``);
    - a field spelled in camelCase, ``file_path`` for ``path``, or another agent's name for it
      (``_field_named``).

    Anything else is left for validation, which names the argument."""
    if not isinstance(data, dict):
        return data
    fields = model.model_fields
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = key if key in fields else (_field_named(model, key, data) or key)
        field = fields.get(name)
        if field is None:
            out[key] = value
            continue
        if value is None and not field.is_required() and not _allows(field.annotation, (type(None),)):
            continue
        container = _allows(field.annotation, (list, dict, BaseModel)) and not _allows(field.annotation, (str,))
        if isinstance(value, str) and container:
            with contextlib.suppress(ValueError):
                decoded = json.loads(value)
                if isinstance(decoded, (list, dict)):
                    value = decoded
        out[name] = value
    return out


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


#: A string argument that must hold something other than whitespace (paths, patterns, commands).
NonBlank = Annotated[str, AfterValidator(_not_blank)]

_QUOTES = ('"', "'", "`")
#: ``C:\\x`` or ``D:/x``: a Windows drive, which no path on this system starts with.
_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")
#: ``$HOME`` or ``${HOME}`` as the whole first part of a path: the same folder as ``~``.
_HOME_VARIABLE = re.compile(r"^\$(?:HOME|\{HOME\})(?=/|$)")
#: A backslash that escapes a character for the shell (``my\\ file.py``): the character is meant.
_SHELL_ESCAPE = re.compile(r"\\(?=[ ()\[\]&;'\"])")


def path_as_meant(value: str) -> str:
    """A path as a model means it, in the one form every tool and policy read:

    - without the spaces around it, and without the quotes around the whole of it (``"a.py"``,
      ``'src/x y.py'``, a trailing space or line break after a copied path);
    - a ``file://`` URL as its path (``file:///w/a.py``, ``file:a.py``, percent-escapes read);
    - ``$HOME/x`` and ``${HOME}/x`` as ``~/x`` (the file tools read ``~`` as the home folder);
    - Windows separators as ``/`` (``src\\a.py``), and a shell's ``\\ `` as the space it escapes.

    No file a model means is named with those, and ``write`` would otherwise create one
    (``sub\\new.py`` as one odd name, ``file:`` as a folder). A Windows drive (``C:\\x``) and a
    file URL of another host have no reading here: ``ValueError`` says so. Every rule is applied
    until nothing changes, so the result is a fixed point: the tool parses the checked arguments
    again and must read the very path policy judged (``"'.env'"`` is ``.env`` for both)."""
    while True:
        before = value
        value = value.strip()
        while len(value) >= 2 and value[0] == value[-1] and value[0] in _QUOTES:
            value = value[1:-1].strip()
        if value.lower().startswith("file:"):
            value = _file_url_path(value)
        value = _HOME_VARIABLE.sub("~", value)
        if _DRIVE.match(value):
            raise ValueError(
                "is a Windows drive path, which no file here has; send the path relative to the workspace (or absolute, with /)"
            )
        value = _SHELL_ESCAPE.sub("", value).replace("\\", "/")
        if value == before:
            return value


def _file_url_path(url: str) -> str:
    """``file:///w/a.py`` (or ``file://localhost/w/a.py``) as ``/w/a.py``, ``file:a.py`` as ``a.py``;
    a URL of another host (``file://server/share/a.py``) has no reading here: ``ValueError``."""
    from urllib.parse import unquote

    rest = url[len("file:") :]
    if rest.startswith("//"):
        host, _, path = rest[2:].partition("/")
        if host not in ("", "localhost"):
            raise ValueError(
                f"is a file URL on another host ({host}), which no file here has; "
                "send the path relative to the workspace (or absolute, with /)"
            )
        rest = "/" + path
    return unquote(rest)


def _unquoted(value: Any) -> Any:
    """A path argument as meant (``path_as_meant``); anything not a string is left to validation."""
    return path_as_meant(value) if isinstance(value, str) else value


#: An optional file or folder path argument, read as meant (see ``_unquoted``).
PathText = Annotated[str, BeforeValidator(_unquoted)]
#: A file or folder path argument (see ``_unquoted``); it must not be blank.
PathArgument = Annotated[PathText, AfterValidator(_not_blank)]

_DURATION = re.compile(
    r"(?P<number>\d+(?:\.\d+)?|\.\d+)\s*(?P<unit>ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hours?)?"
)
_UNIT_SECONDS = {"ms": 0.001, "m": 60.0, "h": 3600.0}


def _seconds(value: Any) -> Any:
    """A duration with its unit written out (``"30s"``, ``"2m"``, ``"1.5 h"``, ``"500ms"``) as
    seconds; anything else is left to the number check, which names the argument."""
    if not isinstance(value, str):
        return value
    match = _DURATION.fullmatch(value.strip().lower())
    if match is None:
        return value
    unit = match["unit"] or "s"
    scale = _UNIT_SECONDS["ms"] if unit.startswith("ms") or unit.startswith("milli") else _UNIT_SECONDS.get(unit[0], 1.0)
    return float(match["number"]) * scale


#: A duration in seconds: a number, or a string with a unit (``"30s"``, ``"2m"``, ``"500ms"``).
Seconds = Annotated[float, BeforeValidator(_seconds)]

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
        raise ToolArgumentError(describe_problems(call.name, exc) + _unknown_note(model, call)) from None


def _unknown_note(model: type[ToolArguments], call: Call) -> str:
    """``; unknown argument 'edits': edit takes path, ...``: a call refused for a missing
    argument often sent it under a name of its own, which the model must learn to change."""
    forgiven = forgiven_shapes(model, call.arguments)
    unknown = [key for key in forgiven if key not in model.model_fields] if isinstance(forgiven, dict) else []
    if not unknown:
        return ""
    plural = "s" if len(unknown) > 1 else ""
    return f"; unknown argument{plural} {', '.join(map(repr, unknown))}: {call.name} takes {', '.join(model.model_fields)}"


def checked_arguments(model: type[ToolArguments], call: Call) -> dict[str, Any]:
    """The call's arguments as the tool will read them (``ToolArgumentError`` when they do not
    fit): the forgiven shapes and each given field's checked value (a path unquoted, ``"30s"``
    as 30.0), unknown keys kept. The turn puts these in the call before the policy check, so
    policy, approval and the tool all judge the same path and values."""
    parsed = parse_arguments(model, call)
    forgiven = forgiven_shapes(model, call.arguments)
    extra = {key: value for key, value in forgiven.items() if key not in model.model_fields} if isinstance(forgiven, dict) else {}
    return {**extra, **parsed.model_dump(exclude_unset=True)}


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
