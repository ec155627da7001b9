"""Datasette plugin: the pages readers meet. A talk page and a speaker page
(routes in front of Datasette's row pages) and the ranked search (`/search`,
`/search.json`); series, event and topic pages are in groups.py.

Each page's related rows are fetched once per page, in a handful of queries.
"""

from __future__ import annotations

import functools
import json
import re
from urllib.parse import quote

from datasette.utils import tilde_decode, tilde_encode
from datasette.utils.asgi import Response

from gputalks.site.related import labelled_links, neighbours, related_talks
from gputalks.datasette.errors import TOO_LARGE, past_time_limit
from gputalks.durations import human_duration
from gputalks.index.hand_facts import SET_BY_HAND
from gputalks.scraper.sources import SOURCES
from gputalks.search.query import MAX_QUERY_BYTES, too_long
from gputalks.search.ranking import MATCHES, SOME_WORDS, talks_sql

# The ranking lives once (gputalks/search/talks.sql); the search page runs it with snippet
# markers no document contains, which become <mark> after escaping.
SNIPPET_MARKERS = ("\u0001", "\u0002")
FIELD_LABELS = {"title": "title", "series": "series", "event": "event", "number": "number", "date": "date",
                "duration_s": "duration", "description": "description", "speakers": "speakers",
                "slides_url": "slides"}
YOUTUBE_ID_RE = re.compile(r"^[\w-]{11}$")


def talks_database(datasette):
    """The served index: the database with a talks table (named after its file)."""
    for name, db in datasette.databases.items():
        if name != "_internal":
            return name, db
    return None, None


def with_details(talks: list[dict], *fields: str) -> list[dict]:
    """Each talk's small print ("GPU MODE · 2024-05-01 · 1 h 12"), joined here once:
    the async template engine pays per filter call, and a list page has hundreds."""
    for talk in talks:
        parts = [human_duration(talk[f]) if f == "duration_s" and talk[f] else talk.get(f) for f in fields]
        talk["details"] = " · ".join(str(p) for p in parts if p)
    return talks


def _dicts(cursor) -> list[dict]:
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def _web_url(url) -> str | None:
    """A URL a page may link to: http(s) only (scraped text may hold `javascript:`)."""
    return url if str(url or "").startswith(("https://", "http://")) else None


def _related_rows(conn, talk_id: str) -> tuple | None:
    """The talk and everything its page shows, read in one trip to the database thread."""
    def rows(sql: str) -> list[dict]:
        return _dicts(conn.execute(sql, [talk_id]))

    talks = rows("select * from talks where id = ?")
    if not talks:
        return None
    topics = json.loads(talks[0].get("topics") or "[]")
    return (talks[0], topics, neighbours(conn, talks[0]), related_talks(conn, talk_id),
            rows("select s.id, s.name, s.profile_url, s.affiliation from talk_speakers ts join speakers s "
                 "on s.id = ts.speaker_id where ts.talk_id = ? order by ts.position"),
            rows("select kind, url, label from links where talk_id = ?"),
            rows("select start_s, title, deep_link from chapters where talk_id = ? order by position"),
            bool(conn.execute("select exists (select 1 from segments where talk_id = ?)", [talk_id]).fetchone()[0]))


async def talk_page(db, talk_id: str) -> dict | None:
    found = await db.execute_fn(lambda conn: _related_rows(conn, talk_id))
    if found is None:
        return None
    talk, topics, around, related, speakers, links, chapters, has_transcript = found
    links = labelled_links([link for link in links if _web_url(link["url"])])
    try:
        origins = json.loads(talk.get("field_sources") or "{}")
    except ValueError:
        origins = {}
    by_source: dict[str, list[str]] = {}
    for field, origin in origins.items():
        source = SET_BY_HAND if str(origin).startswith(SET_BY_HAND) else str(origin).split(":")[0]
        by_source.setdefault(SOURCES[source].label if source in SOURCES else source, []).append(FIELD_LABELS.get(field, field))
    youtube_id = talk.get("youtube_id")
    return {
        "talk": talk, "speakers": speakers, "links": [l for l in links if l["kind"] != "video"],
        "chapters": chapters, "has_transcript": has_transcript, "topics": topics,
        "previous": around["previous"], "next": around["next"],
        "related": with_details(related, "where", "duration_s"),
        "provenance": sorted(by_source.items()),
        "youtube_id": youtube_id if youtube_id and YOUTUBE_ID_RE.match(youtube_id) else None,
    }


