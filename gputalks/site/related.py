"""Where a talk page leads: the previous and next lecture of a numbered series, and the related
talks the build ranked and stored (shared speakers, topics, the same event, nearby lectures, a
close title: index/related.py), and what a link is called. The served talk page
(datasette/pages.py, in its one trip to the database thread) and the static one (site/static.py)
read these by primary key and index only.
"""

from __future__ import annotations

import json
import sqlite3

# What a talk's links are called, in the order a page lists them.
LINK_LABELS = {"slides": "Slides", "code": "Code", "notebook": "Notebook", "colab": "Colab notebook",
               "folder": "Lecture folder", "readme": "README section", "book": "Book", "paper": "Paper",
               "ondemand": "NVIDIA On-Demand", "catalog": "GTC catalog", "video": "Video"}
LINK_ORDER = list(LINK_LABELS)


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


def related_talks(conn, talk_id: str) -> list[dict]:
    """The talk's related talks as the build ranked them (index/related.py), those still live."""
    try:
        row = conn.execute("select related from talk_related where talk_id = ?", [talk_id]).fetchone()
        ids = [i for i in json.loads(row[0]) if isinstance(i, str)] if row else []
    except (sqlite3.OperationalError, TypeError, ValueError):  # an index from before talk_related; bad JSON
        ids = []
    if not ids:
        return []
    rows = conn.execute(f"select id, title, series, event, duration_s from talks where id in "
                        f"({', '.join('?' * len(ids))}) and gone_since is null", ids).fetchall()
    found = {talk: {"id": talk, "title": title, "where": event or series, "duration_s": duration_s}
             for talk, title, series, event, duration_s in rows}
    return [found[i] for i in ids if i in found]


def labelled_links(links: list[dict]) -> list[dict]:
    """A talk's links in the order a page lists them, each with the name a reader knows it by."""
    ordered = sorted(links, key=lambda link: (LINK_ORDER.index(link["kind"]) if link["kind"] in LINK_ORDER else 99,
                                              link["url"]))
    return [{**link, "kind_label": LINK_LABELS.get(link["kind"], link["kind"].title())} for link in ordered]
