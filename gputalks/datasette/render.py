"""Datasette plugin for the gputalks index: how cells look (readable labels,
durations, links), facets in their natural order, and the home page's
freshness line.

Scraped text is untrusted. Every value that becomes HTML here is escaped, or
(descriptions) rendered from Markdown with raw HTML disabled and then
sanitised by nh3; only http(s) URLs become links.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from functools import lru_cache
from html import escape
from urllib.parse import parse_qsl, urlencode
from weakref import WeakKeyDictionary

from datasette.utils import tilde_encode
from markupsafe import Markup
from markupsafe import escape as markup_escape

from gputalks.durations import human_duration
from gputalks.site.markdown import render_markdown
from gputalks.index.order import SORT_KEYS, SORT_WORDS

LINK_COLUMNS = {"url", "youtube_url", "ondemand_url", "slides_url", "profile_url", "deep_link"}
# The columns a reader wants in the talks table (asgi_wrapper); the rest is on the talk's page.
READER_COLUMNS = ["title", "speakers", "series", "event", "date", "duration_s", "topics"]
LABELS = {"newest_first": "Date", "duration_s": "Duration", "duration_bucket": "Length", "speaker_names": "Speakers",
          "youtube_url": "YouTube", "ondemand_url": "On-Demand", "slides_url": "Slides", "repo_folder": "Folder",
          "youtube_id": "YouTube id", "first_seen": "First seen", "gone_since": "Gone since",
          "field_sources": "Field sources", "talk_id": "Talk", "id": "Id", "url": "Link"}
# Facets whose values have an order of their own (else: by count).
NATURAL_ORDER = {"year": lambda value: -int(value) if str(value).isdigit() else 0,
                 "duration_bucket": ["< 30 min", "30-60 min", "1-2 h", "> 2 h"].index}


@lru_cache(maxsize=1024)
def column_label(name: str) -> str:
    return LABELS.get(name) or name.replace("_", " ").capitalize()


def sort_words(description: str, sort: str | None, sort_desc: str | None) -> str:
    """Datasette's "... sorted by longest_first descending" as a reader says it: "... sorted shortest first"."""
    key = sort or sort_desc
    if key not in SORT_WORDS:
        return description
    said = f"sorted by {key}" + (" descending" if sort_desc else "")
    return description.replace(said, f"sorted {SORT_WORDS[key][bool(sort_desc)]}")


@lru_cache(maxsize=1024)
def _cell_start(column: str, value_type: str, empty: bool) -> str:
    return (f'<td class="col-{_css_class(column)} type-{escape(value_type, quote=True)}'
            f'{" gt-empty" if empty else ""}" data-label="{escape(column_label(column), quote=True)}">')


def table_cells(row, hide: list) -> Markup:
    """One row's cells, each carrying its column's label for the mobile cards (a cell that shows
    nothing is marked, and a card leaves it out). In Python, not in _table.html: its per-cell
    attribute lookups were a third of a talks page's rendering."""
    parts = []
    for cell in row:
        if cell["column"] in hide:
            continue
        value = markup_escape(cell["value"])
        empty = not value.striptags().replace("\xa0", "").strip()
        parts.append(f'{_cell_start(cell["column"], cell["value_type"], empty)}{value}</td>')
    return Markup("".join(parts))


@lru_cache(maxsize=1024)
def _css_class(column: str) -> str:
    """A column's name as a CSS class: as it is when it is one already (every gputalks column),
    else its letters, digits, - and _ with a short digest, so two names never share a class."""
    if re.fullmatch(r"[a-zA-Z]\w*", column):
        return column
    kept = re.sub(r"[^\w-]", "", "-".join(column.split())).lstrip("_-")
    return "-".join(filter(None, (kept, hashlib.md5(column.encode()).hexdigest()[:6])))


def natural_order(results: list, name: str) -> list:
    key = NATURAL_ORDER.get(name)
    if key is None:
        return results
    try:
        return sorted(results, key=lambda r: key(r["value"]))
    except (ValueError, TypeError):
        return results


def safe_url(url) -> str | None:
    return url if isinstance(url, str) and url.startswith(("https://", "http://")) else None


# Datasette -> {(database, table): its rows' path}, asked of Datasette once: its URLs are
# PrefixedUrlStrings, whose every method call first lists dir(str) (~50x a plain str's cost).
_table_paths: WeakKeyDictionary = WeakKeyDictionary()


def row_url(datasette, database: str, table: str, key: str) -> str:
    """A row's page, ready for an attribute (the key tilde-encoded, as Datasette's own links)."""
    paths = _table_paths.setdefault(datasette, {})
    if (database, table) not in paths:
        paths[database, table] = escape(str(datasette.urls.table(database, table)), quote=True)
    return f"{paths[database, table]}/{escape(tilde_encode(str(key)), quote=True)}"


