"""The two files of an index: opening, checking and bringing them up to date, and the
building copy a refresh writes (the archive's rows: index/raw_documents.py).

`talks.db` is what readers are served; `talks.archive.db` beside it holds every
raw document (zlib-compressed) and the ledger of runs. Every raw document is
archived before it is parsed. A version of a response is stored once (same
request, same sha256 -> same row). Each source's run records the ids of the
documents it used (`source_runs.document_ids`); the last successful run's set
is what `rebuild` and a failed refresh fall back to.
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

import sqlite_utils


from gputalks.index.raw_documents import compress
from gputalks.index.schema import ARCHIVE_TABLES, FTS, LEGACY_INDEX_TABLES, TABLES, ensure_schema

SQLITE_HEADER = b"SQLite format 3\x00"


class StoreError(Exception):
    """A file that cannot serve as an index or an archive: one line for the user."""


@dataclass(frozen=True)
class IndexFiles:
    """The served index and the archive beside it, symlinks resolved: the lock
    and the swap act on the real file, so a symlinked index stays a symlink."""

    index: Path
    archive: Path

    @classmethod
    def of(cls, path: str | Path) -> "IndexFiles":
        real = Path(path).resolve()
        return cls(real, real.with_name(f"{real.stem}.archive.db"))

    def check_writable(self) -> None:
        """One-line StoreErrors before a refresh touches anything: files that are
        not SQLite, a directory it cannot write in (the lock, the working copy)."""
        for path in (self.index, self.archive):
            check_sqlite(path)
        directory = self.index.parent
        if not directory.is_dir():
            raise StoreError(f"{directory}: no such directory for the index")
        if not os.access(directory, os.W_OK | os.X_OK):
            raise StoreError(f"{directory}: cannot write here (permission denied); the index needs its "
                             "directory writable for the lock and the working copy")


def check_sqlite(path: Path) -> None:
    """A one-line StoreError when `path` exists but is not an SQLite database."""
    if not path.exists():
        return
    if path.is_dir():
        raise StoreError(f"{path}: is a directory, not an SQLite index")
    with open(path, "rb") as handle:
        header = handle.read(len(SQLITE_HEADER))
    if header and header != SQLITE_HEADER:
        raise StoreError(f"{path}: not an SQLite database; give --db a gputalks index (or a new file name)")


def _connect(path: str | Path) -> sqlite_utils.Database:
    db = sqlite_utils.Database(sqlite3.connect(path))
    db.execute("PRAGMA busy_timeout=30000")
    db.execute("PRAGMA foreign_keys=ON")
    return db


def open_db(path: str | Path, create: bool = True) -> sqlite_utils.Database:
    """The served index (`create`: with its schema applied; else it must be a gputalks index)."""
    path = Path(path)
    if not create and not path.exists():
        raise FileNotFoundError(f"{path}: no index here; run `gputalks refresh` first")
    if str(path) != ":memory:":
        check_sqlite(path)
    if not create and not {"talks", "refresh_runs"} <= _tables(path):
        raise StoreError(f"{path}: not a gputalks index (an empty file, or another application's SQLite "
                         "database); give --db a gputalks index, or run `gputalks refresh` to make one")
    db = _connect(path)
    if create:
        with db.atomic():
            ensure_schema(db)
    return db


def open_working_copy(path: str | Path) -> sqlite_utils.Database:
    """The copy `building_copy` makes, opened to be written fast: no reader sees it before the
    swap, which syncs it to disk first, and a build that dies leaves it to be deleted; so no
    commit waits for the disk (a 100k rebuild's commit: 0.13 s). Its rollback journal stays
    a file: in memory it would hold every page a rebuild rewrites."""
    db = open_db(path)
    db.execute("PRAGMA synchronous=OFF")
    return db


def read_only(path: str | Path) -> sqlite3.Connection:
    """A read-only connection to an SQLite file, once what a writer killed mid-transaction left
    beside it is rolled back: a read-only connection cannot roll a hot journal back and fails
    ("attempt to write a readonly database"), so after a refresh killed while it wrote the
    archive, every refresh called the archive damaged and stopped. Opened to be written (as
    the next write would), SQLite rolls it back on the first read."""
    path = Path(path)
    if Path(f"{path}-journal").exists() and os.access(path, os.W_OK):
        with closing(sqlite3.connect(path, timeout=30)) as conn:
            conn.execute("select count(*) from sqlite_master").fetchone()
    return sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)


def _tables(path: Path) -> set[str]:
    with closing(read_only(path)) as conn:
        return {row[0] for row in conn.execute("select name from sqlite_master where type = 'table'")}


def archive_missing(files: IndexFiles) -> bool:
    """Whether the index knows talks but its archive is gone (absent, or holding no run): a
    build would then know only what it fetches. StoreErrors for a `--db` that is another
    application's database, and for an archive that belongs to another index (it has no record
    of this index's first run): adopting it would rewrite the index from someone else's data."""
    if not files.index.exists() or files.index.stat().st_size == 0:
        return False
    tables = _tables(files.index)
    if tables and not {"talks", "refresh_runs"} <= tables:
        raise StoreError(f"{files.index}: an SQLite database of another application (no talks or refresh_runs "
                         "table); give --db a gputalks index or a new file name")
    if not tables or "raw_documents" in tables:  # new, or a one-file index whose documents move over
        return False
    with closing(read_only(files.index)) as index:
        if not index.execute("select exists (select 1 from talks)").fetchone()[0]:
            return False
        first = index.execute("select id, started_at from refresh_runs order by id limit 1").fetchone()
    if not files.archive.exists() or "refresh_runs" not in _tables(files.archive):
        return True
    with closing(read_only(files.archive)) as archive:
        if not archive.execute("select exists (select 1 from refresh_runs)").fetchone()[0]:
            return True
        if first and not archive.execute("select 1 from refresh_runs where id = ? and started_at = ?",
                                         list(first)).fetchone():
            raise StoreError(f"{files.archive}: the archive of another index (no record of {files.index.name}'s "
                             f"first run, {first[1]}); move it away and restore this index's own archive")
    return False


def open_archive(files: IndexFiles) -> tuple[sqlite_utils.Database, str | None]:
    """The archive beside the index, created when missing; and a note when
    that is news (a first run, or an index whose archive went missing). An
    index from before the archive had its own file gives its documents and
    runs to the new archive."""
    check_sqlite(files.archive)
    db = _connect(files.archive)
    with db.atomic():
        ensure_schema(db, ARCHIVE_TABLES)
    if db.table("refresh_runs").count:
        return db, None
    if not files.index.exists():
        return db, f"first run: creating {files.index.name} and its archive {files.archive.name}"
    check_sqlite(files.index)
    if _adopt_legacy(db, files.index):
        return db, f"moved the raw documents and runs of {files.index.name} into {files.archive.name}"
    return db, (f"no archive beside {files.index.name} ({files.archive.name} is missing): starting a new one "
                "from what this run fetches; no talk is marked gone and no link is dropped for want of it. "
                "Restore the archive to keep the raw documents, the runs and the carried items")


def failure_of(index: str | Path, error: Exception) -> str:
    """What a failed build's SQLite error means for the user, naming the file at fault: the
    archive or the index damaged (each asked whether it still reads whole), or one that cannot
    be written; and what to do. The last good index is unchanged in every case."""
    files = IndexFiles.of(index)
    for path, what, remedy in (
            (files.archive, "the archive of raw documents",
             "restore it from a backup, or move it aside: the next refresh starts a new archive "
             "(and marks nothing gone for it)"),
            (files.index, "the index", "restore it from a backup, or move it and its archive aside and "
                                        "run `gputalks refresh` to build both again")):
        if path.exists() and not _reads_whole(path):
            return f"{path}: {what} is damaged ({error}); {remedy}"
        if path.exists() and not os.access(path, os.W_OK):
            return f"{path}: {what} is read-only; make it writable (chmod u+w) and run again"
    return f"cannot write the index ({error})"


def _reads_whole(path: Path) -> bool:
    try:
        with closing(read_only(path)) as conn:
            return conn.execute("pragma quick_check").fetchone()[0] == "ok"
    except sqlite3.Error:
        return False


def read_archive(files: IndexFiles) -> sqlite_utils.Database:
    """The archive, read-only (for `status`); the legacy single-file index reads as its own archive."""
    path = files.archive if files.archive.exists() else files.index
    if not path.exists():
        raise FileNotFoundError(f"{files.archive}: no archive here; run `gputalks refresh` first")
    check_sqlite(path)
    return sqlite_utils.Database(read_only(path))


def _adopt_legacy(db: sqlite_utils.Database, index: Path) -> bool:
    """Copy a legacy single-file index's documents (compressed) and runs into the new archive."""
    db.conn.create_function("gputalks_zlib", 1, compress, deterministic=True)
    db.conn.execute("attach database ? as legacy", [str(index)])
    try:
        legacy = {row[0] for row in db.execute("select name from legacy.sqlite_master where type = 'table'")}
        if "raw_documents" not in legacy:
            return False
        with db.atomic():
            for name in ARCHIVE_TABLES:
                if name not in legacy:
                    continue
                have = {row[1] for row in db.execute(f"pragma legacy.table_info([{name}])")}
                columns = [c for c in TABLES[name]["columns"] if c in have and c != "encoding"]
                listed = ", ".join(f"[{c}]" for c in columns)
                selected = ", ".join("gputalks_zlib([body])" if c == "body" else f"[{c}]" for c in columns)
                extra = (", [encoding]", ", 'zlib'") if name == "raw_documents" else ("", "")
                db.execute(f"insert into [{name}] ({listed}{extra[0]}) select {selected}{extra[1]} "
                           f"from legacy.[{name}] order by rowid")
        return True
    finally:
        db.conn.execute("detach database legacy")


def drop_legacy_tables(db: sqlite_utils.Database) -> bool:
    """Drop what a legacy index kept that now lives in the archive; True when it did."""
    present = [name for name in LEGACY_INDEX_TABLES if db.table(name).exists()]
    for name in present:
        db.execute(f"drop table [{name}]")
    return bool(present)


def bring_up_to_date(path: Path) -> None:
    """An index an older gputalks built, given what this one's schema adds (`ensure_schema` on a
    copy swapped in) before it is served or published: without the talks' sort keys its table
    page is an error until the next build. Says so on stderr; a build holding the refresh lock,
    or a file that cannot be written, leaves it as it is (the build brings them)."""
    from gputalks.index.runs import RefreshLocked, refresh_lock  # runs reads the archive through this module

    with closing(read_only(path)) as conn:
        have = {row[1] for row in conn.execute("pragma table_info(talks)")}
        searched = {row[1] for row in conn.execute("pragma table_info(talks_fts)")}
    missing = [column for column in TABLES["talks"]["columns"] if column not in have]
    missing += [f"{column} (searched)" for column in FTS["talks"] if searched and column not in searched]
    if not have or not missing:
        return
    index = IndexFiles.of(path).index
    try:
        with refresh_lock(index), building_copy(index) as work:
            open_db(work).close()
    except (RefreshLocked, OSError, sqlite3.Error) as exc:
        print(f"warning: {path} is an index from an older gputalks (no {', '.join(missing)}) and was left as "
              f"it is ({exc}); its next build brings them", file=sys.stderr)
        return
    print(f"{path}: brought up to date (an index from an older gputalks: added {', '.join(missing)})",
          file=sys.stderr)


@contextmanager
def building_copy(path: str | Path) -> Iterator[Path]:
    """Work on a copy of the index and swap it in with an atomic rename.

    Readers (Datasette serving the file immutable, an export) see the old file
    or the new one, never a half-written one; a refresh killed at any point
    (or a full disk) leaves the last good index untouched and no stray file.
    Call with the refresh lock held. The swapped-in file is in
    rollback-journal mode, so no -wal file belongs to it.
    """
    path = Path(path)
    work = path.with_name(path.name + ".building")
    leftovers = (work, Path(f"{work}-journal"), Path(f"{work}-wal"), Path(f"{work}-shm"))
    for stale in leftovers:
        stale.unlink(missing_ok=True)  # left by a killed refresh
    try:
        if path.exists():
            source, target = sqlite3.connect(path), sqlite3.connect(work)
            try:
                source.backup(target)
            finally:
                source.close()
                target.close()
        yield work
        conn = sqlite3.connect(work)
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.close()
        with open(work, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(work, path)
    except BaseException:  # a failed build or a refused swap (a read-only target): no stray file
        for stale in leftovers:
            stale.unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
