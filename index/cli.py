"""The `gputalks` command: a thin Click layer over plain functions."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import click
from rich.console import Console

from . import refresh as refresh_module
from .history import recent_changes
from .store import open_db

DB_OPTION = click.option("--db", "db_path", default="talks.db", show_default=True,
                         type=click.Path(dir_okay=False), help="The SQLite index.")
CONFIG_OPTION = click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False),
                             help="Sources config (default: config/sources.toml of this checkout).")
OVERRIDES_OPTION = click.option("--overrides", "overrides_path", type=click.Path(dir_okay=False),
                                default=str(refresh_module.DEFAULT_OVERRIDES), show_default=False,
                                help="Manual link overrides (default: config/overrides.toml).")
WAIT_OPTION = click.option("--wait", is_flag=True, help="Wait for a running refresh instead of refusing.")

err = Console(stderr=True, highlight=False)


@click.group()
@click.version_option(package_name="gputalks")
def cli() -> None:
    """gputalks: a searchable index of GPU-programming talks.

    Pulls GPU MODE lectures (gpu-mode/lectures README and tree), YouTube
    playlists and videos (yt-dlp) and NVIDIA GTC sessions into one SQLite
    index, served by Datasette and exported as the docs' tables.
    """


def _load_config(config_path: str | None) -> dict:
    try:
        return refresh_module.load_config(config_path)
    except (FileNotFoundError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc


def _print_report(report: refresh_module.RunReport) -> None:
    for outcome in report.outcomes:
        line = f"{outcome.name:8} {outcome.status:7} {outcome.items:5} items  {outcome.documents:4} documents"
        if outcome.error:
            line += f"  {outcome.error}"
        click.echo(line)
    errors = [p for p in report.problems if p.severity == "error"]
    unlinked = [p for p in report.problems if p.severity == "unlinked"]
    click.echo(f"run {report.run_id}: {report.status}; {report.stats.talks_written} talk rows written, "
               f"{report.stats.changes} changes ({report.stats.new} new, {report.stats.gone} gone), "
               f"{report.requests} requests; {len(errors)} item errors, {len(unlinked)} unlinked "
               "(see `gputalks status`)")


def _run(work) -> None:
    with err.status("starting") as spinner:
        try:
            report = work(lambda message: spinner.update(message),
                          lambda url: spinner.update(f"fetching {url}"))
        except refresh_module.RefreshLocked as exc:
            spinner.stop()
            click.echo(f"gputalks: {exc}", err=True)
            sys.exit(refresh_module.EXIT_LOCKED)
        except (FileNotFoundError, ValueError) as exc:
            raise click.ClickException(str(exc)) from exc
    _print_report(report)
    if report.exit_code:
        failed = "; ".join(f"{o.name}: {o.error}" for o in report.outcomes if o.status == "failed")
        click.echo(f"gputalks: {report.status}: {failed or 'see gputalks status'}", err=True)  # one line
    sys.exit(report.exit_code)


@cli.command()
@DB_OPTION
@click.option("--snapshot", type=click.Path(exists=True, file_okay=False),
              help="Replay a recorded refresh (a directory with manifest.json) instead of the network.")
@click.option("--source", "sources", multiple=True, type=click.Choice(list(refresh_module.SOURCES)),
              help="Refresh only this source (repeatable); the others keep their last good data.")
@CONFIG_OPTION
@OVERRIDES_OPTION
@WAIT_OPTION
def refresh(db_path, snapshot, sources, config_path, overrides_path, wait) -> None:
    """Fetch the sources, archive the raw documents, rebuild the index.

    A source that fails keeps its last good data; the others still refresh.
    Exit codes: 0 ok, 1 partial (a source failed), 3 all sources failed,
    4 another refresh is running.
    """
    config = _load_config(config_path)
    _run(lambda report, on_request: refresh_module.refresh(
        db_path, config, snapshot=snapshot, sources=list(sources) or None,
        overrides_path=overrides_path, report=report, on_request=on_request, wait=wait))


@cli.command()
@DB_OPTION
@CONFIG_OPTION
@OVERRIDES_OPTION
@WAIT_OPTION
def rebuild(db_path, config_path, overrides_path, wait) -> None:
    """Re-parse the archived raw documents in the DB and rebuild the index (no network)."""
    config = _load_config(config_path)
    _run(lambda report, on_request: refresh_module.rebuild(
        db_path, config, overrides_path=overrides_path, report=report, wait=wait))


@cli.command()
@DB_OPTION
@click.option("--all", "show_all", is_flag=True, help="List every problem, notes included.")
def status(db_path, show_all) -> None:
    """Counts per source, the last run, linked/unlinked counts and problems found."""
    try:
        db = open_db(db_path, create=False)
    except FileNotFoundError as exc:
        raise click.ClickException(str(exc)) from exc
    runs = list(db.query("select * from refresh_runs where status != 'running' order by id desc limit 1"))
    if not runs:
        raise click.ClickException(f"{db_path}: no finished refresh yet")
    run = runs[0]
    click.echo(f"last run {run['id']} ({run['mode']}): {run['status']}, started {run['started_at']}, "
               f"finished {run['finished_at']}, exit code {run['exit_code']}")
    interrupted = db.execute("select count(*) from refresh_runs where status = 'running' and id > ?",
                             [run["id"]]).fetchone()[0]
    if interrupted:
        click.echo(f"  {interrupted} later run(s) did not finish (killed or still running)")
    for name, info in json.loads(run["sources"] or "{}").items():
        click.echo(f"  {name:8} {info['status']:7} {info['items']} items"
                   + (f"  {info['error']}" if info.get("error") else ""))
    click.echo(f"talks: {db.table('talks').count} ({_count(db, 'talks where gone_since is not null')} "
               "no longer seen)")
    click.echo("linked / unlinked per source:")
    for row in db.query(
            "select s.source, sum(case when (select count(distinct source) from talk_sources x "
            "where x.talk_id = s.talk_id) > 1 then 1 else 0 end) as linked, count(*) as items "
            "from talk_sources s group by s.source order by s.source"):
        click.echo(f"  {row['source']:8} {row['linked']} linked to another source, "
                   f"{row['items'] - row['linked']} on their own, of {row['items']}")
    problems = list(db.query("select source, item, severity, reason from problems where run_id = ? "
                             "order by severity, source, item", [run["problems_run"] or run["id"]]))
    by_severity: dict[str, list] = {}
    for p in problems:
        by_severity.setdefault(p["severity"], []).append(p)
    for severity in ("error", "warning", "unlinked", "note"):
        found = by_severity.get(severity, [])
        if not found:
            continue
        click.echo(f"{severity}s: {len(found)}")
        if severity == "note" and not show_all:
            click.echo("  (notes hidden; --all lists them)")
            continue
        for p in found:
            click.echo(f"  {p['source']:8} {p['item'] or '-'}: {p['reason']}")


def _count(db, table_and_where: str) -> int:
    return db.execute(f"select count(*) from {table_and_where}").fetchone()[0]


@cli.command()
@DB_OPTION
@click.option("--since", help="Only changes on or after this date (YYYY-MM-DD).")
def changes(db_path, since) -> None:
    """What changed in the index, refresh by refresh."""
    try:
        db = open_db(db_path, create=False)
    except FileNotFoundError as exc:
        raise click.ClickException(str(exc)) from exc
    rows = recent_changes(db, since)
    if not rows:
        click.echo("no changes" + (f" since {since}" if since else ""))
    for row in rows:
        label = {"_new": "new talk", "_gone": "no longer seen", "_back": "seen again"}.get(row["field"])
        what = label or f"{row['field']}: {_short(row['old_value'])} -> {_short(row['new_value'])}"
        click.echo(f"{row['changed_at'][:10]}  {row['talk_id']}  {what}")


def _short(value: str | None, width: int = 60) -> str:
    if value is None:
        return "(none)"
    value = value.replace("\n", " ")
    return value if len(value) <= width else value[: width - 1] + "…"


@cli.command()
@click.argument("table_id", required=False)
@DB_OPTION
@click.option("--format", "fmt", type=click.Choice(["markdown", "csv", "json"]), default="markdown",
              show_default=True)
@click.option("--lang", type=click.Choice(["fr", "en"]), help="Headers, curator cells and durations in "
              "this language (default: the curation file's).")
@click.option("--update", "update_path", type=click.Path(exists=True, dir_okay=False),
              help="Rewrite the marked regions of this Markdown file in place.")
@click.option("--curation", "curation_paths", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="Curation file(s) (default: config/curation/*.toml).")
@click.option("--allow-missing", is_flag=True, help="A row whose talk is missing gets a visible "
              "placeholder and a warning instead of failing.")
@click.option("--list", "list_tables", is_flag=True, help="List the curated tables and exit.")
def export(table_id, db_path, fmt, lang, update_path, curation_paths, allow_missing, list_tables) -> None:
    """Print a curated table (titles, links, durations from the index), or
    rewrite the regions of a Markdown page between
    <!-- gputalks:table ID --> and <!-- /gputalks --> with --update.
    """
    from .export import ExportError, load_curation, render, update_markdown

    try:
        tables = load_curation([Path(p) for p in curation_paths] or None)
        if list_tables:
            for table in tables.values():
                click.echo(f"{table.id:16} {table.kind:5} {len(table.rows):3} rows  {table.source.name}")
            return
        db = open_db(db_path, create=False)
        warnings: list[str] = []

        def render_table(wanted: str, region_lang: str | None) -> str:
            if wanted not in tables:
                raise ExportError(f"unknown table {wanted!r}; known: {', '.join(tables)}")
            text, found = render(db, tables[wanted], fmt="markdown" if update_path else fmt,
                                 lang=region_lang or lang, allow_missing=allow_missing)
            warnings.extend(found)
            return text

        if update_path:
            path = Path(update_path)
            original = path.read_text(encoding="utf-8")
            updated = update_markdown(original, render_table)
            if updated != original:
                temporary = path.with_name(path.name + ".gputalks-tmp")
                temporary.write_text(updated, encoding="utf-8")
                temporary.replace(path)
            click.echo(f"{path}: {'updated' if updated != original else 'unchanged'}", err=True)
        elif table_id:
            click.echo(render_table(table_id, None), nl=False)
        else:
            raise click.UsageError("name a TABLE_ID, or use --update PATH or --list")
    except (ExportError, FileNotFoundError) as exc:
        raise click.ClickException(str(exc)) from exc
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)


@cli.command()
@click.argument("query")
@DB_OPTION
@click.option("--limit", default=10, show_default=True, type=int, help="How many hits.")
def search(query, db_path, limit) -> None:
    """Search inside talks (chapter titles and transcripts): where is QUERY explained?

    Prints each hit with the talk, the chapter and a link to that second of the video.
    """
    from .search import search_inside

    try:
        db = open_db(db_path, create=False)
    except FileNotFoundError as exc:
        raise click.ClickException(str(exc)) from exc
    try:
        hits = search_inside(db, query, limit)
    except sqlite3.OperationalError as exc:
        raise click.ClickException(f"{db_path}: cannot search inside talks ({exc}); "
                                   "run `gputalks refresh` to bring the index up to date") from exc
    if not hits:
        click.echo(f"no chapter or transcript mentions {query!r}")
    for hit in hits:
        minutes, seconds = divmod(int(hit["start_s"] or 0), 60)
        chapter = f" / {hit['chapter']}" if hit["chapter"] else ""
        click.echo(f"{hit['talk']}{chapter}  [{minutes}:{seconds:02d}, {hit['kind']}]\n"
                   f"    {hit['snippet']}\n    {hit['deep_link']}")


@cli.command()
@DB_OPTION
@click.option("--port", default=8001, show_default=True, type=int, help="Port to listen on.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
def serve(db_path, port, host) -> None:
    """Serve the index with Datasette: read-only (immutable), faceted, searchable.

    Configured by metadata.json and the templates and plugins in datasette/.
    """
    from .serve import datasette_command

    try:
        command = datasette_command(db_path, port=port, host=host)
    except FileNotFoundError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"serving {db_path} at http://{host}:{port}/ (Ctrl-C stops)")
    sys.exit(subprocess.call(command))


if __name__ == "__main__":
    cli()
