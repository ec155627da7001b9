"""The database shape, declared as data in one place and applied by one idempotent step.

Two files: the served index (`talks.db`: talks, speakers, links, history,
chapters, transcripts, curation, and the runs that built it) and beside it the
archive (`talks.archive.db`: every raw document, compressed, and the ledger of
every run and source run). Readers and the nightly copy only need the first.

`ensure_schema` creates what is missing (tables, columns, indexes, FTS, views)
and never drops data, so it runs at the start of every command.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import sqlite_utils
from sqlite_utils.db import DescIndex

# table -> columns, primary key, foreign keys, indexes
TABLES: dict[str, dict[str, Any]] = {
    "refresh_runs": {
        "columns": {"id": int, "started_at": str, "finished_at": str, "mode": str, "status": str,
                    "exit_code": int, "sources": str, "counts": str, "error": str,
                    "talks_written": int, "changes": int, "requests": int, "bytes": int,
                    "inputs": str, "problems_run": int,
                    # what the home page shows, counted once per build (the served index's rows only)
                    "live_talks": int, "series_count": int, "video_hours": int},
        "pk": "id",
    },
    "raw_documents": {
        "columns": {"id": int, "source": str, "method": str, "url": str, "request_body": str,
                    "status": int, "content_type": str, "fetched_at": str, "sha256": str,
                    "etag": str, "last_modified": str, "size": int, "body": bytes, "encoding": str},
        "pk": "id",
        "indexes": [["source", "method", "url"], ["sha256"]],
    },
    "source_runs": {
        "columns": {"id": int, "run_id": int, "source": str, "status": str, "document_ids": str,
                    "items": int, "error": str, "started_at": str, "finished_at": str,
                    "config": str, "item_keys": str, "carried": str},
        "pk": "id",
        "foreign_keys": [("run_id", "refresh_runs", "id")],
        "indexes": [["source", "status", "id"]],
    },
    "problems": {
        "columns": {"id": int, "run_id": int, "source": str, "item": str, "severity": str, "reason": str},
        "pk": "id",
        "foreign_keys": [("run_id", "refresh_runs", "id")],
        "indexes": [["run_id"]],
    },
    "talks": {
        "columns": {"id": str, "title": str, "series": str, "event": str, "year": int, "number": int,
                    "date": str, "duration_s": int, "duration_bucket": str, "description": str,
                    "url": str, "youtube_id": str, "youtube_url": str, "ondemand_url": str,
                    "slides_url": str, "repo_folder": str, "speakers": str, "speaker_names": str,
                    "topic": str, "topics": str, "search_terms": str, "search_labels": str, "level": str,
                    "sources": str, "field_sources": str,
                    "transcript": str, "first_seen": str, "gone_since": str,
                    # the default order's key, "<date> <id>" ("" for no date): never null, never tied
                    "date_key": str},
        "pk": "id",
        # (date_key desc, id): Datasette's next page of the default order, `date_key < :p or ...
        # order by date_key desc, id`, is a scan of this index that stops at the page (1 ms, not
        # a sort of every talk: 300 ms at 100,000, so a full CSV stream took 38 s, not 4)
        "indexes": [[DescIndex("date_key"), "id"], ["date"], ["series", "duration_s"], ["event"], ["year"], ["duration_bucket"], ["number"],
                    ["first_seen"], ["youtube_id"], ["sources"], ["topic"],
                    # covering index for the speakers facet (json_each over a narrow index, not the rows)
                    ["speakers"]],
    },
    "speakers": {
        "columns": {"id": str, "name": str, "profile_url": str, "bio": str, "affiliation": str},
        "pk": "id",
    },
    "talk_speakers": {
        "columns": {"talk_id": str, "speaker_id": str, "position": int},
        "pk": ("talk_id", "speaker_id"),
        "foreign_keys": [("talk_id", "talks", "id"), ("speaker_id", "speakers", "id")],
        "indexes": [["speaker_id"]],
    },
    "links": {
        "columns": {"talk_id": str, "kind": str, "url": str, "label": str, "source": str},
        "pk": ("talk_id", "kind", "url"),
        "foreign_keys": [("talk_id", "talks", "id")],
    },
    "talk_sources": {
        "columns": {"source": str, "item_key": str, "talk_id": str, "method": str, "score": float,
                    "url": str, "title": str},
        "pk": ("source", "item_key"),
        "foreign_keys": [("talk_id", "talks", "id")],
        "indexes": [["talk_id"]],
    },
    "talk_changes": {
        "columns": {"id": int, "run_id": int, "changed_at": str, "talk_id": str, "field": str,
                    "old_value": str, "new_value": str},
        "pk": "id",
        "foreign_keys": [("run_id", "refresh_runs", "id")],
        # field, run_id: the feeds' newest changes of a kind without reading every change
        "indexes": [["talk_id"], ["changed_at"], ["field", "run_id"]],
    },
    "chapters": {
        "columns": {"talk_id": str, "position": int, "start_s": float, "end_s": float, "title": str,
                    "deep_link": str},
        "pk": ("talk_id", "position"),
        "foreign_keys": [("talk_id", "talks", "id")],
    },
    "segments": {
        "columns": {"talk_id": str, "position": int, "start_s": float, "end_s": float, "text": str,
                    "chapter": str, "language": str, "automatic": int, "deep_link": str},
        "pk": ("talk_id", "position"),
        "foreign_keys": [("talk_id", "talks", "id")],
    },
    # Each talk's related talks, ranked by the build (related.py): a JSON list of ids, best first.
    "talk_related": {"columns": {"talk_id": str, "related": str}, "pk": "talk_id"},
    # The reader's search (datasette/plugins/gputalks_query.py): known words, and topic aliases.
    "search_words": {"columns": {"word": str}, "pk": "word"},
    "topic_aliases": {"columns": {"alias": str, "topic": str}, "pk": ("alias", "topic")},
    "curated_tables": {
        "columns": {"id": str, "title": str, "page": str, "kind": str, "columns": str, "position": int},
        "pk": "id",
    },
    "curated_rows": {
        "columns": {"table_id": str, "position": int, "key": str, "talk_id": str, "group_name": str,
                    "cells": str},
        "pk": ("table_id", "position"),
        "foreign_keys": [("table_id", "curated_tables", "id")],
    },
}

# table -> columns searched; porter stemming so "kernels" finds "kernel".
FTS: dict[str, list[str]] = {
    # search_terms: the title's compound words; search_labels: series, event, year, topic names.
    "talks": ["title", "search_terms", "description", "speaker_names", "search_labels"],
    # talk_id: search inside talks narrows passages to a few talks in the MATCH itself, by
    # the id after its source prefix (a phrase of rare words: "youtube" is in every row),
    # with the column's weight 0 in bm25 (metadata.json's search_inside_talks).
    "segments": ["text", "talk_id"],
    "chapters": ["title"],
}
# Each talk's whole transcript as one document, rowid = the talk's rowid: search
# inside talks ranks talks here first (1,200 documents, not 169,000 passages).
# Contentless, so the words are not stored twice; rebuilt from `segments` by
# `index_transcripts` whenever a build changes them.
TRANSCRIPTS_FTS = "transcripts_fts"

VIEWS: dict[str, str] = {
    "unlinked_items": """
        select source, item as item_key, reason
        from problems
        where severity = 'unlinked'
          and run_id = (select problems_run from refresh_runs where finished_at is not null
                        order by id desc limit 1)
    """,
}

# Each talk's facet values as one short string, kept in step with `talks` by triggers: the
# served index counts a search's facets from these in one pass (gputalks_facets.py), not by
# grouping the matching talks once per facet. Every (facet, value) has a code, and its `key`,
# one character (code point code + 256, past the surrogates): counting the matching talks' keys'
# characters counts their facets (a test holds metadata.json's talks facets to these columns).
# `talk_items`: each talk under each of its topics, speakers and sources in the default order
# (date_key): a filter on one, or a topic's newest talks, is a range of an index, not a scan.
FACET_KEYS: dict[str, Any] = {"keys": "talk_facet_keys", "values": "talk_facet_values", "items": "talk_items",
                              "of": "talks", "columns": ["series", "event", "year", "duration_bucket"],
                              "item_columns": ["topics", "speakers", "sources"]}
FACET_KEY_TRIGGERS = {"ai": "after insert", "au": "after update", "ad": "after delete"}


def facet_values_sql(alias: str, source: str = "", items_only: bool = False) -> str:
    """SQL for (facet, value) rows of the row `alias` of a trigger (`new`), or of every row of `source`."""
    tables = f"[{source}] {alias}, " if source else ""
    # `+column`: values without the column's affinity, compared as they are stored (2024 = 2024)
    rows = [f"select '{column}' as facet, +{alias}.[{column}] as value {'from ' + tables[:-2] if source else ''} "
            f"where {alias}.[{column}] is not null" for column in FACET_KEYS["columns"]]
    rows += [f"select '{column}' as facet, j.value as value from {tables}json_each(iif(json_valid({alias}.[{column}]), "
             f"{alias}.[{column}], '[]')) j" for column in FACET_KEYS["item_columns"]]
    return " union all ".join(rows[len(FACET_KEYS["columns"]):] if items_only else rows)


def facet_keys_sql(alias: str) -> str:
    """SQL for the keys of the talk `alias` (a table alias, or `new` in a trigger)."""
    return (f"(select group_concat(v.key, '') from ({facet_values_sql(alias)}) n "
            f"join [{FACET_KEYS['values']}] v on v.facet = n.facet and v.value = n.value)")


def talk_items_sql(alias: str, source: str = "") -> str:
    """SQL for the `talk_items` rows (code, date_key, talk) of the talk `alias`, or of every row of `source`, never
    looping over the values (a join did: 0.25 ms a trigger, 48 s to fill at 100k): codes looked up, talks first."""
    values = FACET_KEYS["values"]
    if not source:
        return (f"select (select v.code from [{values}] v where v.facet = n.facet and v.value = n.value) as code, "
                f"{alias}.date_key, {alias}.rowid from ({facet_values_sql(alias, items_only=True)}) n")
    return " union all ".join(
        f"select v.code, {alias}.date_key, {alias}.rowid from [{source}] {alias} cross join json_each("
        f"iif(json_valid({alias}.[{column}]), {alias}.[{column}], '[]')) j cross join [{values}] v "
        f"on v.facet = '{column}' and v.value = j.value" for column in FACET_KEYS["item_columns"])


def index_facet_keys(db: sqlite_utils.Database) -> None:
    """Write every talk's facet keys again and (re)create the triggers that keep them in step."""
    _create_facet_tables(db)
    _fill_facet_keys(db)
    _create_facet_triggers(db)


