"""Where a talk page leads: the previous and next lecture of a numbered series, and related
talks (shared speakers, shared topics, the same event, nearby lectures, a close title). Not a
plugin of its own: the talk page (gputalks_pages.py) reads these in its one trip to the
database thread.

Every look-up is indexed or bounded: speakers through talk_speakers, topics through talk_items
(the newest CANDIDATES talks of each topic, not all of them), neighbours by number, so a
page costs the same at 150 talks and at 100,000.
"""

from __future__ import annotations

from collections import Counter

from rapidfuzz import fuzz

RELATED = 5  # shown on a talk page
CANDIDATES = 300  # per topic, per event: enough to rank, bounded at any size
WEIGHTS = {"speaker": 3.0, "topic": 1.0, "event": 0.5, "neighbour": 1.5, "title": 1.0}
CLOSE_TITLE = 60  # rapidfuzz token_set_ratio of two titles that say nearly the same


def neighbours(conn, talk: dict) -> dict[str, dict | None]:
    """The previous and next lecture of the talk's series (by number), where they exist."""
    found: dict[str, dict | None] = {"previous": None, "next": None}
    if talk.get("series") is None or talk.get("number") is None:
        return found
    for name, number in (("previous", talk["number"] - 1), ("next", talk["number"] + 1)):
        row = conn.execute("select id, title, number from talks where series = ? and number = ? and "
                           "gone_since is null order by id limit 1", [talk["series"], number]).fetchone()
        found[name] = {"id": row[0], "title": row[1], "number": row[2]} if row else None
    return found


def related_talks(conn, talk: dict, topics: list[str]) -> list[dict]:
    """Up to RELATED talks most like this one, best first, each with why ("same speaker", ...)."""
    scores: Counter = Counter()
    reasons: dict[int, set[str]] = {}
    me = conn.execute("select rowid from talks where id = ?", [talk["id"]]).fetchone()[0]

    def add(rowids, why: str) -> None:
        for (rowid,) in rowids:
            if rowid != me:
                scores[rowid] += WEIGHTS[why]
                reasons.setdefault(rowid, set()).add(why)

    add(conn.execute("select t.rowid from talk_speakers mine join talk_speakers theirs on theirs.speaker_id = "
                     "mine.speaker_id join talks t on t.id = theirs.talk_id where mine.talk_id = ? limit ?",
                     [talk["id"], CANDIDATES]), "speaker")
    for topic in topics:
        add(conn.execute("select talk from talk_items where code = (select code from talk_facet_values "
                         "where facet = 'topics' and value = ?) order by date_key desc limit ?",
                         [topic, CANDIDATES]), "topic")
    if talk.get("event"):
        add(conn.execute("select rowid from talks where event = ? limit ?", [talk["event"], CANDIDATES]), "event")
    if talk.get("series") is not None and talk.get("number") is not None:
        add(conn.execute("select rowid from talks where series = ? and number between ? and ?",
                         [talk["series"], talk["number"] - 2, talk["number"] + 2]), "neighbour")
    if not scores:
        return []
    best = [rowid for rowid, _ in scores.most_common(RELATED * 4)]
    rows = conn.execute(f"select rowid, id, title, series, event, duration_s from talks where rowid in "
                        f"({', '.join('?' * len(best))}) and gone_since is null", best).fetchall()
    found = []
    for rowid, talk_id, title, series, event, duration_s in rows:
        score = scores[rowid]
        if title and talk.get("title") and fuzz.token_set_ratio(title, talk["title"]) >= CLOSE_TITLE:
            score += WEIGHTS["title"]
            reasons[rowid].add("title")
        found.append({"id": talk_id, "title": title, "where": event or series, "duration_s": duration_s,
                      "score": score, "why": sorted(reasons[rowid])})
    found.sort(key=lambda row: (-row["score"], row["title"] or ""))
    return found[:RELATED]
