"""Writing merged talks as changes: only what differs is written, and every
difference is kept in `talk_changes` (run, talk, field, old, new).

A talk no longer produced by any source is marked `gone_since`, never
deleted; one that comes back is unmarked. Nothing changed -> nothing written.
"""

from __future__ import annotations

import json

from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from itertools import islice
from operator import itemgetter
from typing import Any

import sqlite_utils
from sqlite_utils.db import jsonify_if_needed

from gputalks.index.enrich import beyond_own_text, search_labels, search_terms
from gputalks.index.merge import MergedTalk, speaker_id
from gputalks.index.order import order_keys
from gputalks.index.facet_keys import write_facet_keys
from gputalks.index.stats import WriteStats
from gputalks.index.schema import TABLES, TALK_FIELDS, UNLOGGED_FIELDS, bulk_load

NEW, GONE, BACK = "_new", "_gone", "_back"


def _stringify(value: Any) -> str | None:
    return None if value is None else str(value)


# Talks diffed and written together: a build holds one chunk of merged rows, however large the index.
CHUNK = 2000

# The tables of rows that hang off a talk: (table, key, the talk's rows). Each is synced
# for a chunk's talks only, so a gone talk keeps what hangs off it.
SATELLITES: list[tuple[str, list[str], Callable[[MergedTalk], list[dict[str, Any]]]]] = [
    ("talk_speakers", ["talk_id", "speaker_id"],
     lambda t: [{"talk_id": t.row["id"], "speaker_id": speaker_id(s.name), "position": n}
                for n, s in enumerate(t.speakers)]),
    ("links", ["talk_id", "kind", "url"], lambda t: t.links),
    # A gone talk keeps its sources too: the curation still finds it (and says it is gone).
    ("talk_sources", ["source", "item_key"], lambda t: t.sources),
    ("chapters", ["talk_id", "position"], lambda t: t.chapters),
    ("segments", ["talk_id", "position"], lambda t: t.segments),
]
# What a fresh build loads the fast way (`bulk_load`): the talks and every table written per talk.
FRESH_LOADS = ["talks", "talk_changes", *(table for table, _, _ in SATELLITES)]


@dataclass(frozen=True)
class Writing:
    """What a build writes as: its run, its time, and whether what it lacks is kept (`keep`: a
    build without its archive knows only what it fetched, so nothing it did not see is marked
    gone and no link or source row is deleted)."""

    run_id: int
    when: str
    keep: bool = False


def apply_talks(db: sqlite_utils.Database, run_id: int, when: str, merged: Iterable[MergedTalk],
                keep: bool = False) -> WriteStats:
    """Bring talks and the rows that hang off them to `merged`, a chunk at a time
    (`merged` may be a generator: each chunk is let go of once written). Call
    inside a transaction. `keep`: see Writing."""
    writing = Writing(run_id, when, keep)
    stats = WriteStats()
    gone_since_by_id = dict(db.execute("select id, gone_since from talks").fetchall())
    known_speakers = {row["id"]: row for row in db.query("select * from speakers")}
    seen: set[str] = set()
    # A first build, or a rebuild from scratch: no talk has rows yet (foreign keys are on), so
    # nothing is read back to compare, and each table's indexes and FTS are built once at the end.
    fresh = not gone_since_by_id
    with ExitStack() as loading:
        for table in FRESH_LOADS if fresh else ():
            loading.enter_context(bulk_load(db, table))
        rewriting = fresh
        for chunk in batched(merged, CHUNK):
            changes = _apply_chunk(db, writing, chunk, stats, known_speakers, fresh)
            seen.update(t.row["id"] for t in chunk)
            write_rows(db, "talk_changes", changes)
            stats.changes += len(changes)
            if not rewriting and stats.talks_written * 2 > len(seen):
                # Most talks change (a new topic list, a parser that reads a field anew): the talks'
                # FTS index, facet keys and indexes are rebuilt once at the end, not row by row
                # through their triggers (0.23 ms a talk: 60 -> 16 s when 100,000 talks changed).
                loading.enter_context(bulk_load(db, "talks"))
                rewriting = True
    gone = [talk_id for talk_id, since in ({} if keep else gone_since_by_id).items() if talk_id not in seen and not since]
    update_rows(db, "talks", [(talk_id, {"gone_since": when}) for talk_id in gone])
    changes = [_change(run_id, when, talk_id, GONE, None, when) for talk_id in gone]
    stats.gone += len(gone)
    stats.talks_written += len(gone)
    write_rows(db, "talk_changes", changes)
    stats.changes += len(changes)
    return stats


def batched(items: Iterable[MergedTalk], size: int) -> Iterator[list[MergedTalk]]:
    """Lists of `size` (itertools.batched, from Python 3.12)."""
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


