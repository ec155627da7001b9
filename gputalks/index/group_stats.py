"""Each series', event's, topic's and speaker's live talks counted and timed once a build, for
their pages and feeds: counting a series of 62,000 talks on each request took 0.8 s at
100,000 talks (datasette/groups.py reads these)."""

from __future__ import annotations

import sqlite_utils

# kind -> (SQL of (name, talk rowid) pairs): the talks each group of that kind holds.
MEMBERS = {
    "series": "select series as name, rowid as talk from talks where series is not null",
    "event": "select event as name, rowid as talk from talks where event is not null",
    "topic": "select v.value as name, i.talk as talk from talk_items i join talk_facet_values v "
             "on v.code = i.code and v.facet = 'topics'",
    "speaker": "select s.speaker_id as name, t.rowid as talk from talk_speakers s join talks t on t.id = s.talk_id",
}


def write_group_stats(db: sqlite_utils.Database) -> None:
    """Replace the counts with this build's (call inside the build's transaction)."""
    db.execute("delete from group_stats")
    for kind, members in MEMBERS.items():
        db.execute(f"insert into group_stats (kind, name, talks, timed, seconds) "
                   f"select ?, m.name, count(*), count(t.duration_s), coalesce(sum(t.duration_s), 0) "
                   f"from ({members}) m join talks t on t.rowid = m.talk "
                   f"where t.gone_since is null group by m.name", [kind])
