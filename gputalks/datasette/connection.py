"""How the served files are read: memory-mapped, and with SQL functions that can touch the
process's memory refused.

Datasette reads through SQLite's page cache, 2 MB per connection, so a page
of a 200 MB index that left it is read again with a system call. Mapping the
file instead reads pages straight from the operating system's cache, which
every worker process and connection share: a search page's SQL takes ~40 %
less time at 100,000 talks. The served file is replaced by a rename, never
rewritten in place, so a mapping never sees it change.
"""

from __future__ import annotations

import os
import sqlite3

from gputalks.search.functions import register

MMAP_BYTES = 2**31 - 2**16  # SQLite's own ceiling (SQLITE_MAX_MMAP_SIZE)
# Functions a reader's SQL never gets: `fts3_tokenizer` reads and writes a tokenizer's address
# (`select hex(fts3_tokenizer('simple'))` leaks a pointer; its two-argument form makes the next
# fts3tokenize query jump to it and kill the worker); `load_extension` loads native code.
REFUSED_FUNCTIONS = frozenset({"fts3_tokenizer", "load_extension"})


def refuse_memory_functions(action: int, name: str | None, function: str | None, *_) -> int:
    """SQLite authorizer: every statement that calls a refused function fails to prepare."""
    if action == sqlite3.SQLITE_FUNCTION and function and function.lower() in REFUSED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def prepare(conn, database, datasette) -> None:
    """Every connection: the refused functions; to a served file, the reader's search (its
    vocabulary read once per file version) and, to an immutable one, the memory map."""
    conn.set_authorizer(refuse_memory_functions)
    db = datasette.databases.get(database)
    if db is None or db.is_memory or not db.path:
        return
    if db.is_mutable:
        register(conn)
        return
    stat = os.stat(db.path)
    register(conn, (db.path, stat.st_size, stat.st_mtime_ns))
    conn.execute(f"pragma mmap_size = {MMAP_BYTES}")


async def read_search_vocabularies(datasette) -> None:
    """At a worker's start, each served file's search vocabulary (0.55 s at 100,000 talks), so
    no reader's first search waits for it; a file that cannot be read says so on its pages."""
    for db in list(datasette.databases.values()):
        if db.is_memory or not db.path or db.is_mutable:
            continue
        try:
            await db.execute_fn(lambda conn: None)  # a connection, prepared: `prepare` reads it
        except sqlite3.Error:
            continue
