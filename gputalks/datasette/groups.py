"""Datasette plugin: the talks of a series, an event, a topic or a speaker, as a page
(`/series/GPU%20MODE`, `/event/GTC%202024`, `/topic/Triton`) and as an Atom feed (the same
path + `.atom`, and `/speaker/<id>.atom`), newest first: what a reader follows.

A page lists the newest GROUP_PAGE_TALKS talks and says how many there are in all (counted by
the build: group_stats); a feed holds the newest FEED_ENTRIES. A topic's talks are a range of talk_items, a speaker's come from talk_speakers,
never by reading every talk's JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, unquote

from datasette.utils import tilde_decode
from datasette.utils.asgi import Response

from gputalks.datasette.pages import not_found, page, talks_database, with_details
from gputalks.durations import human_duration

GROUP_PAGE_TALKS = 100
FEED_ENTRIES = 50


@dataclass(frozen=True)
class Group:
    kind: str
    talks: str  # FROM and WHERE over `t` (talks) with the parameter :name
    newest_first: str  # the talks' default order (order.newest_first: the date, then the id)
    label: str  # "of this series"

    def table_filter(self, name: str) -> str:
        return {"series": "series", "event": "event", "topic": "_item_topics",
                "speaker": "_item_speakers"}[self.kind] + "=" + quote(name, safe="")


GROUPS = {
    "series": Group("series", "talks t where t.series = :name", "t.newest_first", "of this series"),
    "event": Group("event", "talks t where t.event = :name", "t.newest_first", "of this event"),
    # A topic's talks are a range of talk_items, already in the default order.
    "topic": Group("topic", "talk_items i join talks t on t.rowid = i.talk where i.code = (select code from "
                            "talk_facet_values where facet = 'topics' and value = :name)", "i.newest_first",
                   "on this topic"),
    "speaker": Group("speaker", "talks t where t.id in (select talk_id from talk_speakers where speaker_id = :name)",
                     "t.newest_first", "by this speaker"),
}


@dataclass(frozen=True)
class GroupTalks:
    talks: list[dict]
    count: int  # of all the group's talks, not only those listed
    timed: int  # how many of them have a known length
    seconds: int  # their lengths added up


async def group_talks(db, group: Group, name: str, limit: int) -> GroupTalks:
    """The group's newest talks, and the count and length of all of them."""
    live = f"from {group.talks} and t.gone_since is null"
    rows = (await db.execute(
        "select t.id, t.title, t.speaker_names, t.series, t.event, t.date, t.duration_s, t.first_seen, t.url, "
        f"t.description {live} order by {group.newest_first} limit {limit}", {"name": name})).rows
    if len(rows) < limit:
        count, seconds, timed = len(rows), sum(r["duration_s"] or 0 for r in rows), sum(
            r["duration_s"] is not None for r in rows)
    else:  # counted by the build (index/group_stats.py); an index built before, here
        count, seconds, timed = (await db.execute(
            "select talks, seconds, timed from group_stats where kind = :kind and name = :name",
            {"kind": group.kind, "name": name})).first() or (await db.execute(
                f"select count(*), coalesce(sum(t.duration_s), 0), count(t.duration_s) {live}", {"name": name})).first()
    return GroupTalks([dict(row) for row in rows], count, timed, seconds)


async def group_view(datasette, request):
    group, name = GROUPS[request.url_vars["kind"]], unquote(request.url_vars["name"])
    if group.kind == "speaker":
        name = tilde_decode(name)
    database, db = talks_database(datasette)
    if request.url_vars.get("atom"):
        return await feed(datasette, request, db, group, name)
    found = await group_talks(db, group, name, GROUP_PAGE_TALKS) if group.kind != "speaker" else None
    if not found or not found.talks:
        return await not_found(datasette, request, database, f"No talks in {group.kind} {name!r}")
    return await page(datasette, request, "gputalks_group.html", {
        "kind": group.kind, "label": group.label, "name": name, "database": database,
        "talks": with_details(found.talks, "speaker_names", "event" if group.kind != "event" else "series", "date",
                              "duration_s"),
        "count": found.count, "timed": found.timed, "total": human_duration(found.seconds),
        "table_url": f"{datasette.urls.table(database, 'talks')}?{group.table_filter(name)}",
        "feed_url": datasette.urls.path(f"/{group.kind}/{quote(name, safe='')}.atom")})


async def feed(datasette, request, db, group: Group, name: str) -> Response:
    """An Atom feed of the group's newest talks (feedgen, as datasette-atom writes its feeds)."""
    from feedgen.feed import FeedGenerator

    talks = (await group_talks(db, group, name, FEED_ENTRIES)).talks
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


# The series, event and topic pages and their feeds; a speaker's feed (their page is pages.py's).
ROUTES = [(r"^/(?P<kind>series|event|topic)/(?P<name>[^/]+?)(?P<atom>\.atom)?$", group_view),
          (r"^/(?P<kind>speaker)/(?P<name>[^/]+?)(?P<atom>\.atom)$", group_view)]