def link(url: str, text: str) -> str:
    return f'<a href="{escape(url, quote=True)}" rel="nofollow noopener">{escape(text)}</a>'


def excerpt(text: str, limit: int = 280) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit].rsplit(" ", 1)[0] + " …"


def _row_get(row, key):
    try:
        return row[key]
    except (KeyError, IndexError, TypeError):
        return None


def _duration_cell(row, value, table, database, datasette):
    if isinstance(value, (int, float)):
        return Markup(f'<span title="{int(value)} s">{human_duration(value)}</span>')
    return None


def _title_cell(row, value, table, database, datasette):
    if not isinstance(value, str):
        return None
    if table == "talks" and _row_get(row, "id"):  # the talks listing: the talk's page
        return Markup(f'<a href="{row_url(datasette, database, "talks", row["id"])}">{escape(value)}</a>')
    target = safe_url(_row_get(row, "url")) or safe_url(_row_get(row, "deep_link"))
    return Markup(link(target, value)) if target else None


def _topics_cell(row, value, table, database, datasette):
    if isinstance(value, str) and value.startswith("["):
        try:
            return ", ".join(str(topic) for topic in json.loads(value))
        except ValueError:
            return None
    return None


def _link_cell(row, value, table, database, datasette):
    return Markup(link(value, value)) if safe_url(value) else None


def _description_cell(row, value, table, database, datasette):
    # Tables show a plain excerpt (cheap, and usually a hidden column); the talk page renders it all.
    return Markup(f'<span class="talk-excerpt">{escape(excerpt(value))}</span>') if isinstance(value, str) else None


def _speakers_cell(row, value, table, database, datasette):
    return _speaker_links(value, datasette, database) if isinstance(value, str) and value.startswith("[") else None


# column -> how its cells look; any other column is Datasette's (one look-up a cell: a canned
# query's page renders a cell per column of every row)
CELLS = {"duration_s": _duration_cell, "title": _title_cell, "topics": _topics_cell, "description": _description_cell,
         "speakers": _speakers_cell, **{column: _link_cell for column in LINK_COLUMNS}}


def cell(row, value, column, table, database, datasette):
    render = CELLS.get(column)
    return None if render is None or value is None else render(row, value, table, database, datasette)


# name -> speaker id, per served immutable file (its Database object): read once, not once per cell.
_speaker_ids: WeakKeyDictionary = WeakKeyDictionary()


def _kept_speaker_ids(db) -> dict[str, str] | None:
    """The speaker ids read from this file, while they hold (an immutable file's, as served)."""
    return None if db.is_mutable else _speaker_ids.get(db)


async def speaker_ids(datasette, database: str) -> dict[str, str]:
    db = datasette.get_database(database)
    if _kept_speaker_ids(db) is None:
        _speaker_ids[db] = {r["name"]: r["id"] for r in (await db.execute("select id, name from speakers")).rows}
    return _speaker_ids[db]


def _speaker_links(value: str, datasette, database: str):
    """Each speaker links to their page on this site (their profile is on it); in place when the
    served file's speakers are known, else once they are read."""
    try:
        names = [n for n in json.loads(value) if isinstance(n, str)]
    except ValueError:
        return None

    def links(ids: dict[str, str]) -> Markup:
        parts = [f'<a href="{row_url(datasette, database, "speakers", ids[name])}">{escape(name)}</a>'
                 if name in ids else escape(name) for name in names]
        # An empty Markup would read as "not rendered" and show the raw "[]".
        return Markup(", ".join(parts) or '<span class="no-speakers"></span>')

    kept = _kept_speaker_ids(datasette.get_database(database))
    if not names or kept is not None:
        return links(kept or {})

    async def inner():
        return links(await speaker_ids(datasette, database))

    return inner


READER_TABLE_RE = re.compile(r"^/[^/]+/talks$")
CSV_RE = re.compile(r"^/[^/]+/[^/]+\.csv$")  # a table's or a query's CSV
HOME_PAGES = 8  # the names a site is reached by (any Host header a client sends is one more)
OWN_COLUMN_CHOICE = {"_col", "_nocol", "_all_columns"}


