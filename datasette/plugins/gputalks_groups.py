"""Datasette plugin: the talks of a series, an event, a topic or a speaker, as a page
(`/series/GPU%20MODE`, `/event/GTC%202024`, `/topic/Triton`) and as an Atom feed (the same
path + `.atom`, and `/speaker/<id>.atom`), newest first: what a reader follows.

A page lists the newest GROUP_PAGE_TALKS talks and counts them all; a feed holds the newest
FEED_ENTRIES. Topics and speakers are found through the talks' facet keys and talk_speakers,
never by reading every talk's JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, unquote

from datasette import hookimpl
from datasette.utils import tilde_decode
from datasette.utils.asgi import Response

from gputalks.datasette.plugins.gputalks_facets import label_filter
from gputalks.datasette.plugins.gputalks_pages import not_found, page, talks_database, with_details
from gputalks.datasette.plugins.gputalks_query import words_of
from gputalks.index.durations import human_duration

GROUP_PAGE_TALKS = 100
FEED_ENTRIES = 50
# Newest first: the talk's date where one is known (date_key: the date, then the id).
NEWEST_FIRST = "order by t.date_key desc"


@dataclass(frozen=True)
class Group:
    kind: str
    where: str  # SQL over `t` (talks) with the parameter :name
    label: str  # "of this series"

    def table_filter(self, name: str) -> str:
        return {"series": "series", "event": "event", "topic": "_item_topics",
                "speaker": "_item_speakers"}[self.kind] + "=" + quote(name, safe="")


GROUPS = {
    "series": Group("series", "t.series = :name", "of this series"),
    "event": Group("event", "t.event = :name", "of this event"),
    "topic": Group("topic", "t.rowid in (select rowid from talk_facet_keys where instr(keys, (select key from "
                            "talk_facet_values where facet = 'topics' and value = :name)))", "on this topic"),
    "speaker": Group("speaker", "t.id in (select talk_id from talk_speakers where speaker_id = :name)",
                     "by this speaker"),
}


async def group_talks(db, group: Group, name: str, limit: int) -> list[dict]:
    """The group's newest talks, each with the count and length of all of them (window totals,
    taken before the LIMIT). A topic no other label contains is found through the FTS index."""
    where, params = group.where, {"name": name}
    if group.kind == "topic":
        labels = [tuple(words_of(value)) for (value,) in (await db.execute(
            "select value from talk_facet_values where facet in ('topics', 'series', 'event')")).rows]
        phrase = label_filter("topics", name, labels)
        if phrase is not None:
            where, params = "t.rowid in (select rowid from talks_fts where talks_fts match :phrase)", {"phrase": phrase}
    rows = (await db.execute(
        "select t.id, t.title, t.speaker_names, t.series, t.event, t.date, t.duration_s, t.first_seen, t.url, "
        "t.description, count(*) over () as talk_count, coalesce(sum(t.duration_s) over (), 0) as all_seconds, "
        f"count(t.duration_s) over () as timed_count from talks t where {where} and t.gone_since is null "
        f"{NEWEST_FIRST} limit {limit}", params)).rows
    return [dict(row) for row in rows]


async def group_view(datasette, request):
    group, name = GROUPS[request.url_vars["kind"]], unquote(request.url_vars["name"])
    if group.kind == "speaker":
        name = tilde_decode(name)
    database, db = talks_database(datasette)
    if request.url_vars.get("atom"):
        return await feed(datasette, request, db, group, name)
    talks = await group_talks(db, group, name, GROUP_PAGE_TALKS) if group.kind != "speaker" else []
    if not talks:
        return await not_found(datasette, request, database, f"No talks in {group.kind} {name!r}")
    first = talks[0]
    return await page(datasette, request, "gputalks_group.html", {
        "kind": group.kind, "label": group.label, "name": name, "database": database,
        "talks": with_details(talks, "speaker_names", "event" if group.kind != "event" else "series", "date",
                              "duration_s"),
        "count": first["talk_count"], "timed": first["timed_count"], "total": human_duration(first["all_seconds"]),
        "table_url": f"{datasette.urls.table(database, 'talks')}?{group.table_filter(name)}",
        "feed_url": datasette.urls.path(f"/{group.kind}/{quote(name, safe='')}.atom")})


async def feed(datasette, request, db, group: Group, name: str) -> Response:
    """An Atom feed of the group's newest talks (feedgen, as datasette-atom writes its feeds)."""
    from feedgen.feed import FeedGenerator

    talks = await group_talks(db, group, name, FEED_ENTRIES)
    if not talks:
        return Response.text(f"No talks in {group.kind} {name!r}", status=404)
    database, _ = talks_database(datasette)
    site = datasette.absolute_url(request, datasette.urls.path("/"))
    generator = FeedGenerator()
    generator.id(f"gputalks:{group.kind}:{name}")
    generator.title(f"GPU talks {group.label}: {name}")
    generator.link(href=datasette.absolute_url(request, request.path), rel="self")
    seen = [t["first_seen"] for t in talks if t["first_seen"]]  # ISO 8601 in UTC ("...Z")
    if seen:
        generator.updated(max(seen))
    for talk in reversed(talks):  # feedgen puts the last added first
        entry = generator.add_entry()
        entry.id(f"gputalks:talk:{talk['id']}")
        entry.title(talk["title"] or talk["id"])
        entry.link(href=site.rstrip("/") + datasette.urls.row(database, "talks", talk["id"]))
        if talk["first_seen"]:
            entry.updated(talk["first_seen"])
        if talk["speaker_names"]:
            entry.author({"name": talk["speaker_names"]})
        entry.content(" · ".join(filter(None, [talk["series"], talk["event"], talk["date"]])) +
                      ("\n" + talk["description"] if talk["description"] else ""), type="text")
    return Response(generator.atom_str(pretty=True), content_type="application/atom+xml; charset=utf-8")


@hookimpl
def register_routes():
    return [(r"^/(?P<kind>series|event|topic)/(?P<name>[^/]+?)(?P<atom>\.atom)?$", group_view),
            (r"^/(?P<kind>speaker)/(?P<name>[^/]+?)(?P<atom>\.atom)$", group_view)]
