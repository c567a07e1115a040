"""SqliteMemoryStore: notes in one SQLite file, searched with FTS5 (bm25 ranking, porter stemming).

Notes have a scope: ``project`` notes belong to one project (its git root, or the folder itself
outside a repository) and ``global`` notes to every project. The full-text table is an external
content index kept in step by triggers; when this SQLite build lacks FTS5 the store falls back to
word matching with LIKE, slower but with the same results shape.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import re
import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from roder_core.errors import RoderError
from roder_core.kernel.services import MemoryRecord, MemoryScope
from roder_core.settings.paths import create_private

SCOPES: tuple[MemoryScope, ...] = ("project", "global")
MAX_TEXT_CHARS = 8_000
#: Words too common to help a search (kept short on purpose: FTS5 ranks the rest).
STOPWORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "no",
        "not",
        "of",
        "on",
        "or",
        "our",
        "so",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "this",
        "to",
        "was",
        "we",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
        "please",
        "could",
        "would",
        "should",
    }
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    rowid INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    scope TEXT NOT NULL,
    project TEXT,
    text TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS memories_by_project ON memories (scope, project);
"""
_FTS = """
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(
    text, tags, content='memories', content_rowid='rowid', tokenize='porter unicode61'
);
CREATE TRIGGER IF NOT EXISTS memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, text, tags) VALUES (new.rowid, new.text, new.tags);
END;
CREATE TRIGGER IF NOT EXISTS memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, text, tags) VALUES ('delete', old.rowid, old.text, old.tags);
END;
CREATE TRIGGER IF NOT EXISTS memories_au AFTER UPDATE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, text, tags) VALUES ('delete', old.rowid, old.text, old.tags);
    INSERT INTO memories_fts (rowid, text, tags) VALUES (new.rowid, new.text, new.tags);
END;
"""
_COLUMNS = "m.id, m.text, m.scope, m.project, m.tags, m.created_at, m.updated_at"


def project_key(path: str | Path) -> str:
    """The project a folder belongs to: its git root, or the folder itself outside a repository."""
    folder = Path(path).expanduser().resolve()
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return str(candidate)
    return str(folder)


def search_terms(query: str, limit: int = 24) -> list[str]:
    """Distinct words worth searching for, in order."""
    words = re.findall(r"\w+", query.lower())
    return list(dict.fromkeys(w for w in words if len(w) > 1 and w not in STOPWORDS))[:limit]


def _record(row: tuple[Any, ...], score: float | None = None) -> MemoryRecord:
    tags = [t for t in row[4].split(" ") if t]
    return MemoryRecord(
        id=row[0], text=row[1], scope=row[2], project=row[3], tags=tags, created_at=row[5], updated_at=row[6], score=score
    )


def _clean_tags(tags: list[str] | None) -> list[str]:
    cleaned = [re.sub(r"\s+", "-", str(t).strip()) for t in tags or []]
    return list(dict.fromkeys(t for t in cleaned if t))


