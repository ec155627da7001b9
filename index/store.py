"""Opening the index, the raw-document archive and the per-source document sets.

Every raw document is archived before it is parsed. A version of a response
is stored once (same request, same sha256 -> same row). Each source's run
records the ids of the documents it used (`source_runs.document_ids`); the
last successful run's set is what `rebuild` and a failed refresh fall back to.
"""

from __future__ import annotations

import json
from pathlib import Path

import sqlite_utils

from scraper.records import RawDocument

from .schema import ensure_schema

RAW_COLUMNS = ["id", "source", "method", "url", "request_body", "status", "content_type",
               "fetched_at", "etag", "last_modified", "body"]


def open_db(path: str | Path, create: bool = True) -> sqlite_utils.Database:
    """The index with WAL (readers see the last commit while a refresh writes)."""
    path = Path(path)
    if not create and not path.exists():
        raise FileNotFoundError(f"{path}: no index here; run `gputalks refresh` first")
    db = sqlite_utils.Database(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA busy_timeout=30000")
    db.execute("PRAGMA foreign_keys=ON")
    if create:
        with db.atomic():
            ensure_schema(db)
    return db


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
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    rows = db.execute(f"select {', '.join(RAW_COLUMNS)} from raw_documents where id in ({marks})",
                      ids).fetchall()
    by_id = {row[0]: _document(row) for row in rows}
    return [by_id[i] for i in ids if i in by_id]


def previous_document(db: sqlite_utils.Database, source: str, method: str, url: str,
                      request_body: str | None) -> RawDocument | None:
    """The newest archived version of a request (for conditional requests)."""
    row = db.execute(
        f"select {', '.join(RAW_COLUMNS)} from raw_documents where source = ? and method = ? "
        "and url = ? and coalesce(request_body, '') = ? and status between 200 and 299 "
        "order by id desc limit 1", [source, method, url, request_body or ""]).fetchone()
    return _document(row) if row else None


def last_good_run(db: sqlite_utils.Database, source: str) -> dict | None:
    """The source's newest successful run: its document ids and item count."""
    rows = list(db.query(
        "select * from source_runs where source = ? and status = 'ok' order by id desc limit 1",
        [source]))
    if not rows:
        return None
    row = rows[0]
    row["document_ids"] = json.loads(row["document_ids"] or "[]")
    return row