def _create_facet_tables(db: sqlite_utils.Database) -> None:
    """The facet keys' tables, empty, without the triggers that would fill them."""
    keys, values, items = FACET_KEYS["keys"], FACET_KEYS["values"], FACET_KEYS["items"]
    for suffix in FACET_KEY_TRIGGERS:
        db.execute(f"drop trigger if exists [{keys}_{suffix}]")
    db.execute(f"drop table if exists [{keys}]")
    db.execute(f"drop table if exists [{values}]")
    db.execute(f"drop table if exists [{items}]")
    db.execute(f"create table [{items}] (code integer not null, date_key text not null, talk integer not null, "
               "primary key (code, date_key, talk)) without rowid")
    db.execute(f"""create table [{values}] (code integer primary key, facet text not null, value,
                   key text generated always as (char(code + 256 + iif(code + 256 >= 55296, 2048, 0))) virtual,
                   unique (facet, value))""")
    db.execute(f"create table [{keys}] (rowid integer primary key, keys text)")


def _fill_facet_keys(db: sqlite_utils.Database) -> None:
    """Every talk's facet keys, from its row, in SQL."""
    keys, values, source = FACET_KEYS["keys"], FACET_KEYS["values"], FACET_KEYS["of"]
    db.execute(f"insert or ignore into [{values}] (facet, value) {facet_values_sql('t', source)}")
    db.execute(f"insert into [{keys}] (rowid, keys) select t.rowid, {facet_keys_sql('t')} from [{source}] t")
    _fill_talk_items(db)


