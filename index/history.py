"""Writing merged talks as changes: only what differs is written, and every
difference is kept in `talk_changes` (run, talk, field, old, new).

A talk no longer produced by any source is marked `gone_since`, never
deleted; one that comes back is unmarked. Nothing changed -> nothing written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlite_utils

from .merge import MergedTalk, speaker_id
from .schema import TABLES, TALK_FIELDS, bulk_load

NEW, GONE, BACK = "_new", "_gone", "_back"


@dataclass
class WriteStats:
    talks_written: int = 0
    changes: int = 0
    new: int = 0
    gone: int = 0


def _stringify(value: Any) -> str | None:
    return None if value is None else str(value)


def apply_talks(db: sqlite_utils.Database, run_id: int, when: str, merged: list[MergedTalk],
                matches: list[dict[str, Any]]) -> WriteStats:
    """Bring talks and their satellite tables to `merged`, in bulk. Call inside a transaction."""
    stats = WriteStats()
    existing = {row["id"]: row for row in db.query("select * from talks")}
    changes: list[dict[str, Any]] = []

    def change(talk_id: str, name: str, old: Any, new: Any) -> None:
        changes.append({"run_id": run_id, "changed_at": when, "talk_id": talk_id, "field": name,
                        "old_value": _stringify(old), "new_value": _stringify(new)})

    wanted = {m.row["id"] for m in merged}
    new_rows = []
    for talk in merged:
        row = talk.row
        old = existing.get(row["id"])
        if old is None:
            row.update(first_seen=when, gone_since=None)  # the merged row itself: no copy of every row
            new_rows.append(row)
            change(row["id"], NEW, None, row["title"])
            continue
        diff = {k: row.get(k) for k in TALK_FIELDS if row.get(k) != old.get(k)}
        for name, value in diff.items():
            change(row["id"], name, old.get(name), value)
        if old.get("gone_since"):
            diff["gone_since"] = None
            change(row["id"], BACK, old["gone_since"], None)
        if diff:
            db.table("talks").update(row["id"], diff)
            stats.talks_written += 1
    if len(new_rows) > max(1000, len(existing)):  # a first build or a rebuild from scratch
        with bulk_load(db, "talks"):
            write_rows(db, "talks", new_rows)
    else:
        write_rows(db, "talks", new_rows)
    stats.new = len(new_rows)
    stats.talks_written += len(new_rows)
    for talk_id, old in existing.items():
        if talk_id not in wanted and not old.get("gone_since"):
            db.table("talks").update(talk_id, {"gone_since": when})
            change(talk_id, GONE, None, when)
            stats.gone += 1
            stats.talks_written += 1
    _sync_speakers(db, merged)
    # Children of talks that are gone stay as they were: the row is kept, so is what hangs off it.
    sync_rows(db, "talk_speakers", ["talk_id", "speaker_id"],
              [{"talk_id": t.row["id"], "speaker_id": speaker_id(s.name), "position": n}
               for t in merged for n, s in enumerate(t.speakers)], scope=wanted)
    sync_rows(db, "links", ["talk_id", "kind", "url"], [link for t in merged for link in t.links], scope=wanted)
    # A gone talk keeps its sources too: the curation still finds it (and says it is gone).
    sync_rows(db, "talk_sources", ["source", "item_key"], matches, scope=wanted)
    sync_rows(db, "chapters", ["talk_id", "position"], [c for t in merged for c in t.chapters], scope=wanted)
    sync_rows(db, "segments", ["talk_id", "position"], [s for t in merged for s in t.segments], scope=wanted)
    if changes:
        write_rows(db, "talk_changes", changes)
    stats.changes = len(changes)
    return stats


def _sync_speakers(db: sqlite_utils.Database, merged: list[MergedTalk]) -> None:
    """New people are added; known ones get missing profile URLs and bios filled,
    never erased by a later source that lacks them."""
    known = {row["id"]: row for row in db.query("select * from speakers")}
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
    for sid, gaps in updates.items():
        db.table("speakers").update(sid, gaps)


def sync_rows(db: sqlite_utils.Database, table: str, key: list[str], rows: list[dict[str, Any]],
              scope: set[str] | None = None) -> None:
    """Make `table` equal to `rows`, writing only differences. With `scope` (talk
    ids), only current rows of those talks may be deleted."""
    current = {tuple(r[k] for k in key): r for r in db.query(f"select * from [{table}]")}
    wanted = {tuple(r[k] for k in key): r for r in rows}
    stale = [k for k in current.keys() - wanted.keys() if scope is None or current[k]["talk_id"] in scope]
    if stale:
        db.conn.executemany(f"delete from [{table}] where " + " and ".join(f"[{c}] = ?" for c in key), stale)
    changed = [r for k, r in wanted.items()
               if k not in current or any(current[k].get(c) != v for c, v in r.items())]
    if changed:
        write_rows(db, table, changed, upsert_key=key)


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
    db.conn.executemany(sql, ([r.get(c) for c in columns] for r in rows))


def recent_changes(db: sqlite_utils.Database, since: str | None = None) -> list[dict[str, Any]]:
    sql = ("select c.changed_at, c.talk_id, t.title, c.field, c.old_value, c.new_value "
           "from talk_changes c left join talks t on t.id = c.talk_id")
    params: list[Any] = []
    if since:
        sql += " where c.changed_at >= ?"
        params.append(since)
    return list(db.query(sql + " order by c.id", params))

