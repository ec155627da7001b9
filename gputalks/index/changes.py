"""What changed in the index, refresh by refresh (`talk_changes`), as `gputalks changes` lists it."""

from __future__ import annotations

from typing import Any

import sqlite_utils


def recent_changes(db: sqlite_utils.Database, since: str | None = None) -> list[dict[str, Any]]:
    sql = ("select c.changed_at, c.talk_id, t.title, c.field, c.old_value, c.new_value "
           "from talk_changes c left join talks t on t.id = c.talk_id")
    params: list[Any] = []
    if since:
        sql += " where c.changed_at >= ?"
        params.append(since)
    return list(db.query(sql + " order by c.id", params))

