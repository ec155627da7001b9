"""Error pages for a reader's mistakes (an unknown sort, SQL SQLite refuses, a search of quotes
alone): a 4xx that says what to do instead, rendered by Datasette's own error.html. A server
fault is left to Datasette's own handler, which logs it."""

from __future__ import annotations

import sqlite3

from datasette import Response
from datasette.database import QueryInterrupted
from markupsafe import Markup

from gputalks.index.order import SORT_KEYS

TOO_LARGE = "This list is too large to count in time; narrow it (a word more, a series, an event)"

# What the talks sort by (gputalks.index.order), as an error names it.
SORTS = ", ".join(f"{key} ({column})" for column, key in SORT_KEYS.items())


def past_time_limit(exception: BaseException) -> bool:
    """A query stopped at Datasette's time limit: its QueryInterrupted, or SQLite's interrupt landing
    while FTS5 opens its table, which SQLite reports as the table's constructor failing (so would
    a damaged FTS table: the one case this reads as a time-out, where a 500 would say no more)."""
    return isinstance(exception, QueryInterrupted) or (
        isinstance(exception, sqlite3.OperationalError) and str(exception).startswith("vtable constructor failed"))


# The headers Datasette's own answers carry under --cors.
CORS_HEADERS = {"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Headers": "Authorization",
                "Access-Control-Expose-Headers": "Link"}


def error_answer(request, exception) -> tuple[int, object, str | None, dict] | None:
    """(status, message, title, details) for what a reader asked wrong: a 4xx that says what to do;
    None for a server fault, which Datasette's own handler answers (and logs)."""
    if "fts5: syntax error" in str(getattr(exception, "message", exception)) and "_search" in request.args \
            and not any(c.isalnum() for c in request.args["_search"]):  # quotes alone: Datasette's search is empty
        return 400, "Type a word to search for: the search held none", "Nothing to search for", {}
    if past_time_limit(exception):  # past the time limit: a list too large, never a 500
        return 400, TOO_LARGE, "Too large to count in time", {}
    status = getattr(exception, "status", None)
    message = getattr(exception, "message", None) or (exception.args[0] if exception.args else "")
    if str(message).startswith("Cannot sort table by"):  # a reader's sort (Datasette says 500): a column with ties
        return 400, f"{message}; " + (
            f"the talks sort by {SORTS}" if request.url_vars.get("table") == "talks"
            else "it sorts by its unique columns") + ", which page without skipping a row", None, {}
    if isinstance(status, int) and 400 <= status < 500:  # Datasette's 4xx errors, as it says them
        if getattr(exception, "message_is_html", False):
            message = Markup(message)
        return status, message, getattr(exception, "title", None), dict(getattr(exception, "error_dict", None) or {})
    if isinstance(exception, (sqlite3.ProgrammingError, sqlite3.Warning)):  # SQL a reader wrote
        return 400, f"Invalid SQL: {exception}", "Invalid SQL", {}
    return None


def error_page(datasette, request, exception):
    """Error pages for a reader's mistakes, as Datasette renders them (its error.html), with
    what to do instead; a server fault is left to Datasette's own handler."""
    answer = error_answer(request, exception)
    if answer is None:
        return None

    async def inner():
        status, message, title, details = answer
        info = {**details, "ok": False, "error": message, "status": status, "title": title}
        headers = dict(CORS_HEADERS) if datasette.cors else {}
        if request.path.split("?")[0].endswith(".json"):
            return Response.json(info, status=status, headers=headers)
        html = await datasette.render_template([f"{status}.html", "error.html"], info, request=request)
        return Response.html(html, status=status, headers=headers)

    return inner
