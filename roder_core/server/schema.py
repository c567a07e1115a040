"""JSON Schema of the protocol, generated from the pydantic models (``roder app-server --schema``).

Every method's params and result, every notification's params and the error codes, with shared
definitions under ``$defs``. docs/protocol.md is rendered from the same data (``docs.py``).
"""

from __future__ import annotations

import typing
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from roder_core import __version__
from roder_core.server.errors import ERROR_CODES
from roder_core.server.protocol import (
    METHODS,
    PROTOCOL_VERSION,
    SERVER_NOTIFICATIONS,
    MethodSpec,
)
from roder_core.threads.events import RuntimeEvent


def load_methods() -> dict[str, MethodSpec[Any, Any]]:
    """The full method table (importing every handler module registers its protocol models)."""
    from roder_core.server.dispatcher import load_method_modules

    load_method_modules()
    return dict(sorted(METHODS.items()))


def notification_models() -> dict[str, type[BaseModel]]:
    """Notification method -> model: runtime events plus the server's own notifications."""
    union = typing.get_args(RuntimeEvent)[0]
    # The server's own, by name: their registration order depends on which module was imported first.
    server = sorted(SERVER_NOTIFICATIONS, key=lambda model: str(model.model_fields["method"].default))
    models: list[type[BaseModel]] = [*typing.get_args(union), *server]
    return {model.model_fields["method"].default: model for model in models}


def protocol_schema() -> dict[str, Any]:
    methods = load_methods()
    notifications = notification_models()
    keyed: list[tuple[Any, Any]] = []
    for spec in methods.values():
        keyed += [((spec.name, "params"), spec.params), ((spec.name, "result"), spec.result)]
    keyed += [((name, "notification"), model) for name, model in notifications.items()]
    pairs: list[tuple[type[BaseModel], Literal["serialization"]]] = [(model, "serialization") for _key, model in keyed]
    refs, schema = models_json_schema(pairs, by_alias=True, ref_template="#/$defs/{model}")
    ref = {key: refs[(model, "serialization")] for key, model in keyed}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Roder app-server protocol",
        "version": PROTOCOL_VERSION,
        "serverVersion": __version__,
        "methods": {
            name: {"group": spec.group, "summary": spec.summary, "params": ref[(name, "params")], "result": ref[(name, "result")]}
            for name, spec in methods.items()
        },
        "notifications": {name: ref[(name, "notification")] for name in notifications},
        "errors": {str(code): meaning for code, meaning in ERROR_CODES.items()},
        "$defs": schema.get("$defs", {}),
    }