def _fill_talk_items(db: sqlite_utils.Database) -> None:
    db.execute(f"insert or ignore into [{FACET_KEYS['items']}] {talk_items_sql('t', FACET_KEYS['of'])}")


def _create_facet_triggers(db: sqlite_utils.Database) -> None:
    keys, values, items, source = (FACET_KEYS[name] for name in ("keys", "values", "items", "of"))
    written = (f"insert or ignore into [{values}] (facet, value) {facet_values_sql('new')}; "
               f"insert or replace into [{keys}] (rowid, keys) values (new.rowid, {facet_keys_sql('new')}); "
               f"insert or ignore into [{items}] (code, date_key, talk) {talk_items_sql('new')};")
    removed = f"delete from [{items}] where talk = old.rowid and date_key = old.date_key and code in " \
              f"(select code from ({talk_items_sql('old')}));"
    bodies = {"after insert": written, "after update": removed + " " + written,
              "after delete": f"delete from [{keys}] where rowid = old.rowid; {removed}"}
    for suffix, event in FACET_KEY_TRIGGERS.items():
        db.execute(f"create trigger [{keys}_{suffix}] {event} on [{source}] begin {bodies[event]} end")


def facet_key(code: int) -> str:
    """The one character of a facet value's code: the values table's `key` column, in Python."""
    return chr(code + 256 + (2048 if code + 256 >= 55296 else 0))