def _change(run_id: int, when: str, talk_id: str, name: str, old: Any, new: Any) -> dict[str, Any]:
    return {"run_id": run_id, "changed_at": when, "talk_id": talk_id, "field": name,
            "old_value": _stringify(old), "new_value": _stringify(new)}


# What a talk knows that a fresher answer without it must not erase: a flat listing without
# durations, an info dict of nulls, an emptied abstract. Links and ids (youtube_id, url, ...) are
# not among them: an override or a relinking may rightly remove those.
KEEP_KNOWN = ("title", "duration_s", "duration_bucket", "date", "year", "description", "speakers",
              "speaker_names", "event", "level", "topic", "slides_url", "repo_folder", "folder_words")


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == "[]"


def keep_known_values(row: dict[str, Any], old: dict[str, Any], run_id: int) -> int:
    """Keep in `row` each value `old` knows that `row` lacks; its provenance in field_sources
    says so ("youtube; kept in run 42: the source gave none"). The number kept."""
    kept = [name for name in KEEP_KNOWN if _empty(row.get(name)) and not _empty(old.get(name))]
    if not kept:
        return 0
    sources, before = json.loads(row.get("field_sources") or "{}"), json.loads(old.get("field_sources") or "{}")
    for name in kept:
        row[name] = old[name]
        origin = str(before.get(name, "an earlier run")).split("; kept in run")[0]
        sources[name] = f"{origin}; kept in run {run_id}: the source gave none"
    row["field_sources"] = json.dumps(sources, sort_keys=True)
    return len(kept)


def derive_fields(row: dict[str, Any]) -> None:
    """The fields a talks row derives from the others, for search and order, from what it holds
    once older values are kept in it (a title kept through a night of empty ones is still found
    by its words and sorted by it). Written in the build's process: merging beside writing, the
    worker is the slower side (it waited 0.6 s for the worker at 100,000 talks)."""
    row["search_terms"] = search_terms(row["title"])
    row["folder_words"] = beyond_own_text(row)
    row["search_labels"] = search_labels(row)
    row.update(order_keys(row))


def _apply_chunk(db: sqlite_utils.Database, writing: Writing, chunk: list[MergedTalk], stats: WriteStats,
                 known_speakers: dict[str, dict[str, Any]], fresh: bool) -> list[dict[str, Any]]:
    """Write one chunk of talks (`fresh`: none of them has rows yet); its changes."""
    run_id, when = writing.run_id, writing.when
    ids = [t.row["id"] for t in chunk]
    existing = {} if fresh else {row["id"]: row for row in _rows_where(db, "talks", "id", ids)}
    changes: list[dict[str, Any]] = []
    new_rows, updates = [], []
    for talk in chunk:
        row = talk.row
        old = existing.get(row["id"])
        if old is None:
            derive_fields(row)
            row.update(first_seen=when, gone_since=None)  # the merged row itself: no copy of every row
            new_rows.append(row)
            changes.append(_change(run_id, when, row["id"], NEW, None, row["title"]))
            continue
        stats.kept_values += keep_known_values(row, old, run_id)
        derive_fields(row)
        diff = {k: row.get(k) for k in TALK_FIELDS if row.get(k) != old.get(k)}
        changes.extend(_change(run_id, when, row["id"], name, old.get(name), value) for name, value in diff.items()
                       if name not in UNLOGGED_FIELDS)
        if old.get("gone_since"):
            diff["gone_since"] = None
            changes.append(_change(run_id, when, row["id"], BACK, old["gone_since"], None))
        if diff:
            updates.append((row["id"], diff))
    update_rows(db, "talks", updates)
    stats.talks_written += len(updates)
    write_rows(db, "talks", new_rows)
    if fresh:  # keys coded as the talks were made; any talk without them: all computed at the end
        write_facet_keys(db, [(t.facet_keys, t.row["id"]) for t in chunk if t.facet_keys is not None],
                         [value for t in chunk for value in t.facet_values])
    stats.new += len(new_rows)
    stats.talks_written += len(new_rows)
    _sync_speakers(db, chunk, known_speakers)
    for table, key, rows_of in SATELLITES:
        if sync_rows(db, table, key, [r for t in chunk for r in rows_of(t)], talk_ids=ids, fresh=fresh,
                     keep=writing.keep) \
                and table == "segments":
            stats.transcripts_changed = True
    return changes