SPEAKER_PAGE_TALKS = 50


def _speaker_rows(conn, speaker_id: str) -> tuple | None:
    """The speaker and their newest talks (up to 50; the talks table has them all) with the count
    and hours of all (window totals are taken before the LIMIT), in one trip to the database thread."""
    speakers = _dicts(conn.execute("select id, name, affiliation, profile_url from speakers where id = ?",
                                   [speaker_id]))
    if not speakers:
        return None
    cursor = conn.execute(
        "select t.id, t.title, coalesce(t.event, t.series) as series, coalesce(t.date, t.year) as date, t.duration_s, "
        "count(*) over () as talk_count, coalesce(sum(t.duration_s) over (), 0) as all_seconds, "
        "count(t.duration_s) over () as timed_count "
        "from talk_speakers ts join talks t on t.id = ts.talk_id "
        f"where ts.speaker_id = ? and t.gone_since is null order by t.newest_first limit {SPEAKER_PAGE_TALKS}",
        [speaker_id])
    return speakers[0], _dicts(cursor)


async def speaker_view(datasette, request):
    """A speaker's page: who they are and their talks. A route of its own rather than Datasette's
    row page, whose generic work (the row's cells, incoming foreign keys) this page never shows;
    the raw row stays at its .json URL."""
    database, db = talks_database(datasette)
    speaker_id = tilde_decode(request.url_vars["speaker"])
    found = None
    if request.url_vars["database"] == database:
        found = await db.execute_fn(lambda conn: _speaker_rows(conn, speaker_id))
    if found is None:
        return await not_found(datasette, request, database, f"No speaker {speaker_id!r}")
    speaker, talks = found
    count, seconds, timed = (talks[0]["talk_count"], talks[0]["all_seconds"], talks[0]["timed_count"]) \
        if talks else (0, 0, 0)
    talks_path = datasette.urls.table(database, "talks")  # once, not once per talk listed
    for talk in talks:
        talk["url"] = f"{talks_path}/{tilde_encode(talk['id'])}"
    return await page(datasette, request, "gputalks_speaker.html", {
        "speaker": speaker, "talks": with_details(talks, "series", "date", "duration_s"), "count": count,
        "timed": timed,
        "total": human_duration(seconds), "database": database, "table": "speakers",
        "profile_url": _web_url(speaker["profile_url"]),
        "json_url": f"{datasette.urls.table(database, 'speakers')}/{tilde_encode(speaker_id)}.json",
        "all_talks_url": f"{talks_path}?_item_speakers={quote(speaker['name'] or '', safe='')}"})


async def talk_view(datasette, request):
    """A talk's page: everything about it in one page. A route of its own rather than Datasette's
    row page, whose generic work (the row's cells, a count per table linking to it) this page
    never shows; the raw row stays at its .json URL."""
    database, db = talks_database(datasette)
    talk_id = tilde_decode(request.url_vars["talk"])
    found = await talk_page(db, talk_id) if request.url_vars["database"] == database else None
    if found is None:
        return await not_found(datasette, request, database, f"No talk {talk_id!r}")
    return await page(datasette, request, "gputalks_talk.html",
                      {"talk_page": found, "database": database, "table": "talks"})


async def not_found(datasette, request, database: str | None, heading: str) -> Response:
    return await page(datasette, request, "gputalks_message.html", {"heading": heading, "database": database},
                      status=404)


async def page(datasette, request, template: str, context: dict, status: int = 200) -> Response:
    """One of these pages, with what Datasette's own pages have: the site's metadata (the
    footer's license and sources) and, through `database` and `table`, the crumbs."""
    return Response.html(await datasette.render_template(
        template, {"metadata": datasette.metadata(), **context}, request=request), status=status)


