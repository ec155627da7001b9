"""Datasette plugin for the gputalks index: how cells look, and the home page's freshness line.

Scraped text is untrusted. Every value that becomes HTML here is escaped, or
(descriptions) rendered from Markdown with raw HTML disabled and then
sanitised by nh3; only http(s) URLs become links.
"""

from __future__ import annotations

import json
from html import escape

import nh3
from datasette import hookimpl
from datasette.utils import tilde_decode
from markdown_it import MarkdownIt
from markupsafe import Markup

LINK_COLUMNS = {"url", "youtube_url", "ondemand_url", "slides_url", "profile_url", "deep_link"}
# The columns a reader wants in the talks table; the rest is on the row page.
READER_COLUMNS = ["id", "title", "speakers", "series", "event", "date", "duration_s"]
_markdown = MarkdownIt("commonmark", {"html": False, "linkify": True}).enable("linkify")


def format_duration(seconds: int | float | None) -> str:
    """4334 -> "1:12:14"; 2376 -> "39:36"."""
    if seconds is None:
        return ""
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def safe_url(url) -> str | None:
    return url if isinstance(url, str) and url.startswith(("https://", "http://")) else None


def link(url: str, text: str) -> str:
    return f'<a href="{escape(url, quote=True)}" rel="nofollow noopener">{escape(text)}</a>'


def render_markdown(text: str) -> str:
    return nh3.clean(_markdown.render(text), link_rel="nofollow noopener")


def _row_get(row, key):
    try:
        return row[key]
    except (KeyError, IndexError, TypeError):
        return None


@hookimpl
def render_cell(row, value, column, table, database, datasette):
    if value is None:
        return None
    if column == "duration_s" and isinstance(value, (int, float)):
        return Markup(f'<span title="{int(value)} s">{format_duration(value)}</span>')
    if column == "title" and isinstance(value, str):
        target = safe_url(_row_get(row, "url")) or safe_url(_row_get(row, "deep_link"))
        return Markup(link(target, value)) if target else None
    if column in LINK_COLUMNS and safe_url(value):
        return Markup(link(value, value))
    if column == "description" and isinstance(value, str):
        return Markup(f'<div class="talk-description">{render_markdown(value)}</div>')
    if column == "speakers" and isinstance(value, str) and value.startswith("["):
        return _speaker_links(value, datasette, database)
    return None


def _speaker_links(value: str, datasette, database: str):
    try:
        names = [n for n in json.loads(value) if isinstance(n, str)]
    except ValueError:
        return None

    async def inner():
        db = datasette.get_database(database)
        marks = ",".join("?" * len(names))
        rows = (await db.execute(f"select id, name, profile_url from speakers where name in ({marks})",
                                 names)).rows if names else []
        by_name = {r["name"]: r for r in rows}
        parts = []
        for name in names:
            speaker = by_name.get(name)
            if speaker is None:
                parts.append(escape(name))
                continue
            target = safe_url(speaker["profile_url"]) or datasette.urls.row(database, "speakers", speaker["id"])
            parts.append(link(target, name))
        # An empty Markup would read as "not rendered" and show the raw "[]".
        return Markup(", ".join(parts) or '<span class="no-speakers"></span>')

    return inner


@hookimpl
def extra_template_vars(template, database, table, datasette, request):
    async def inner():
        found = {"reader_columns": READER_COLUMNS}
        names = [d for d in datasette.databases if d != "_internal"]
        if not names:
            return found
        db = datasette.get_database(database or names[0])
        if template == "row.html" and table == "talks" and request is not None:
            talk_id = tilde_decode(request.url_vars.get("pks", ""))
            found["talk_chapters"] = [dict(r) for r in (await db.execute(
                "select start_s, title, deep_link from chapters where talk_id = ? order by position",
                [talk_id])).rows]
        try:
            rows = (await db.execute(
                "select finished_at, mode, status from refresh_runs where finished_at is not null "
                "order by id desc limit 1")).rows
            counts = (await db.execute(
                "select count(*) as talks, count(distinct series) as series, "
                "sum(coalesce(duration_s, 0)) / 3600 as hours from talks where gone_since is null")).rows
        except Exception:  # an index without these tables yet: no freshness line
            return found
        if rows:
            found["last_refresh"] = dict(rows[0])
        if counts:
            found["index_counts"] = dict(counts[0])
        return found

    return inner
