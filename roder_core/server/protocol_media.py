"""Protocol models of the media methods (seed 004): the images and other binary items a thread
stores (attached by the user, or returned by tools), their bytes and previews, and attaching
one to the thread's next turn. Notifications: ``media/artifactAdded`` and
``media/artifactDeleted`` (runtime events of ``roder_core.threads.events``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from roder_core.ir import MediaArtifact, empty_list
from roder_core.server.protocol import InputItem, MethodSpec, ProtocolModel, register

#: Default and largest byte count media/read returns in one answer.
DEFAULT_READ_BYTES = 10 * 1024 * 1024


class MediaListParams(ProtocolModel):
    thread_id: str
    kind: Literal["image", "audio", "video", "file"] | None = None


class MediaListResult(ProtocolModel):
    media: list[MediaArtifact]


class MediaIdParams(ProtocolModel):
    thread_id: str
    media_id: str


class MediaReadParams(MediaIdParams):
    #: Refuse (rather than send) an item larger than this.
    max_bytes: int = Field(default=DEFAULT_READ_BYTES, ge=1, le=64 * 1024 * 1024)


class MediaReadResult(ProtocolModel):
    media: MediaArtifact
    data_base64: str


class MediaThumbnailParams(MediaIdParams):
    #: Longest edge of the preview in pixels (never enlarged).
    size: int = Field(default=256, ge=16, le=1024)


class MediaThumbnailResult(ProtocolModel):
    media: MediaArtifact
    mime_type: Literal["image/png"] = "image/png"
    width: int
    height: int
    data_base64: str


class MediaDeleteResult(ProtocolModel):
    deleted: bool


class MediaAttachParams(ProtocolModel):
    """One source: ``mediaId`` (of this thread, or of ``fromThreadId``), an absolute ``path``
    (read through the workspace's file broker, so its policy applies) or ``dataBase64``. The bytes
    must be an image (PNG, JPEG, GIF, WebP, or any format Pillow reads, converted to PNG)."""

    thread_id: str
    media_id: str | None = None
    from_thread_id: str | None = None
    path: str | None = None
    data_base64: str | None = None
    name: str | None = None
    #: Where the bytes came from, for media/list ("user", "clipboard", ...).
    source: Literal["user", "clipboard", "paste"] = "user"


class MediaAttachResult(ProtocolModel):
    media: MediaArtifact
    #: The same item as turn input; turn/start also takes pending items without it.
    input: InputItem
    warnings: list[str] = Field(default_factory=empty_list)


MEDIA_LIST = MethodSpec(
    "media/list",
    "media",
    MediaListParams,
    MediaListResult,
    "Media items a thread stores (images attached or returned by tools), oldest first, optionally of one kind.",
)
MEDIA_READ = MethodSpec(
    "media/read",
    "media",
    MediaReadParams,
    MediaReadResult,
    "One media item with its bytes as base64 (refused when larger than maxBytes).",
)
MEDIA_THUMBNAIL = MethodSpec(
    "media/thumbnail",
    "media",
    MediaThumbnailParams,
    MediaThumbnailResult,
    "A PNG preview of an image item, at most `size` pixels on its longer edge.",
)
MEDIA_DELETE = MethodSpec(
    "media/delete",
    "media",
    MediaIdParams,
    MediaDeleteResult,
    "Delete a media item's bytes; messages keep its card and the model is told it was deleted.",
)
MEDIA_ATTACH_TO_TURN = MethodSpec(
    "media/attachToTurn",
    "media",
    MediaAttachParams,
    MediaAttachResult,
    "Store an image (media id, path or base64) for the thread and attach it to the thread's next turn/start.",
)
register(MEDIA_LIST)
register(MEDIA_READ)
register(MEDIA_THUMBNAIL)
register(MEDIA_DELETE)
register(MEDIA_ATTACH_TO_TURN)
