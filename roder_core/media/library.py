"""The media store: each thread's images (and other binary attachments), content-addressed.

Layout under the data dir (``RoderPaths.media_dir``)::

    media/<thread id>/<sha256>.<ext>       the bytes, named by their SHA-256 (stored once)
    media/<thread id>/index.json           one record per item: name, type, size, dimensions,
                                           source, created, pending
    media/<thread id>/thumbs/<sha256>-<side>.png   previews made on demand

The thread's JSONL holds only references (``Attachment.media_id``), so a resumed thread finds
its pictures here and a fork gets its own copy of the folder (hard links where possible) that
outlives the parent. Folders and files are private to the user (they may hold screenshots of
anything). Writes happen under one lock because tool results of one response are stored in
parallel worker threads; only the process that owns a thread writes its folder.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import os
import re
import shutil
import threading
from collections import OrderedDict
from pathlib import Path

from roder_core.brokers.data_paths import child
from roder_core.ir import Attachment, MediaArtifact, MediaKind, ModelProfile
from roder_core.media.images import EXTENSIONS, THUMBNAIL_SIDE, MediaError, prepare, thumbnail

_MEDIA_ID = re.compile(r"^[0-9a-f]{64}$")
_THREAD_ID = re.compile(r"^[A-Za-z0-9_.-]{1,200}$")
#: Decoded images kept in memory for the next model calls (every call resends the history).
CACHE_BYTES = 64 * 1024 * 1024
#: Largest non-image binary attachment stored (audio from an MCP tool, say).
MAX_OTHER_BYTES = 25 * 1024 * 1024


def media_kind(mime: str) -> MediaKind:
    major = mime.split("/", 1)[0]
    return major if major in ("image", "audio", "video") else "file"  # type: ignore[return-value]


def check_media_id(media_id: str) -> str:
    if not _MEDIA_ID.match(media_id):
        raise MediaError(f"{media_id!r} is not a media id (64 lowercase hex digits, the item's SHA-256)")
    return media_id


def require_vision(model: ModelProfile, attachments: list[Attachment]) -> None:
    """Refuse, before any request is made, images for a model that cannot see them."""
    images = [a.name for a in attachments if a.is_image]
    if images and not model.images:
        raise MediaError(
            f"model {model.id} ({model.provider or 'this provider'}) does not accept images, so "
            f"{', '.join(images)} cannot be sent; pick a vision model (/model) or remove the image "
            f'(set images = true under [models."{model.provider}/{model.id}"] in config.toml if it does accept them)'
        )


class MediaLibrary:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.RLock()
        self._cache: OrderedDict[str, str] = OrderedDict()
        self._cached_bytes = 0

    # ------------------------------------------------------------------ layout

    def folder(self, thread_id: str) -> Path:
        if not _THREAD_ID.match(thread_id):
            raise MediaError(f"{thread_id!r} is not a thread id")
        return child(self.root, thread_id, what="thread id")

    def _index_path(self, thread_id: str) -> Path:
        return self.folder(thread_id) / "index.json"

    def _load(self, thread_id: str) -> dict[str, MediaArtifact]:
        try:
            raw = json.loads(self._index_path(thread_id).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise MediaError(f"the media index of thread {thread_id} is unreadable: {exc}") from None
        rows = raw.get("media", []) if isinstance(raw, dict) else []
        records = {}
        for row in rows:
            with contextlib.suppress(ValueError):
                record = MediaArtifact.model_validate(row)
                records[record.id] = record
        return records

    def _save(self, thread_id: str, records: dict[str, MediaArtifact]) -> None:
        path = self._index_path(thread_id)
        body = json.dumps({"media": [r.wire() for r in records.values()]}, ensure_ascii=False, indent=1)
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(body)
        os.replace(tmp, path)

    def _file(self, thread_id: str, record: MediaArtifact) -> Path:
        return self.folder(thread_id) / f"{record.id}.{EXTENSIONS.get(record.mime_type, 'bin')}"

    def _make_folder(self, thread_id: str) -> Path:
        folder = self.folder(thread_id)
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        folder.mkdir(exist_ok=True, mode=0o700)
        return folder

    # ------------------------------------------------------------------ adding

    def add(
        self, thread_id: str, data: bytes, *, name: str, mime_type: str | None = None, source: str = "user", pending: bool = False
    ) -> MediaArtifact:
        """Store ``data`` for the thread (images made sendable first) and return its record. The
        same bytes added twice are one item; the later name and source win, pending is kept."""
        mime = mime_type or "application/octet-stream"
        width = height = None
        if mime.startswith("image/") or mime_type is None:
            image = prepare(data, name)
            data, mime, width, height = image.data, image.mime_type, image.width, image.height
        elif len(data) > MAX_OTHER_BYTES:
            raise MediaError(f"{name} is larger than {MAX_OTHER_BYTES // (1024 * 1024)} MB")
        digest = hashlib.sha256(data).hexdigest()
        with self._lock:
            self._make_folder(thread_id)
            records = self._load(thread_id)
            old = records.get(digest)
            record = MediaArtifact(
                id=digest,
                thread_id=thread_id,
                name=name,
                mime_type=mime,
                kind=media_kind(mime),
                size=len(data),
                width=width,
                height=height,
                source=source,
                pending=pending or (old is not None and old.pending),
            )
            if old is not None:
                record.created_at = old.created_at
            path = self._file(thread_id, record)
            if not path.exists():
                tmp = path.with_suffix(".part")
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                os.replace(tmp, path)
            records[digest] = record
            self._save(thread_id, records)
        return record

    def store_attachments(
        self, thread_id: str, attachments: list[Attachment], *, source: str
    ) -> tuple[list[Attachment], list[MediaArtifact]]:
        """Attachments with inline bytes stored and replaced by references (text attachments and
        references stay as they are), and the records stored."""
        out: list[Attachment] = []
        added: list[MediaArtifact] = []
        for attachment in attachments:
            if attachment.data_base64 is None:
                out.append(attachment)
                continue
            try:
                data = base64.b64decode(attachment.data_base64, validate=True)
            except (binascii.Error, ValueError):
                raise MediaError(f"{attachment.name}: its data is not valid base64") from None
            record = self.add(thread_id, data, name=attachment.name, mime_type=attachment.mime_type, source=source)
            out.append(record.attachment().model_copy(update={"path": attachment.path}))
            added.append(record)
        return out, added

    def copy_thread(self, source_thread: str, target_thread: str) -> None:
        """Give a fork its own copy of the parent's media (hard links where the disk allows)."""
        with self._lock:
            records = self._load(source_thread)
            if not records:
                return
            self._make_folder(target_thread)
            copied: dict[str, MediaArtifact] = {}
            for record in records.values():
                src = self._file(source_thread, record)
                dst = self._file(target_thread, record)
                if not src.exists():
                    continue
                if not dst.exists():
                    try:
                        os.link(src, dst)
                    except OSError:
                        shutil.copy2(src, dst)
                copied[record.id] = record.model_copy(update={"thread_id": target_thread, "pending": False})
            self._save(target_thread, {**self._load(target_thread), **copied})

    # ------------------------------------------------------------------ reading

    def list_media(self, thread_id: str, kind: str | None = None) -> list[MediaArtifact]:
        with self._lock:
            records = sorted(self._load(thread_id).values(), key=lambda r: r.created_at)
        return [r for r in records if kind is None or r.kind == kind]

    def get(self, thread_id: str, media_id: str) -> MediaArtifact:
        check_media_id(media_id)
        with self._lock:
            record = self._load(thread_id).get(media_id)
        if record is None:
            raise MediaError(f"thread {thread_id} has no media item {media_id}")
        return record

    def read(self, thread_id: str, media_id: str) -> bytes:
        record = self.get(thread_id, media_id)
        try:
            return self._file(thread_id, record).read_bytes()
        except FileNotFoundError:
            raise MediaError(f"the file of media item {media_id} is missing from {self.folder(thread_id)}") from None

    def data_base64(self, thread_id: str, media_id: str) -> str | None:
        """The item's bytes as base64 for a model request (None when it was deleted)."""
        key = f"{thread_id}/{media_id}"
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        try:
            encoded = base64.b64encode(self.read(thread_id, media_id)).decode("ascii")
        except MediaError:
            return None
        with self._lock:
            self._cache[key] = encoded
            self._cached_bytes += len(encoded)
            while self._cached_bytes > CACHE_BYTES and len(self._cache) > 1:
                _, dropped = self._cache.popitem(last=False)
                self._cached_bytes -= len(dropped)
        return encoded

    def thumbnail(self, thread_id: str, media_id: str, side: int = THUMBNAIL_SIDE) -> tuple[bytes, int, int]:
        """A PNG preview (made once per size, then read back): bytes, width, height."""
        record = self.get(thread_id, media_id)
        if record.kind != "image":
            raise MediaError(f"media item {media_id} is {record.mime_type}, not an image: it has no thumbnail")
        thumbs = self.folder(thread_id) / "thumbs"
        path = thumbs / f"{media_id}-{side}.png"
        if path.exists():
            data = path.read_bytes()
            from roder_core.media.images import measure

            size = measure(data)
            if size is not None:
                return data, *size
        preview = thumbnail(self.read(thread_id, media_id), side)
        with self._lock:
            thumbs.mkdir(exist_ok=True, mode=0o700)
            tmp = path.with_suffix(".part")
            tmp.write_bytes(preview.data)
            os.replace(tmp, path)
        return preview.data, preview.width, preview.height

    # ------------------------------------------------------------------ pending (media/attachToTurn)

    def set_pending(self, thread_id: str, media_id: str, pending: bool) -> MediaArtifact:
        with self._lock:
            records = self._load(thread_id)
            record = records.get(check_media_id(media_id))
            if record is None:
                raise MediaError(f"thread {thread_id} has no media item {media_id}")
            record.pending = pending
            self._save(thread_id, records)
        return record

    def take_pending(self, thread_id: str) -> list[MediaArtifact]:
        """The items waiting for the thread's next turn, in the order they were attached; they
        are no longer pending afterwards."""
        with self._lock:
            records = self._load(thread_id)
            waiting = sorted((r for r in records.values() if r.pending), key=lambda r: r.created_at)
            for record in waiting:
                record.pending = False
            if waiting:
                self._save(thread_id, records)
        return waiting

    # ------------------------------------------------------------------ removing

    def delete(self, thread_id: str, media_id: str) -> bool:
        """Remove an item's bytes, previews and record. Messages that referenced it keep their
        card; the model is told the image was deleted."""
        check_media_id(media_id)
        with self._lock:
            records = self._load(thread_id)
            record = records.pop(media_id, None)
            if record is None:
                return False
            self._file(thread_id, record).unlink(missing_ok=True)
            for thumb in (self.folder(thread_id) / "thumbs").glob(f"{media_id}-*.png"):
                thumb.unlink(missing_ok=True)
            self._save(thread_id, records)
            for key in [k for k in self._cache if k == f"{thread_id}/{media_id}"]:
                self._cached_bytes -= len(self._cache.pop(key))
        return True

    def remove_thread(self, thread_id: str) -> None:
        """Drop a thread's whole folder (the thread was deleted, or it was ephemeral)."""
        with self._lock:
            shutil.rmtree(self.folder(thread_id), ignore_errors=True)
            for key in [k for k in self._cache if k.startswith(f"{thread_id}/")]:
                self._cached_bytes -= len(self._cache.pop(key))
