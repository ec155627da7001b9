"""What changed in the index, refresh by refresh (`talk_changes`): as `gputalks changes` lists
it, line by line, and as the nightly's pull request shows it, talk by talk (new, changed, gone,
back), each with what a reviewer needs to tell what arrived: title, series or event, length,
speakers and its link."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sqlite_utils


def recent_changes(db: sqlite_utils.Database, since: str | None = None) -> list[dict[str, Any]]:
    sql = ("select c.changed_at, c.talk_id, t.title, coalesce(t.event, t.series) as place, t.duration_s, "
           "t.speaker_names, c.field, c.old_value, c.new_value "
           "from talk_changes c left join talks t on t.id = c.talk_id")
    params: list[Any] = []
    if since:
        sql += " where c.changed_at >= ?"
        params.append(since)
    return list(db.query(sql + " order by c.id", params))


@dataclass
class ChangedTalk:
    id: str
    title: str | None
    where: str | None  # its event, else its series
    duration_s: int | None
    speakers: str | None
    url: str | None
    fields: list[tuple[str, str | None, str | None]] = field(default_factory=list)  # (field, old, new)


KINDS = {"_new": "new", "_gone": "gone", "_back": "back"}


def changed_talks(db: sqlite_utils.Database, since: str | None = None) -> dict[str, list[ChangedTalk]]:
    """The changes grouped by talk: "new", "changed", "gone" and "back" talks, in that order,
    each talk once (a new talk's first values are not changes)."""
    groups: dict[str, dict[str, ChangedTalk]] = {kind: {} for kind in ("new", "changed", "gone", "back")}
    talks = {row["id"]: row for row in db.query(
        "select id, title, coalesce(event, series) as place, duration_s, speaker_names, url from talks "
        "where id in (select talk_id from talk_changes" + (" where changed_at >= ?)" if since else ")"),
        [since] if since else [])}
    for row in recent_changes(db, since):
        talk = talks.get(row["talk_id"], {})
        kind = KINDS.get(row["field"], "changed")
        entry = groups[kind].setdefault(row["talk_id"], ChangedTalk(
            row["talk_id"], talk.get("title"), talk.get("place"), talk.get("duration_s"), talk.get("speaker_names"),
            talk.get("url")))
        if kind == "changed":
            entry.fields.append((row["field"], row["old_value"], row["new_value"]))
    for talk_id in groups["new"]:  # a talk new this time has no "changes" of its own
        groups["changed"].pop(talk_id, None)
    return {kind: list(found.values()) for kind, found in groups.items()}
