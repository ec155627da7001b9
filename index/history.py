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
from .schema import TALK_FIELDS

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
    """Bring talks and their satellite tables to `merged`. Call inside a transaction."""
    stats = WriteStats()
    existing = {row["id"]: row for row in db.query("select * from talks")}
    changes: list[dict[str, Any]] = []

    def change(talk_id: str, name: str, old: Any, new: Any) -> None:
        changes.append({"run_id": run_id, "changed_at": when, "talk_id": talk_id, "field": name,
                        "old_value": _stringify(old), "new_value": _stringify(new)})

    wanted = {m.row["id"] for m in merged}
    for talk in merged:
        row = talk.row
        old = existing.get(row["id"])
        if old is None:
            db.table("talks").insert({**row, "first_seen": when, "gone_since": None})
            change(row["id"], NEW, None, row["title"])
            stats.new += 1
            stats.talks_written += 1
        else:
            diff = {k: row.get(k) for k in TALK_FIELDS if row.get(k) != old.get(k)}
            if old.get("gone_since"):
                diff["gone_since"] = None
                change(row["id"], BACK, old["gone_since"], None)
            if diff:
                for name, value in diff.items():
                    if name != "gone_since":
                        change(row["id"], name, old.get(name), value)
                db.table("talks").update(row["id"], diff)
                stats.talks_written += 1
        _sync_children(db, talk)
    for talk_id, old in existing.items():
        if talk_id not in wanted and not old.get("gone_since"):
            db.table("talks").update(talk_id, {"gone_since": when})
            change(talk_id, GONE, None, when)
            stats.gone += 1
            stats.talks_written += 1
    sync_rows(db, "talk_sources", ["source", "item_key"], matches, keep_where=None)
    if changes:
        db.table("talk_changes").insert_all(changes)
    stats.changes = len(changes)
    return stats


def _sync_children(db: sqlite_utils.Database, talk: MergedTalk) -> None:
    talk_id = talk.row["id"]
    for s in talk.speakers:
        sid = speaker_id(s.name)
        current = db.execute("select name, profile_url, bio from speakers where id = ?", [sid]).fetchone()
        wanted = {"id": sid, "name": s.name, "profile_url": s.profile_url, "bio": s.bio}
        if current is None:
            db.table("speakers").insert(wanted)
            continue
        # Keep what we know: fill gaps, never erase a profile URL or bio.
        known = dict(zip(("name", "profile_url", "bio"), current))
        update = {k: v for k, v in wanted.items() if k != "id" and v and not known[k]}
        if update:
            db.table("speakers").update(sid, update)
    speaker_rows = [{"talk_id": talk_id, "speaker_id": speaker_id(s.name), "position": n}
                    for n, s in enumerate(talk.speakers)]
    sync_rows(db, "talk_speakers", ["talk_id", "speaker_id"], speaker_rows, keep_where=("talk_id", talk_id))
    sync_rows(db, "links", ["talk_id", "kind", "url"], talk.links, keep_where=("talk_id", talk_id))


def sync_rows(db: sqlite_utils.Database, table: str, key: list[str], rows: list[dict[str, Any]],
              keep_where: tuple[str, Any] | None = None) -> None:
    """Make `table` (or its rows where column = value) equal to `rows`, writing only differences."""
    where, params = "", []
    if keep_where:
        where, params = f"where [{keep_where[0]}] = ?", [keep_where[1]]
    current = {tuple(r[k] for k in key): r for r in db.query(f"select * from [{table}] {where}", params)}
    wanted = {tuple(r[k] for k in key): r for r in rows}
    for k in current.keys() - wanted.keys():
        db.execute(f"delete from [{table}] where " + " and ".join(f"[{c}] = ?" for c in key), list(k))
    changed = [r for k, r in wanted.items()
               if k not in current or any(current[k].get(c) != v for c, v in r.items())]
    if changed:
        db.table(table).upsert_all(changed, pk=key)


def recent_changes(db: sqlite_utils.Database, since: str | None = None) -> list[dict[str, Any]]:
    sql = ("select c.changed_at, c.talk_id, t.title, c.field, c.old_value, c.new_value "
           "from talk_changes c left join talks t on t.id = c.talk_id")
    params: list[Any] = []
    if since:
        sql += " where c.changed_at >= ?"
        params.append(since)
    return list(db.query(sql + " order by c.id", params))

