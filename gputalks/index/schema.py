"""The database shape, declared as data in one place and applied by one idempotent step.

Two files: the served index (`talks.db`: talks, speakers, links, history,
chapters, transcripts, curation, and the runs that built it) and beside it the
archive (`talks.archive.db`: every raw document, compressed, and the ledger of
every run and source run). Readers and the nightly copy only need the first.

`ensure_schema` creates what is missing (tables, columns, indexes, FTS, views)
and never drops data, so it runs at the start of every command.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlite_utils

from gputalks.index.order import KEY_OF, ORDERED_BY, SORT_KEYS
from gputalks.index.facet_keys import FACET_KEY_TRIGGERS, FACET_KEYS, complete_facet_keys, create_facet_tables, index_facet_keys

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
                    "etag": str, "last_modified": str, "size": int, "body": bytes, "encoding": str,
                    "base_id": int},
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
    # A problem found again by the next build is the same row, its last run moved on (the archive
    # stores a standing problem once, with how many builds found it); the served index keeps the
    # latest build's alone.
    "problems": {
        "columns": {"id": int, "run_id": int, "source": str, "item": str, "severity": str, "reason": str,
                    "last_run_id": int, "builds": int},
        "pk": "id",
        "foreign_keys": [("run_id", "refresh_runs", "id")],
        "indexes": [["run_id"], ["last_run_id"]],
    },
    "talks": {
        "columns": {"id": str, "title": str, "series": str, "event": str, "year": int, "number": int,
                    "date": str, "duration_s": int, "duration_bucket": str, "description": str,
                    "url": str, "youtube_id": str, "youtube_url": str, "ondemand_url": str,
                    "slides_url": str, "repo_folder": str, "folder_words": str, "speakers": str, "speaker_names": str,
                    "topic": str, "topics": str, "search_terms": str, "search_labels": str, "level": str,
                    "sources": str, "field_sources": str,
                    "transcript": str, "first_seen": str, "gone_since": str,
                    # the keys the talks sort by (order.py), the first their default order
                    "newest_first": str, "longest_first": str, "alphabetical": str},
        "pk": "id",
        # (key, id): Datasette's next page of a sort, `key > :p or ... order by key, id`, is a
        # search of the key's index (0.4 ms, not a sort of every talk: 300 ms at 100,000, so a
        # full CSV stream took 38 s, not 4); a series' talks by length, of the series' index; a
        # series' or an event's newest (its page, its feed) from its own part of an index (a
        # series behind the newest others: 35 ms at 100k scanning the newest first, 0.1 ms so)
        "indexes": [["newest_first", "id"], ["longest_first", "id"], ["alphabetical", "id"], ["date"],
                    ["series", "longest_first", "id"], ["series", "newest_first", "id"],
                    ["event", "newest_first", "id"], ["year"], ["duration_bucket"], ["number"],
                    ["first_seen"], ["youtube_id"], ["sources"], ["topic"],
                    # covering index for the speakers facet (json_each over a narrow index, not the rows)
                    ["speakers"]],
        # The few talks gone from their sources, which the search leaves out by rowid (reading each
        # matching talk's row cost 60 ms of a 20-word query at 100k). Partial: an index of every
        # talk's gone_since would be the planner's pick for `gone_since is null` (a series' page
        # scanned 100,000 talks through it: p95 411 ms at 8 clients, 48 ms without).
        "partial_indexes": {"idx_talks_gone": ("gone_since", "gone_since is not null")},
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
    # How many live talks each series, event, topic and speaker has, and their length: what their
    # pages and feeds say without counting a series' every talk on each request (group_stats.py).
    "group_stats": {"columns": {"kind": str, "name": str, "talks": int, "timed": int, "seconds": int},
                    "pk": ("kind", "name")},
    # The reader's search (search/query.py): known words, and topic aliases.
    "search_words": {"columns": {"word": str}, "pk": "word"},
    "topic_aliases": {"columns": {"alias": str, "topic": str}, "pk": ("alias", "topic")},
    # The concepts a reader's words name (topics.toml [[concepts]], [search]): kind "term" (what
    # the talks say), "topic" (a topic it names), "en" or "fr" (what a reader types), "ignore"
    # (words all talks share), "same" (one way of writing the thing its concept, the first way, names),
    # "lemma" (a French word as written, its concept its lemma: search/vocabulary.py `french_lemmas`),
    # "broad" (a concept or topic, its name the concept, that narrows nothing beside a telling word).
    "search_concepts": {"columns": {"concept": str, "kind": str, "text": str}, "pk": ("concept", "kind", "text")},
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
    # search_terms: the title's compound words; search_labels: series, event, year, topic names;
    # folder_words: the words of the file names in the talk's folder of the lectures repository.
    "talks": ["title", "search_terms", "description", "speaker_names", "search_labels", "folder_words"],
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

ARCHIVE_TABLES = ("raw_documents", "refresh_runs", "source_runs", "problems")
INDEX_TABLES = tuple(name for name in TABLES if name not in ("raw_documents", "source_runs"))
# Tables an index written before the archive had its own file still holds.
LEGACY_INDEX_TABLES = ("raw_documents", "source_runs")

TALK_FIELDS = [c for c in TABLES["talks"]["columns"] if c not in ("id", "first_seen", "gone_since")]
# Derived from the other fields for search and order only: kept up to date, not logged as changes.
UNLOGGED_FIELDS = frozenset({"search_terms", "search_labels", "folder_words", *SORT_KEYS.values()})


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
        create_facet_tables(db)
    yield
    if keyed:
        complete_facet_keys(db)
    for columns in TABLES[table].get("indexes", []):
        db.table(table).create_index(columns, if_not_exists=True)
    if table in FTS:
        db.table(table).enable_fts(FTS[table], create_triggers=True, tokenize="porter", replace=True)


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
            if name == "talks" and missing.keys() & set(SORT_KEYS.values()):  # an index from before them
                _fill_sort_keys(db)
        for columns in spec.get("indexes", []):
            table.create_index(columns, if_not_exists=True)
        for index, (column, where) in spec.get("partial_indexes", {}).items():
            db.execute(f"create index if not exists [{index}] on [{name}]([{column}]) where {where}")
    if tables != INDEX_TABLES:
        return
    for name, columns in FTS.items():
        fts = db.table(name).detect_fts()
        if fts is None or [c for c in db.table(fts).columns_dict] != columns:  # new, or its columns changed
            db.table(name).enable_fts(columns, create_triggers=True, tokenize="porter", replace=fts is not None)
    db.execute(f"create virtual table if not exists [{TRANSCRIPTS_FTS}] "
               "using fts5(text, tokenize='porter', content='')")
    if not db.table(FACET_KEYS["values"]).exists() or "newest_first" not in db.table(FACET_KEYS["items"]).columns_dict:
        index_facet_keys(db)
    for name, sql in VIEWS.items():
        stored = db.execute("select sql from sqlite_master where type = 'view' and name = ?", [name]).fetchone()
        if stored is None or sql.strip() not in stored[0]:
            db.create_view(name, sql.strip(), replace=True)


def _fill_sort_keys(db: sqlite_utils.Database) -> None:
    """Each talk's sort keys (order.py), in an index from before them; and the indexes of the keys
    they replace gone (`date_key`, a series' talks by duration)."""
    for key, make in KEY_OF.items():
        db.register_function(make, name=key, deterministic=True, replace=True)
    db.execute("update talks set " + ", ".join(
        f"[{key}] = [{key}](coalesce({', '.join(f'[{c}]' for c in columns)}), id)" if len(columns) > 1
        else f"[{key}] = [{key}]([{columns[0]}], id)" for key, columns in ORDERED_BY.items()))
    for replaced in ("idx_talks_date_key_id", "idx_talks_series_duration_s"):
        db.execute(f"drop index if exists [{replaced}]")


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