@lru_cache(maxsize=16384)
def _json_items(text: str | None) -> tuple[Any, ...]:
    """What SQLite's json_each gives of a column's JSON (nothing of what is not JSON), read
    once for each distinct text: a build's talks share few lists of topics and sources."""
    try:
        value = json.loads(text) if text is not None else []
    except (ValueError, TypeError):
        return ()
    if isinstance(value, list):
        return tuple(value)
    return tuple(value.values()) if isinstance(value, dict) else (value,)


def facet_values(row: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """A talks row's (facet, value) pairs with a key: what `facet_values_sql` gives, less null items."""
    for column in FACET_KEYS["columns"]:
        if (value := row.get(column)) is not None:
            yield column, value
    for column in FACET_KEYS["item_columns"]:
        for value in _json_items(row.get(column)):
            if value is not None:
                yield column, value


class FacetCoder:
    """Codes each (facet, value) the first time a row has it (1, 2, ...), and gives each row its
    keys and the (code, facet, value) rows it coded first. A build codes its talks as they are
    made and writes their keys with them, instead of `index_facet_keys` reading every row
    again in SQL once they are loaded (1.5 s at 100,000 talks)."""

    def __init__(self) -> None:
        self.keys: dict[tuple[str, Any], str] = {}

    def code(self, row: dict[str, Any]) -> tuple[str, tuple[tuple[int, str, Any], ...]]:
        keys, found, new = self.keys, [], []
        for pair in facet_values(row):
            key = keys.get(pair)
            if key is None:
                code = len(keys) + 1
                key = keys[pair] = facet_key(code)
                new.append((code, *pair))
            found.append(key)
        return "".join(found), tuple(new)


def write_facet_keys(db: sqlite_utils.Database, keys: list[tuple[str, str]],
                     values: list[tuple[int, str, Any]]) -> None:
    """Write talks' facet keys, (keys, talk id), coded by a `FacetCoder` whose new (code, facet,
    value) rows are `values`, inside a `bulk_load` of the talks."""
    db.conn.executemany(f"insert into [{FACET_KEYS['values']}] (code, facet, value) values (?, ?, ?)", values)
    db.conn.executemany(f"insert into [{FACET_KEYS['keys']}] (rowid, keys) "
                        f"select rowid, ? from [{FACET_KEYS['of']}] where id = ?", keys)


ARCHIVE_TABLES = ("raw_documents", "refresh_runs", "source_runs", "problems")
INDEX_TABLES = tuple(name for name in TABLES if name not in ("raw_documents", "source_runs"))
# Tables an index written before the archive had its own file still holds.
LEGACY_INDEX_TABLES = ("raw_documents", "source_runs")

TALK_FIELDS = [c for c in TABLES["talks"]["columns"] if c not in ("id", "first_seen", "gone_since")]
# Derived from the other fields for search and order only: kept up to date, not logged as changes.
UNLOGGED_FIELDS = frozenset({"search_terms", "search_labels", "date_key"})


@contextmanager
def bulk_load(db: sqlite_utils.Database, table: str) -> Iterator[None]:
    """Load many rows into `table` the fast way: without its secondary indexes
    and FTS triggers, which are rebuilt once at the end (as building an index
    over a full table beats updating it row by row), and for the talks without
    the facet keys' triggers: keys written with the rows (`write_facet_keys`)
    are kept, else computed once at the end. Inside a transaction."""
    for columns in TABLES[table].get("indexes", []):
        db.execute(f"drop index if exists [idx_{table}_{'_'.join(columns)}]")
    keyed = table == FACET_KEYS["of"]
    for suffix in FACET_KEY_TRIGGERS:  # the FTS triggers' suffixes too
        db.execute(f"drop trigger if exists [{table}_{suffix}]")
    if keyed:
        _create_facet_tables(db)
    yield
    if keyed:
        _complete_facet_keys(db)
    for columns in TABLES[table].get("indexes", []):
        db.table(table).create_index(columns, if_not_exists=True)
    if table in FTS:
        db.table(table).enable_fts(FTS[table], create_triggers=True, tokenize="porter", replace=True)


def _complete_facet_keys(db: sqlite_utils.Database) -> None:
    """After a bulk load: the facet keys in SQL, unless every talk's were written with it
    (`write_facet_keys`); then the triggers."""
    keys, source = FACET_KEYS["keys"], FACET_KEYS["of"]
    written, talks = db.execute(f"select (select count(*) from [{keys}]), (select count(*) from [{source}])").fetchone()
    if written != talks:
        db.execute(f"delete from [{keys}]")
        db.execute(f"delete from [{FACET_KEYS['values']}]")
        db.execute(f"delete from [{FACET_KEYS['items']}]")
        _fill_facet_keys(db)
    else:
        _fill_talk_items(db)
    _create_facet_triggers(db)


def ensure_schema(db: sqlite_utils.Database, tables: tuple[str, ...] = INDEX_TABLES) -> None:
    """Create or complete the tables (the index's by default), their indexes,
    FTS tables and views. Idempotent; writes nothing when all is there."""
    for name in tables:
        spec, table = TABLES[name], db.table(name)
        if not table.exists():
            table.create(spec["columns"], pk=spec["pk"], foreign_keys=spec.get("foreign_keys"))
        else:
            missing = {c: t for c, t in spec["columns"].items() if c not in table.columns_dict}
            for column, col_type in missing.items():
                table.add_column(column, col_type)
        for columns in spec.get("indexes", []):
            table.create_index(columns, if_not_exists=True)
    if tables != INDEX_TABLES:
        return
    for name, columns in FTS.items():
        fts = db.table(name).detect_fts()
        if fts is None or [c for c in db.table(fts).columns_dict] != columns:  # new, or its columns changed
            db.table(name).enable_fts(columns, create_triggers=True, tokenize="porter", replace=fts is not None)
    db.execute(f"create virtual table if not exists [{TRANSCRIPTS_FTS}] "
               "using fts5(text, tokenize='porter', content='')")
    if not db.table(FACET_KEYS["values"]).exists() or not db.table(FACET_KEYS["items"]).exists():
        index_facet_keys(db)
    for name, sql in VIEWS.items():
        stored = db.execute("select sql from sqlite_master where type = 'view' and name = ?", [name]).fetchone()
        if stored is None or sql.strip() not in stored[0]:
            db.create_view(name, sql.strip(), replace=True)


def transcripts_indexed(db: sqlite_utils.Database) -> bool:
    """Whether the talk-level transcript index is in step with `segments` as far as a
    cheap look can tell: both empty or both not (a new index, or one from before it)."""
    has_segments = db.execute("select exists (select 1 from segments)").fetchone()[0]
    has_documents = db.execute(f"select exists (select 1 from [{TRANSCRIPTS_FTS}])").fetchone()[0]
    return bool(has_segments) == bool(has_documents)


def index_transcripts(db: sqlite_utils.Database) -> None:
    """Rebuild the talk-level transcript index from `segments` (about 3 s for 13 M words)."""
    db.execute(f"insert into [{TRANSCRIPTS_FTS}]([{TRANSCRIPTS_FTS}]) values ('delete-all')")
    db.execute(f"""insert into [{TRANSCRIPTS_FTS}](rowid, text)
                   select t.rowid, group_concat(s.text, ' ') from talks t join segments s on s.talk_id = t.id
                   group by t.id""")
