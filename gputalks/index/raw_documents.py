"""The raw-document archive's rows: storing a response once, compressed (against the request's
last whole version when that saves more than half), and reading documents back by id or as the
last version of a request (`SqliteArchive`, what the fetcher asks).
"""

from __future__ import annotations

import sqlite3
import zlib
from contextlib import closing
from pathlib import Path
from typing import Any

import sqlite_utils

from gputalks.scraper.records import ParseError, RawDocument

RAW_COLUMNS = ["id", "source", "method", "url", "request_body", "status", "content_type",
               "fetched_at", "etag", "last_modified", "body", "encoding", "base_id"]
# How an archived body is stored: zlib alone, or zlib with the request's last whole version as
# its dictionary (a README whose one title changed: 60 bytes instead of 4,300).
WHOLE, DELTA = "zlib", "zlib-delta"
ZDICT_BYTES = 32768  # zlib's window: the most of a dictionary it can use


def compress(body: bytes | str | None, base: bytes | None = None) -> bytes | None:
    if body is None:
        return None
    data = body.encode() if isinstance(body, str) else body
    if base is None:
        return zlib.compress(data, 9)
    compressor = zlib.compressobj(9, zdict=base[-ZDICT_BYTES:])
    return compressor.compress(data) + compressor.flush()


def _decompress(blob: bytes, base: bytes | None = None) -> bytes:
    if base is None:
        return zlib.decompress(blob)
    decompressor = zlib.decompressobj(zdict=base[-ZDICT_BYTES:])
    return decompressor.decompress(blob) + decompressor.flush()


def _stored_body(db: sqlite_utils.Database, doc: RawDocument) -> dict[str, Any]:
    """The body's columns: compressed against the request's last whole version when that is less
    than half its size alone (a night's one-line change), else compressed alone (a new base)."""
    whole = compress(doc.body)
    base = db.execute("select id, body from raw_documents where source = ? and method = ? and url = ? "
                      "and coalesce(request_body, '') = ? and encoding = ? order by id desc limit 1",
                      [doc.source, doc.method, doc.url, doc.request_body or "", WHOLE]).fetchone()
    if base is not None:
        delta = compress(doc.body, _decompress(base[1]))
        if len(delta) * 2 < len(whole):
            return {"body": delta, "encoding": DELTA, "base_id": base[0]}
    return {"body": whole, "encoding": WHOLE, "base_id": None}


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
                    "size": len(doc.body), **_stored_body(db, doc)}).last_pk
        ids.append(doc.id)
    return ids


def _bases(conn, rows: list[tuple]) -> dict[int, bytes]:
    """The whole bodies the delta-stored rows among `rows` were compressed against, by id."""
    wanted = sorted({row[RAW_COLUMNS.index("base_id")] for row in rows
                     if row[RAW_COLUMNS.index("encoding")] == DELTA})
    found: dict[int, bytes] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start:start + 500]
        for base_id, body in conn.execute(f"select id, body from raw_documents where id in "
                                          f"({','.join('?' * len(chunk))})", chunk):
            found[base_id] = body
    return found


def _document(row: tuple, bases: dict[int, bytes]) -> RawDocument:
    values = dict(zip(RAW_COLUMNS, row))
    encoding, base_id = values.pop("encoding"), values.pop("base_id")
    if encoding in (WHOLE, DELTA):
        try:
            base = _decompress(bases[base_id]) if encoding == DELTA else None
            values["body"] = _decompress(values["body"], base)
        except (zlib.error, KeyError) as exc:  # a damaged page of the archive: its source cannot be rebuilt from it
            raise ParseError(f"archived document {values['id']} ({values['url']}) is damaged ({exc}); "
                             "restore the archive from a backup") from exc
    return RawDocument(**values)


def load_documents(db: sqlite_utils.Database, ids: list[int]) -> list[RawDocument]:
    """Documents by id, in the order given (chunked: SQLite caps query parameters)."""
    by_id: dict[int, RawDocument] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        marks = ",".join("?" * len(chunk))
        rows = db.execute(f"select {', '.join(RAW_COLUMNS)} from raw_documents where id in ({marks})",
                          chunk).fetchall()
        bases = _bases(db.conn, rows)
        for row in rows:
            by_id[row[0]] = _document(row, bases)
    return [by_id[i] for i in ids if i in by_id]


LAST_VERSION_SQL = (f"select {', '.join(RAW_COLUMNS)} from raw_documents where source = ? and method = ? "
                    "and url = ? and coalesce(request_body, '') = ? and status between 200 and 299 "
                    "order by id desc limit 1")


class SqliteArchive:
    """The archive as the fetcher sees it (`scraper.http.Archive`).

    Each lookup opens its own short read-only connection to the archive, so
    the fetcher's worker threads share no connection and need no lock; what
    they see is what the refresh committed (`archive` commits per source).
    """

    def __init__(self, path: str | Path):
        self.uri = Path(path).resolve().as_uri() + "?mode=ro"

    def last_version(self, source: str, method: str, url: str, request_body: str | None) -> RawDocument | None:
        with closing(sqlite3.connect(self.uri, uri=True)) as conn:
            conn.execute("PRAGMA busy_timeout=30000")
            row = conn.execute(LAST_VERSION_SQL, [source, method, url, request_body or ""]).fetchone()
            return _document(row, _bases(conn, [row])) if row else None

    def failed_last_time(self, source: str) -> set[str]:
        with closing(sqlite3.connect(self.uri, uri=True)) as conn:
            conn.execute("PRAGMA busy_timeout=30000")
            return {item for (item,) in conn.execute(
                "select item from problems where source = ? and severity = 'error' and item is not null and "
                "(select max(run_id) from source_runs where source = ?) between run_id and coalesce(last_run_id, run_id)",
                [source, source])}
