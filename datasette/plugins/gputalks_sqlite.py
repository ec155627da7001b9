"""How the served files are read: memory-mapped, and searches planned for them.

Datasette reads through SQLite's page cache, 2 MB per connection, so a page
of a 200 MB index that left it is read again with a system call. Mapping the
file instead reads pages straight from the operating system's cache, which
every worker process and connection share: a search page's SQL takes ~40 %
less time at 100,000 talks. The served file is replaced by a rename, never
rewritten in place, so a mapping never sees it change.
"""

from __future__ import annotations

import re

from datasette import hookimpl
from datasette.utils import escape_fts

MMAP_BYTES = 2**31 - 2**16  # SQLite's own ceiling (SQLITE_MAX_MMAP_SIZE)


def escape_fts_never_empty(query: str) -> str:
    """Datasette's `escape_fts`, except that a search of quotes alone (`"`, `""`) asks for a
    phrase nothing matches: Datasette's gives an empty MATCH, an FTS5 syntax error that readers
    met as an "Invalid SQL" page."""
    return escape_fts(query) or '""'


@hookimpl(trylast=True)  # after Datasette's own hook, which registers its `escape_fts`
def prepare_connection(conn, database, datasette):
    conn.create_function("escape_fts", 1, escape_fts_never_empty, deterministic=True)
    db = datasette.databases.get(database)
    if db is not None and not db.is_memory and not db.is_mutable:
        conn.execute(f"pragma mmap_size = {MMAP_BYTES}")


# Datasette's `?_search=` clause on a table with an FTS index (rowid = the table's rowid).
SEARCHED = re.compile(r"from (?P<table>\S+) where rowid in \(select rowid from (?P<fts>\S+) "
                      r"where (?P=fts) match (?P<match>escape_fts\(:search\)|:search)\)")
# What may follow the search for its index scan to pay: one sort column (not a second page's
# `date < :p or (date = :p and id > :q) order by date desc, id`: 80 ms that way, 30 ms sorted).
SORTED = re.compile(r" order by (?P<column>\S+)(?: desc)? limit \d+")
EXTERNAL_CONTENT = re.compile(r"""content\s*=\s*["'\[]?(?P<table>\w+)""", re.IGNORECASE)
# A search matching more than this share of the rows reads the sort's index.
INDEX_SCAN_SHARE = 0.01


@hookimpl
def startup(datasette):
    """Searches on the served files as SQLite runs them fastest. SQLite's planner takes a
    search's matches to be few: it reads every matching row, sorts them all and keeps a page
    (27 ms for `kernel`'s 14,000 of 100,000 talks). For a common word, scanning the sort's
    index and keeping the first matches is 3.5 ms: the search's `rowid in` becomes `+rowid in`,
    the same rows in the same order, planned differently. And the count of an external-content
    FTS table's matches is the count of the rows they are (1 ms, not 12)."""
    for db in datasette.databases.values():
        if not db.is_memory and not db.is_mutable:
            db.execute = planned(db, db.execute)


def planned(db, execute):
    """`db.execute` running searches as `startup` says."""
    facts: dict[tuple, object] = {}

    async def fact(key: tuple, sql: str, params=None):
        if key not in facts:
            facts[key] = (await execute(sql, params)).rows
        return facts[key]

    async def rows_of(fts: str, table: str) -> bool:
        """Whether `fts` indexes `table`'s own rows (external content)."""
        rows = await fact(("content", fts), "select sql from sqlite_master where name = ?", [fts.strip('[]"')])
        found = EXTERNAL_CONTENT.search(rows[0][0] if rows else "")
        return bool(found) and found["table"] == table.strip('[]"')

    async def indexed(table: str, column: str) -> bool:
        rows = await fact(("indexed", table), "select distinct i.name from pragma_index_list(?) l "
                          "join pragma_index_info(l.name) i on i.seqno = 0", [table.strip('[]"')])
        return column.strip('[]"') in {name for name, in rows}

    async def execute_planned(sql, params=None, *args, **kwargs):
        search = SEARCHED.search(sql)
        if search is None or not await rows_of(search["fts"], search["table"]):
            return await execute(sql, params, *args, **kwargs)
        matches = f"select count(*) from {search['fts']} where {search['fts']} match {search['match']}"
        if sql.strip() == f"select count(*) {search.group(0)}":
            return await db.execute(matches, params, *args, **kwargs)
        sort = SORTED.fullmatch(sql.rstrip(), search.end())
        if sort and sort["column"] != "rowid" and await indexed(search["table"], sort["column"]):
            found = (await db.execute(matches, params)).rows[0][0]
            total = (await db.execute(f"select count(*) from {search['table']}")).rows[0][0]
            if found > total * INDEX_SCAN_SHARE:
                sql = sql.replace(" where rowid in (select rowid from ", " where +rowid in (select rowid from ", 1)
        return await execute(sql, params, *args, **kwargs)

    return execute_planned
