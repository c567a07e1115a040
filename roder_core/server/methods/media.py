"""media/list, media/read, media/thumbnail, media/delete and media/attachToTurn.

Each method names a thread (an open or stored one; a unique id prefix works) and works on that
thread's media store (``roder_core.media.library``). Bad ids, items that are not images and
oversized reads are invalid params, with the reason in the message.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from pathlib import Path

from roder_core.ir import MediaArtifact
from roder_core.media.images import MediaError
from roder_core.server.dispatcher import CallContext, Dispatcher, handles
from roder_core.server.errors import InvalidParams
from roder_core.server.methods.core import absolute_path, open_thread
from roder_core.server.protocol import InputItem
from roder_core.server.protocol_media import (
    MEDIA_ATTACH_TO_TURN,
    MEDIA_DELETE,
    MEDIA_LIST,
    MEDIA_READ,
    MEDIA_THUMBNAIL,
    MediaAttachParams,
    MediaAttachResult,
    MediaDeleteResult,
    MediaIdParams,
    MediaListParams,
    MediaListResult,
    MediaReadParams,
    MediaReadResult,
    MediaThumbnailParams,
    MediaThumbnailResult,
)
from roder_core.threads.events import MediaAdded, MediaDeleted


async def _thread_id(app: Dispatcher, thread_id: str) -> str:
    return await app.runtime.find_thread(thread_id)


def _record(app: Dispatcher, thread_id: str, media_id: str) -> MediaArtifact:
    try:
        return app.runtime.media.get(thread_id, media_id)
    except MediaError as exc:
        raise InvalidParams(str(exc)) from None


@handles(MEDIA_LIST)
async def media_list(app: Dispatcher, params: MediaListParams, ctx: CallContext) -> MediaListResult:
    thread_id = await _thread_id(app, params.thread_id)
    return MediaListResult(media=app.runtime.media.list_media(thread_id, params.kind))


@handles(MEDIA_READ)
async def media_read(app: Dispatcher, params: MediaReadParams, ctx: CallContext) -> MediaReadResult:
    thread_id = await _thread_id(app, params.thread_id)
    record = _record(app, thread_id, params.media_id)
    if record.size > params.max_bytes:
        raise InvalidParams(f"media item {record.id} is {record.size} bytes, more than maxBytes ({params.max_bytes})")
    try:
        data = await asyncio.to_thread(app.runtime.media.read, thread_id, record.id)
    except MediaError as exc:
        raise InvalidParams(str(exc)) from None
    return MediaReadResult(media=record, data_base64=base64.b64encode(data).decode("ascii"))


@handles(MEDIA_THUMBNAIL)
async def media_thumbnail(app: Dispatcher, params: MediaThumbnailParams, ctx: CallContext) -> MediaThumbnailResult:
    thread_id = await _thread_id(app, params.thread_id)
    record = _record(app, thread_id, params.media_id)
    try:
        data, width, height = await asyncio.to_thread(app.runtime.media.thumbnail, thread_id, record.id, params.size)
    except MediaError as exc:
        raise InvalidParams(str(exc)) from None
    return MediaThumbnailResult(media=record, width=width, height=height, data_base64=base64.b64encode(data).decode("ascii"))


@handles(MEDIA_DELETE)
async def media_delete(app: Dispatcher, params: MediaIdParams, ctx: CallContext) -> MediaDeleteResult:
    thread_id = await _thread_id(app, params.thread_id)
    try:
        deleted = app.runtime.media.delete(thread_id, params.media_id)
    except MediaError as exc:
        raise InvalidParams(str(exc)) from None
    if deleted:
        app.runtime.bus.publish(MediaDeleted(thread_id=thread_id, media_id=params.media_id))
    return MediaDeleteResult(deleted=deleted)


def _attach_bytes(app: Dispatcher, params: MediaAttachParams, cwd: str) -> tuple[bytes, str]:
    """The bytes to attach and their name, from exactly one of mediaId, path and dataBase64."""
    given = [name for name in ("media_id", "path", "data_base64") if getattr(params, name) is not None]
    if len(given) != 1:
        raise InvalidParams("media/attachToTurn takes exactly one of mediaId, path and dataBase64")
    if params.path is not None:
        path = absolute_path(params.path)
        return app.brokers(Path(cwd)).fs.read_bytes(str(path)), params.name or path.name
    if params.data_base64 is not None:
        try:
            return base64.b64decode(params.data_base64, validate=True), params.name or "image"
        except (binascii.Error, ValueError):
            raise InvalidParams("dataBase64 is not valid base64") from None
    raise AssertionError("mediaId is handled by the caller")


@handles(MEDIA_ATTACH_TO_TURN)
async def media_attach(app: Dispatcher, params: MediaAttachParams, ctx: CallContext) -> MediaAttachResult:
    runtime = app.runtime
    thread = await open_thread(app, params.thread_id)
    try:
        if params.media_id is not None and params.from_thread_id is None:
            if _record(app, thread.id, params.media_id).kind != "image":
                raise InvalidParams(f"media item {params.media_id} is not an image; only images can be attached to a turn")
            record = runtime.media.set_pending(thread.id, params.media_id, True)
        else:
            if params.media_id is not None:  # from another thread: copied into this one
                source_thread = await _thread_id(app, params.from_thread_id or "")
                original = _record(app, source_thread, params.media_id)
                data = await asyncio.to_thread(runtime.media.read, source_thread, original.id)
                name = params.name or original.name
            else:
                data, name = _attach_bytes(app, params, thread.cwd)
            # No type given: the bytes must be an image (anything else is refused, with the reason).
            record = await asyncio.to_thread(runtime.media.add, thread.id, data, name=name, source=params.source, pending=True)
            runtime.bus.publish(MediaAdded(thread_id=thread.id, media=record))
    except MediaError as exc:
        raise InvalidParams(str(exc)) from None
    warnings: list[str] = []
    profile = runtime.model_profile(thread.provider, thread.model)
    if record.kind == "image" and not profile.images:
        warnings.append(
            f"model {profile.id} does not accept images: turn/start will refuse this item until a vision model is chosen"
        )
    item = InputItem(type="image", name=record.name, media_id=record.id)
    return MediaAttachResult(media=record, input=item, warnings=warnings)