class SqliteMemoryStore:
    def __init__(self, path: Path, default_project: str | Path) -> None:
        self.path = path
        self.default_project = project_key(default_project)
        self._fts: bool | None = None

    def id(self) -> str:
        return "sqlite-memory"

    # ------------------------------------------------------------------ connection

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        create_private(self.path)
        conn = sqlite3.connect(self.path, timeout=10)
        try:
            conn.executescript(_SCHEMA)
            if self._fts is None:
                try:
                    conn.executescript(_FTS)
                    self._fts = True
                except sqlite3.OperationalError:  # this SQLite has no FTS5
                    self._fts = False
            with conn:
                yield conn
        finally:
            conn.close()

    def _project(self, project: str | Path | None) -> str:
        return project_key(project) if project is not None else self.default_project

    # ------------------------------------------------------------------ MemoryStore

    async def save(
        self, text: str, scope: MemoryScope = "project", tags: list[str] | None = None, *, project: str | None = None
    ) -> str:
        text = text.strip()
        if not text:
            raise RoderError("a memory needs some text")
        if len(text) > MAX_TEXT_CHARS:
            raise RoderError(f"a memory is at most {MAX_TEXT_CHARS} characters (got {len(text)}); save the gist")
        if scope not in SCOPES:
            raise RoderError(f"memory scope must be one of {', '.join(SCOPES)} (got {scope!r})")
        owner = self._project(project) if scope == "project" else None
        memory_id = f"mem_{uuid.uuid4().hex[:16]}"
        stamp = time.time()

        def insert() -> None:
            with self._db() as db:
                db.execute(
                    "INSERT INTO memories (id, scope, project, text, tags, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (memory_id, scope, owner, text, " ".join(_clean_tags(tags)), stamp, stamp),
                )

        await asyncio.to_thread(insert)
        return memory_id

    async def search(
        self, query: str, limit: int = 5, *, project: str | None = None, include_global: bool = True
    ) -> list[MemoryRecord]:
        terms = search_terms(query)
        if not terms or limit <= 0 or not self.path.exists():
            return []  # no store yet, nothing to find: a search never creates one (every turn searches)
        owner = self._project(project)
        return await asyncio.to_thread(self._search, terms, int(limit), owner, include_global)

    def _search(self, terms: list[str], limit: int, owner: str, include_global: bool) -> list[MemoryRecord]:
        scope_sql = "(m.scope = 'project' AND m.project = ?)" + (" OR m.scope = 'global'" if include_global else "")
        with self._db() as db:
            if self._fts:
                match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
                rows = db.execute(
                    f"SELECT {_COLUMNS}, bm25(memories_fts) AS rank FROM memories_fts "
                    f"JOIN memories m ON m.rowid = memories_fts.rowid "
                    f"WHERE memories_fts MATCH ? AND ({scope_sql}) ORDER BY rank LIMIT ?",
                    (match, owner, limit),
                ).fetchall()
                return [_record(row, score=-row[7]) for row in rows]
            hits = " + ".join("(instr(lower(m.text || ' ' || m.tags), ?) > 0)" for _ in terms)
            rows = db.execute(
                f"SELECT {_COLUMNS}, ({hits}) AS hits FROM memories m WHERE ({scope_sql}) "
                f"AND hits > 0 ORDER BY hits DESC, m.updated_at DESC LIMIT ?",
                (*terms, owner, limit),
            ).fetchall()
            return [_record(row, score=float(row[7])) for row in rows]

    async def list(
        self, *, project: str | None = None, scope: MemoryScope | None = None, limit: int | None = None
    ) -> list[MemoryRecord]:
        owner = self._project(project)

        def select() -> list[MemoryRecord]:
            where = {"project": "m.scope = 'project' AND m.project = ?", "global": "m.scope = 'global'"}.get(
                scope or "", "(m.scope = 'project' AND m.project = ?) OR m.scope = 'global'"
            )
            params: list[Any] = [owner] if scope != "global" else []
            sql = f"SELECT {_COLUMNS} FROM memories m WHERE {where} ORDER BY m.updated_at DESC"
            if limit:
                sql += " LIMIT ?"
                params.append(int(limit))
            with self._db() as db:
                return [_record(row) for row in db.execute(sql, params)]

        return await asyncio.to_thread(select)

    async def get(self, memory_id: str) -> MemoryRecord | None:
        def select() -> MemoryRecord | None:
            with self._db() as db:
                row = db.execute(f"SELECT {_COLUMNS} FROM memories m WHERE m.id = ?", (memory_id,)).fetchone()
            return _record(row) if row else None

        return await asyncio.to_thread(select)

    async def update(self, memory_id: str, *, text: str | None = None, tags: builtins.list[str] | None = None) -> MemoryRecord:
        current = await self.get(memory_id)
        if current is None:
            raise RoderError(f"no memory {memory_id}")
        new_text = current.text if text is None else text.strip()
        if not new_text or len(new_text) > MAX_TEXT_CHARS:
            raise RoderError(f"a memory needs 1 to {MAX_TEXT_CHARS} characters of text")
        new_tags = current.tags if tags is None else _clean_tags(tags)

        def write() -> None:
            with self._db() as db:
                db.execute(
                    "UPDATE memories SET text = ?, tags = ?, updated_at = ? WHERE id = ?",
                    (new_text, " ".join(new_tags), time.time(), memory_id),
                )

        await asyncio.to_thread(write)
        updated = await self.get(memory_id)
        assert updated is not None
        return updated

    async def delete(self, memory_id: str) -> bool:
        def remove() -> bool:
            with self._db() as db:
                return db.execute("DELETE FROM memories WHERE id = ?", (memory_id,)).rowcount > 0

        return await asyncio.to_thread(remove)