async def search_view(datasette, request):
    """The ranked search as a page (`/search`) or as JSON (`/search.json`: the results in rank
    order, each with its talk id)."""
    query = (request.args.get("q") or "").strip()
    as_json = request.path.endswith(".json")
    database, db = talks_database(datasette)
    results, message = [], None
    refused = too_long(query)
    if refused:
        if as_json:
            return Response.json({"q": query[:MAX_QUERY_BYTES], "results": [], "message": refused}, status=400)
        return await page(datasette, request, "gputalks_message.html", {"heading": refused, "database": database},
                          status=400)
    if not query:
        message = "Type one or more words: a title, a speaker, a topic (\"flash attention\", \"TMA\", \"Jones\")."
    else:
        sql = talks_sql(*SNIPPET_MARKERS) if not as_json else talks_sql()
        results = [dict(r) for r in (await db.execute(sql, {"q": query.replace("\0", " ")})).rows]
        for row in results:
            row["topics"] = json.loads(row["topics"] or "[]")
            row["match"] = MATCHES[row["tier"]]
        if not results:
            message = f"No talk matches {query!r}. Try fewer or other words."
        elif results[0]["tier"] == SOME_WORDS:
            message = "No talk matches all your words; closest:"
    if as_json:
        return Response.json({"q": query, "results": results, "message": message})
    for row in results:
        row["where"] = row["event"] or row["series"]
        row["when"] = row["date"] or row["year"]
    with_details(results, "where", "when", "duration_s", "speakers")
    groups: dict[str, list[dict]] = {}
    for row in results:
        groups.setdefault(row["match"], []).append(row)
    return await page(datasette, request, "gputalks_search.html", {
        "q": query, "results": results, "groups": list(groups.items()), "message": message, "database": database,
        "table_url": f"{datasette.urls.table(database, 'talks')}?_search={quote(query)}&_sort=newest_first"})


def degrades(view):
    """A reader page whose query passes Datasette's time limit answers a plain 400 that says what
    to do, as Datasette's own pages do, never a 500 and never the SQL."""

    @functools.wraps(view)
    async def degrading(datasette, request):
        try:
            return await view(datasette, request)
        except Exception as exc:
            if not past_time_limit(exc):
                raise
            if request.path.endswith(".json"):
                return Response.json({"ok": False, "error": TOO_LARGE, "status": 400}, status=400)
            if request.path.endswith(".atom"):
                return Response.text(TOO_LARGE, status=400)
            database, _ = talks_database(datasette)
            return await page(datasette, request, "gputalks_message.html", {"heading": TOO_LARGE,
                                                                             "database": database}, status=400)

    return degrading


# A talk's and a speaker's page before Datasette's row page (plugin routes come first); their
# .json stays Datasette's (a "." in a key is tilde-encoded, so a key never contains one).
ROUTES = [(r"^/search(\.json)?$", search_view),
          (r"^/(?P<database>[^/]+)/talks/(?P<talk>[^/.]+)$", talk_view),
          (r"^/(?P<database>[^/]+)/speakers/(?P<speaker>[^/.]+)$", speaker_view)]


def sitemap_paths(datasette):
    """Every talk's page, the search and the talks table (datasette-sitemap's hook)."""
    async def inner():
        database, db = talks_database(datasette)
        if db is None:
            return []
        ids = [row[0] for row in (await db.execute(
            "select id from talks where gone_since is null order by id limit 49000")).rows]
        return ["/search", datasette.urls.table(database, "talks")] + \
            [datasette.urls.row(database, "talks", talk_id) for talk_id in ids]

    return inner


def add_filters(env) -> None:
    # Snippet markers from FTS5 (control characters no document contains) become <mark>, after escaping.
    from markupsafe import Markup, escape

    env.filters["highlight"] = lambda text: Markup(
        str(escape(text or "")).replace("\u0001", "<mark>").replace("\u0002", "</mark>"))
    env.filters["hours"] = lambda seconds: human_duration(seconds or 0)
    env.filters["quote_path"] = lambda text: quote(str(text), safe="")
