"""thread/find, thread/export, thread/delete and thread/custom/set: stored threads beyond seed 004's
start/list/read, for ``roder sessions``, ``roder replay`` and any other client."""

from __future__ import annotations

import json

from roder_core.ir import Thread
from roder_core.kernel.services import ThreadStore
from roder_core.server.dispatcher import CallContext, Dispatcher, handles
from roder_core.server.errors import InvalidParams
from roder_core.server.protocol import Ok
from roder_core.server.protocol_sessions import (
    THREAD_CUSTOM_SET,
    THREAD_DELETE,
    THREAD_EXPORT,
    THREAD_FIND,
    ThreadCustomSetParams,
    ThreadDeleteResult,
    ThreadExportParams,
    ThreadExportResult,
    ThreadFindParams,
    ThreadFindResult,
    ThreadIdParams,
)


def _store(app: Dispatcher) -> ThreadStore:
    store = app.runtime.store
    if store is None:
        raise InvalidParams("no thread store is installed")
    return store


@handles(THREAD_FIND)
async def thread_find(app: Dispatcher, params: ThreadFindParams, ctx: CallContext) -> ThreadFindResult:
    return ThreadFindResult(thread_id=await app.runtime.find_thread(params.query))


async def _stored(app: Dispatcher, thread_id: str) -> Thread:
    """The thread as stored (an open thread's events are already persisted)."""
    return await _store(app).load(thread_id)


@handles(THREAD_EXPORT)
async def thread_export(app: Dispatcher, params: ThreadExportParams, ctx: CallContext) -> ThreadExportResult:
    thread = await _stored(app, params.thread_id)
    if params.format == "markdown":
        from roder_core.threads.transcript import render_markdown

        text = render_markdown(thread)
    else:
        events = await _store(app).events(thread.id)
        if params.format == "atif":
            from roder_core.threads.atif import build_atif

            document = build_atif(thread, events)
        else:
            from roder_core.threads.trajectory import build_trajectory

            document = build_trajectory(thread, events)
        text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    return ThreadExportResult(thread_id=thread.id, format=params.format, text=text)


@handles(THREAD_DELETE)
async def thread_delete(app: Dispatcher, params: ThreadIdParams, ctx: CallContext) -> ThreadDeleteResult:
    _store(app)
    thread_id = await app.runtime.find_thread(params.thread_id)
    await app.runtime.delete_thread(thread_id)
    return ThreadDeleteResult(thread_id=thread_id)


@handles(THREAD_CUSTOM_SET)
async def thread_custom_set(app: Dispatcher, params: ThreadCustomSetParams, ctx: CallContext) -> Ok:
    await app.runtime.resume_thread(params.thread_id)
    await app.runtime.save_custom(params.thread_id, params.namespace, params.data, params.version)
    return Ok()