def update_rows(db: sqlite_utils.Database, table: str, updates: list[tuple[str, dict[str, Any]]]) -> None:
    """Rows' changed columns by id, (id, values): one prepared UPDATE for each set of columns
    changed together, not a statement a row (a rebuild where all 100,000 talks changed: 0.97x,
    median of 4 pairs). sqlite-utils' Table.update also reads the table's columns twice and the
    row back: 0.45 ms a talk, 46 s when 100,000 talks changed."""
    by_columns: dict[tuple[str, ...], list[list[Any]]] = {}
    for row_id, values in updates:
        by_columns.setdefault(tuple(values), []).append([jsonify_if_needed(v) for v in values.values()] + [row_id])
    for columns, parameters in by_columns.items():
        db.conn.executemany(f"update [{table}] set {', '.join(f'[{column}] = ?' for column in columns)} where id = ?",
                            parameters)


def _rows_where(db: sqlite_utils.Database, table: str, column: str, values: list[str]) -> Iterator[dict[str, Any]]:
    return db.query(f"select * from [{table}] where [{column}] in ({', '.join('?' * len(values))})", values)


def _sync_speakers(db: sqlite_utils.Database, merged: list[MergedTalk], known: dict[str, dict[str, Any]]) -> None:
    """New people are added (and to `known`); known ones get missing profile URLs and
    bios filled, never erased by a later source that lacks them."""
    inserts: dict[str, dict[str, Any]] = {}
    updates: dict[str, dict[str, Any]] = {}
    for s in (s for t in merged for s in t.speakers):
        sid = speaker_id(s.name)
        row = {"id": sid, "name": s.name, "profile_url": s.profile_url, "bio": s.bio, "affiliation": s.affiliation}
        current = known.get(sid) or inserts.get(sid)
        if current is None:
            inserts[sid] = row
            continue
        gaps = {k: row[k] for k in ("profile_url", "bio", "affiliation") if row[k] and not current.get(k)}
        if gaps:
            current.update(gaps)
            if sid in known:
                updates.setdefault(sid, {}).update(gaps)
    if inserts:
        write_rows(db, "speakers", list(inserts.values()))
        known.update(inserts)
    update_rows(db, "speakers", list(updates.items()))


def sync_rows(db: sqlite_utils.Database, table: str, key: list[str], rows: list[dict[str, Any]],
              talk_ids: list[str] | None = None, fresh: bool = False, keep: bool = False) -> bool:
    """Make `table` equal to `rows`, writing only differences; whether anything was
    written. With `talk_ids`, only the rows of those talks are compared (and may be deleted);
    `fresh`: those talks have no rows yet, so there is nothing to compare (a row repeated
    in `rows` is written once, the last one, as when compared); `keep`: no row is deleted."""
    if fresh:
        write_rows(db, table, rows, upsert_key=key)
        return bool(rows)
    current_rows = db.query(f"select * from [{table}]") if talk_ids is None \
        else _rows_where(db, table, "talk_id", talk_ids)
    current = {tuple(r[k] for k in key): r for r in current_rows}
    wanted = {tuple(r[k] for k in key): r for r in rows}
    stale = [] if keep else list(current.keys() - wanted.keys())
    if stale:
        db.conn.executemany(f"delete from [{table}] where " + " and ".join(f"[{c}] = ?" for c in key), stale)
    changed = [r for k, r in wanted.items()
               if k not in current or any(current[k].get(c) != v for c, v in r.items())]
    if changed:
        write_rows(db, table, changed, upsert_key=key)
    return bool(stale or changed)


def write_rows(db: sqlite_utils.Database, table: str, rows: list[dict[str, Any]],
               upsert_key: list[str] | None = None) -> None:
    """Bulk insert (or upsert on `upsert_key`) with one prepared statement.

    The hot path of a rebuild: the columns are known from the schema, so rows
    go straight to executemany instead of through sqlite-utils' per-value
    type detection (a third of a 100,000-talk rebuild's time otherwise).
    """
    if not rows:
        return
    columns = [c for c in TABLES[table]["columns"] if c in rows[0]]  # rows of one table share keys
    names = ", ".join(f"[{c}]" for c in columns)
    sql = f"insert into [{table}] ({names}) values ({', '.join('?' * len(columns))})"
    if upsert_key:
        updates = ", ".join(f"[{c}] = excluded.[{c}]" for c in columns if c not in upsert_key) or None
        conflict = ", ".join(f"[{c}]" for c in upsert_key)
        sql += f" on conflict ({conflict}) do " + (f"update set {updates}" if updates else "nothing")
    try:  # itemgetter reads a row's columns in C; every row of a table has them all
        parameters = list(map(itemgetter(*columns), rows)) if len(columns) > 1 else [(r[columns[0]],) for r in rows]
    except KeyError:  # one that does not: None in the columns it lacks
        parameters = [[r.get(c) for c in columns] for r in rows]
    db.conn.executemany(sql, parameters)
