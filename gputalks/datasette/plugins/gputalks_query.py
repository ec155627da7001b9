"""The reader's search on every connection to a served gputalks index: the SQL function
`gputalks_search(q, mode)` of gputalks.search.query, its vocabulary read once per file version."""

from __future__ import annotations

import os

from datasette import hookimpl

from gputalks.search.query import register


@hookimpl
def prepare_connection(conn, database, datasette):
    db = datasette.databases.get(database)
    if db is None or db.is_memory or not db.path:
        return
    if db.is_mutable:
        register(conn)
        return
    stat = os.stat(db.path)
    register(conn, (db.path, stat.st_size, stat.st_mtime_ns))
