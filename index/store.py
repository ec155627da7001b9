"""Opening the index, the raw-document archive and the per-source document sets.

Every raw document is archived before it is parsed. A version of a response
is stored once (same request, same sha256 -> same row). Each source's run
records the ids of the documents it used (`source_runs.document_ids`); the
last successful run's set is what `rebuild` and a failed refresh fall back to.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import sqlite_utils

from ..scraper.records import RawDocument

from .schema import ensure_schema

RAW_COLUMNS = ["id", "source", "method", "url", "request_body", "status", "content_type",
               "fetched_at", "etag", "last_modified", "body"]


def open_db(path: str | Path, create: bool = True) -> sqlite_utils.Database:
    path = Path(path)
    if not create and not path.exists():
        raise FileNotFoundError(f"{path}: no index here; run `gputalks refresh` first")
    db = sqlite_utils.Database(sqlite3.connect(path))
    db.execute("PRAGMA busy_timeout=30000")
    db.execute("PRAGMA foreign_keys=ON")
    if create:
        with db.atomic():
            ensure_schema(db)
    return db


@contextmanager
def building_copy(path: str | Path) -> Iterator[Path]:
    """Work on a copy of the index and swap it in with an atomic rename.

    Readers (Datasette serving the file immutable, an export) see the old file
    or the new one, never a half-written one; a refresh killed at any point
    leaves the last good index untouched. Call with the refresh lock held.
    The swapped-in file is in rollback-journal mode, so no -wal file belongs
    to it.
    """
    path = Path(path)
    work = path.with_name(path.name + ".building")
    for stale in (work, Path(f"{work}-journal"), Path(f"{work}-wal"), Path(f"{work}-shm")):
        stale.unlink(missing_ok=True)  # left by a killed refresh
    if path.exists():
        source, target = sqlite3.connect(path), sqlite3.connect(work)
        try:
            source.backup(target)
        finally:
            source.close()
            target.close()
    try:
        yield work
    except BaseException:
        work.unlink(missing_ok=True)
        raise
    conn = sqlite3.connect(work)
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()
    with open(work, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(work, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def archive(db: sqlite_utils.Database, documents: list[RawDocument]) -> list[int]:
    """Store documents not yet archived; return every document's id."""
    ids = []
    for doc in documents:
        if doc.id is None:
            existing = db.execute(
                "select id from raw_documents where source = ? and method = ? and url = ? "
                "and coalesce(request_body, '') = ? and sha256 = ? order by id desc limit 1",
                [doc.source, doc.method, doc.url, doc.request_body or "", doc.sha256]).fetchone()
            if existing:
                doc.id = existing[0]
            else:
                doc.id = db.table("raw_documents").insert({
                    "source": doc.source, "method": doc.method, "url": doc.url,
                    "request_body": doc.request_body, "status": doc.status,
                    "content_type": doc.content_type, "fetched_at": doc.fetched_at,
                    "sha256": doc.sha256, "etag": doc.etag, "last_modified": doc.last_modified,
                    "size": len(doc.body), "body": doc.body}).last_pk
        ids.append(doc.id)
    return ids


def _document(row: tuple) -> RawDocument:
    values = dict(zip(RAW_COLUMNS, row))
    return RawDocument(**values)


def load_documents(db: sqlite_utils.Database, ids: list[int]) -> list[RawDocument]:
    """Documents by id, in the order given (chunked: SQLite caps query parameters)."""
    by_id: dict[int, RawDocument] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        marks = ",".join("?" * len(chunk))
        for row in db.execute(f"select {', '.join(RAW_COLUMNS)} from raw_documents where id in ({marks})",
                              chunk).fetchall():
            by_id[row[0]] = _document(row)
    return [by_id[i] for i in ids if i in by_id]


LAST_VERSION_SQL = (f"select {', '.join(RAW_COLUMNS)} from raw_documents where source = ? and method = ? "
                    "and url = ? and coalesce(request_body, '') = ? and status between 200 and 299 "
                    "order by id desc limit 1")


class SqliteArchive:
    """The archive as the fetcher sees it (`scraper.http.Archive`).

    Each lookup opens its own short read-only connection to the index file, so
    the fetcher's worker threads share no connection and need no lock; what
    they see is what the refresh committed (`archive` commits per source).
    """

    def __init__(self, path: str | Path):
        self.uri = Path(path).resolve().as_uri() + "?mode=ro"

    def last_version(self, source: str, method: str, url: str, request_body: str | None) -> RawDocument | None:
        with closing(sqlite3.connect(self.uri, uri=True)) as conn:
            conn.execute("PRAGMA busy_timeout=30000")
            row = conn.execute(LAST_VERSION_SQL, [source, method, url, request_body or ""]).fetchone()
        return _document(row) if row else None
