"""What makes a served file a gputalks index to Datasette: its metadata.json (title, canned
queries, facets, labels) for every database that is a gputalks index, so a plain
`datasette talks.db` with gputalks installed serves the reader's pages; and error pages
that log a traceback for 500s only.

Installed, this module and the others here are registered by gputalks' entry points
(`[project.entry-points.datasette]`); in a published container, where gputalks itself is
not installed, they are loaded from a plugins directory and the metadata comes from the
`--metadata` file Datasette is given.
"""

from __future__ import annotations

import json
import sqlite3
import traceback
from pathlib import Path
from weakref import WeakKeyDictionary

from datasette import hookimpl
from datasette.plugins import pm
from datasette.utils import add_cors_headers
from datasette.utils.asgi import Base400, Response
from datasette.views.base import DatasetteError
from markupsafe import Markup

from gputalks.index.order import SORT_KEYS

# metadata.json beside this folder, when the plugins run from the installed package.
METADATA = Path(__file__).resolve().parents[2] / "metadata.json"
# The tables every gputalks index has (index/schema.py).
INDEX_TABLES = ("talks", "talk_changes", "refresh_runs")
# What the talks sort by (gputalks.index.order), as an error names it.
SORTS = ", ".join(f"{key} ({column})" for column, key in SORT_KEYS.items())
# Each Datasette's metadata, keyed by the database names it had when it was made.
METADATA_OF: WeakKeyDictionary = WeakKeyDictionary()


def is_index(path: str | None) -> bool:
    """Whether the file at `path` is a gputalks index (read-only look at its schema)."""
    if not path:
        return False
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            found = conn.execute(f"select count(*) from sqlite_master where type = 'table' and name in "
                                 f"({', '.join('?' * len(INDEX_TABLES))})", INDEX_TABLES).fetchone()[0]
        return found == len(INDEX_TABLES)
    except sqlite3.Error:
        return False


def index_metadata(datasette) -> dict:
    """metadata.json with its `talks` database section under the name of each served index
    (Datasette names a database after its file's stem); empty where none is an index."""
    names = tuple(datasette.databases)
    known = METADATA_OF.get(datasette)
    if known is not None and known[0] == names:
        return known[1]
    indexes = [name for name, db in datasette.databases.items() if not db.is_memory and is_index(db.path)]
    metadata: dict = {}
    if indexes and METADATA.is_file():
        metadata = json.loads(METADATA.read_text(encoding="utf-8"))
        section = metadata.get("databases", {}).pop("talks", {})
        metadata["databases"] = {name: section for name in indexes}
    METADATA_OF[datasette] = (names, metadata)
    return metadata


@hookimpl
def get_metadata(datasette, key, database, table):
    return index_metadata(datasette)


# Datasette's own error pages (a default plugin): they log every error page, each 404 included,
# as a rich traceback with every frame's local variables, 170 lines and ~100 ms of a worker per
# request, so a crawler's 404s would flood the log and hold the workers. gputalks' plugin takes
# their place through the plugin manager (pluggy's API): the same pages, a traceback for 500s only.
DEFAULT_ERROR_PAGES = "datasette.handle_exception"


@hookimpl
def startup(datasette):
    if pm.get_plugin(DEFAULT_ERROR_PAGES) is not None:
        pm.unregister(name=DEFAULT_ERROR_PAGES)


@hookimpl
def handle_exception(datasette, request, exception):
    """Datasette's error page for `exception`: 4xx with its message (SQL a reader wrote that
    SQLite refuses, `?_where=1;drop table talks` included, is a 400), anything else a 500 whose
    traceback is logged (Python's, one frame a line)."""

    async def inner():
        title, info = None, {}
        if isinstance(exception, Base400):
            status, message = exception.status, exception.args[0] if exception.args else ""
        elif isinstance(exception, DatasetteError):
            status, info, message, title = exception.status, exception.error_dict, exception.message, exception.title
            message = Markup(message) if exception.message_is_html else message
            if message.startswith("Cannot sort table by"):  # a reader's sort: a column with ties, or none
                status, message = 400, f"{message}; " + (
                    f"the talks sort by {SORTS}" if request.url_vars.get("table") == "talks"
                    else "it sorts by its unique columns") + ", which page without skipping a row"
        elif isinstance(exception, (sqlite3.ProgrammingError, sqlite3.Warning)):
            status, message, title = 400, f"Invalid SQL: {exception}", "Invalid SQL"
        else:
            status, message = 500, str(exception)
            traceback.print_exception(exception)
        info = {**info, "ok": False, "error": message, "status": status, "title": title}
        headers = {}
        if datasette.cors:
            add_cors_headers(headers)
        if request.path.split("?")[0].endswith(".json"):
            return Response.json(info, status=status, headers=headers)
        html = await datasette.render_template([f"{status}.html", "error.html"], info, request=request)
        return Response.html(html, status=status, headers=headers)

    return inner