def reader_pages(datasette):
    """The home page, rendered once while only immutable files are served (no page
    content depends on the visitor: no login, no per-user data).

    The talks table as HTML opens on the reader's columns: asked as `?_col=` of Datasette,
    so the other columns are neither read nor rendered (the talk page has them all).
    A page that chooses its columns (`_col`, `_nocol`, `_all_columns=1`) and JSON/CSV are
    left alone.

    CSV is asked with `_nofacet=1`: CSV never shows facet counts, and the talks' default facets
    were counted again for each 1,000 rows of a streamed download (7 queries a page)."""

    home_pages: OrderedDict[tuple, list] = OrderedDict()  # by scheme and Host: at most HOME_PAGES

    def is_home_page(scope) -> bool:
        return (scope.get("path") == "/" and scope.get("method") == "GET" and not scope.get("query_string")
                and all(not db.is_mutable for name, db in datasette.databases.items() if name != "_internal"))

    async def home_page(app, scope, receive, send):
        key = (scope.get("scheme"), dict(scope.get("headers") or []).get(b"host"))
        if key in home_pages:
            home_pages.move_to_end(key)
            for message in home_pages[key]:
                await send(message)
            return
        messages: list = []

        async def keep(message):
            messages.append(message)
            await send(message)

        await app(scope, receive, keep)
        if messages and messages[0].get("status") == 200:
            home_pages[key] = messages
            if len(home_pages) > HOME_PAGES:
                home_pages.popitem(last=False)

    def with_reader_columns(scope):
        pairs = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        if OWN_COLUMN_CHOICE & {key for key, _ in pairs}:
            return scope
        # a key's column is shown already (the date for newest_first): the key is not
        sorted_by = [value for key, value in pairs if key in ("_sort", "_sort_desc") and value not in SORT_KEYS.values()]
        columns = list(dict.fromkeys(READER_COLUMNS + sorted_by))
        return dict(scope, query_string=urlencode(pairs + [("_col", c) for c in columns]).encode("latin-1"))

    def without_facets(scope):
        query = scope.get("query_string", b"")
        return dict(scope, query_string=query + (b"&" if query else b"") + b"_nofacet=1")

    def wrap(app):
        async def reader_pages_app(scope, receive, send):
            if scope.get("type") == "http" and is_home_page(scope):
                return await home_page(app, scope, receive, send)
            if scope.get("type") == "http" and READER_TABLE_RE.match(scope.get("path", "")):
                scope = with_reader_columns(scope)
            elif scope.get("type") == "http" and CSV_RE.match(scope.get("path", "")):
                scope = without_facets(scope)
            await app(scope, receive, send)

        return reader_pages_app

    return wrap


def add_filters(env) -> None:
    env.filters["column_label"] = column_label
    env.filters["sort_words"] = sort_words
    env.globals["table_cells"] = table_cells
    env.globals["sort_keys"] = SORT_KEYS
    env.filters["natural_order"] = natural_order
    env.globals["render_description"] = lambda text: Markup(
        f'<div class="talk-description">{render_markdown(text)}</div>') if text else ""


def home_vars(template, database, datasette):
    if template != "index.html":  # only the home page shows the freshness line
        return {}

    async def inner():
        found: dict = {}
        names = [d for d in datasette.databases if d != "_internal"]
        if not names:
            return found
        db = datasette.get_database(database or names[0])
        try:  # one small row, written by the build (index/pipeline.py index_summary)
            rows = (await db.execute(
                "select finished_at, status, live_talks, series_count, video_hours from refresh_runs "
                "where finished_at is not null order by id desc limit 1")).rows
        except Exception:  # an index without these tables yet: no freshness line
            return found
        if rows:
            found["last_refresh"] = dict(rows[0])
        found.update(await db.execute_fn(home_lists))
        found["home_database"] = db.name
        return found

    return inner


HOME_NEWEST = 8


def home_lists(conn) -> dict:
    """What the home page lists (rendered once while the file is served): each topic and series
    with its number of talks, the newest talks. Topics are counted in one pass over the facet keys."""
    from collections import Counter

    try:
        keys = conn.execute("select group_concat(k.keys, '') from talk_facet_keys k join talks t "
                            "on t.rowid = k.rowid where t.gone_since is null").fetchone()[0] or ""
        topics = dict(conn.execute("select key, value from talk_facet_values where facet = 'topics'").fetchall())
        series = conn.execute("select series, count(*) from talks where series is not null and gone_since is null "
                              "group by series order by count(*) desc, series").fetchall()
        newest = conn.execute(f"select id, title, coalesce(event, series), date, duration_s from talks "
                              f"where gone_since is null order by newest_first limit {HOME_NEWEST}").fetchall()
    except Exception:  # an index without these tables yet: the search box alone
        return {}
    counts = Counter(key for key in keys if key in topics)
    return {"home_topics": sorted(((topics[key], n) for key, n in counts.items()), key=lambda pair: -pair[1]),
            "home_series": series,
            "home_newest": [{"id": talk_id, "title": title,
                             "details": " · ".join(str(part) for part in (where, date, human_duration(seconds)
                                                                          if seconds else None) if part)}
                            for talk_id, title, where, date, seconds in newest]}
