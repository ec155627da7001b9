"""`gputalks search`: the site's ranked search from the command line."""

from __future__ import annotations

import sqlite3

import click

from gputalks.cli.common import DB_OPTION, CliError, open_index
from gputalks.exit_codes import EXIT_USAGE
from gputalks.search.query import too_long


@click.command()
@click.argument("query")
@DB_OPTION
@click.option("--limit", default=10, show_default=True, type=int, help="How many talks, and how many moments.")
@click.option("--inside", is_flag=True, help="Only moments inside talks (chapter titles and transcripts).")
def search(query, db_path, limit, inside) -> None:
    """Search the talks as the site's search box does, then inside them: which talks answer
    QUERY, and where in a video is it explained?

    Talks come first, best match first (titles, speakers, series, events, topics and
    descriptions; a topic's aliases and a misspelt word still find their talks), then the
    best chapter and transcript moments, each with a link to that second of the video.
    """
    from gputalks.durations import human_duration
    from gputalks.search.ranking import MATCHES, SOME_WORDS, search_inside, search_talks

    if refused := too_long(query):
        raise CliError(refused, EXIT_USAGE)
    db, db_path = open_index(db_path)
    try:
        talks = [] if inside else search_talks(db, query, limit)
        hits = search_inside(db, query, limit)
    except sqlite3.OperationalError as exc:
        raise CliError(f"{db_path}: cannot search ({exc}); "
                       "run `gputalks refresh` to bring the index up to date") from exc
    if not inside:
        if not talks:
            click.echo(f"no talk matches {query!r}")
        elif talks[0]["tier"] == SOME_WORDS:
            click.echo(f"no talk matches all of {query!r}; closest:")
        shown = None
        for talk in talks:
            if MATCHES[talk["tier"]] != shown:
                shown = MATCHES[talk["tier"]]
                click.echo(f"{shown}:")
            where = " · ".join(str(part) for part in (talk["event"] or talk["series"], talk["date"] or talk["year"],
                                                        human_duration(talk["duration_s"]) if talk["duration_s"] else None,
                                                        talk["speakers"]) if part)
            click.echo(f"  {talk['title']}  ({where})\n    {talk['id']}")
        click.echo("")
    if not hits:
        click.echo(f"no chapter or transcript mentions {query!r}")
    for hit in hits:
        minutes, seconds = divmod(int(hit["start_s"] or 0), 60)
        chapter = f" / {hit['chapter']}" if hit["chapter"] else ""
        click.echo(f"{hit['talk']}{chapter}  [{minutes}:{seconds:02d}, {hit['kind']}]\n"
                   f"    {hit['snippet']}\n    {hit['deep_link']}")
