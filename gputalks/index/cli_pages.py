"""The `gputalks` commands for the docs and the readers: export the docs' tables, search,
serve and publish the index."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import click

from .cli_common import DB_OPTION, CliError, config_error, current_project, db_path_for, open_index
from .curation import CurationError, load_curation
from .store import StoreError, bring_up_to_date, check_sqlite, open_db

@dataclass(frozen=True)
class ExportOptions:
    db_path: str | None
    fmt: str
    lang: str | None
    update_path: str | None
    curation_paths: tuple[str, ...]
    allow_missing: bool
    list_tables: bool
    markers: bool


def _read_page(path: Path) -> str:
    """A docs page as it is, line endings included."""
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            return handle.read()
    except UnicodeDecodeError as exc:
        raise CliError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from exc


def _write_page(path: Path, text: str) -> None:
    """Replace a docs page in one step: a failed write (full disk, read-only directory) leaves the
    page as it was and no temporary file behind."""
    temporary = path.with_name(path.name + ".gputalks-tmp")
    try:
        with open(temporary, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        temporary.replace(path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise CliError(f"{path}: cannot write the page ({exc.strerror or exc}); it is unchanged") from exc


@click.command()
@click.argument("table_id", required=False)
@DB_OPTION
@click.option("--format", "fmt", type=click.Choice(["markdown", "csv", "json"]), default="markdown",
              show_default=True)
@click.option("--lang", type=click.Choice(["fr", "en"]), help="Headers, curator cells and durations in "
              "this language (default: the curation file's).")
@click.option("--update", "update_path", type=click.Path(exists=True, dir_okay=False),
              help="Rewrite the marked regions of this Markdown file in place.")
@click.option("--curation", "curation_paths", multiple=True, type=click.Path(exists=True, dir_okay=False),
              help="Curation file(s) (default: the project's curation/*.toml).")
@click.option("--allow-missing", is_flag=True, help="A row whose talk is missing gets a visible "
              "placeholder and a warning instead of failing.")
@click.option("--list", "list_tables", is_flag=True, help="List the curated tables and exit.")
@click.option("--markers", is_flag=True, help="Print TABLE_ID inside its markers, ready to paste into a docs page.")
def export(table_id: str | None, **options: Any) -> None:
    """Print a curated table (titles, links, durations from the index), or
    rewrite the regions of a Markdown page between
    <!-- gputalks:table ID --> and <!-- /gputalks --> with --update
    (optionally <!-- gputalks:table ID lang=en -->).
    """
    from .export import ExportError, marker_block, render, update_markdown

    opts = ExportOptions(**options)
    db_path, fmt, lang, update_path = opts.db_path, opts.fmt, opts.lang, opts.update_path
    curation_paths, allow_missing = opts.curation_paths, opts.allow_missing

    project = None if curation_paths and db_path else current_project()
    try:
        tables = load_curation([Path(p) for p in curation_paths] or project.curation_files)
        if opts.list_tables:
            for table in tables.values():
                click.echo(f"{table.id:16} {table.kind:5} {len(table.rows):3} rows  {table.source.name}")
            return
        db = open_db(db_path_for(db_path, project), create=False)
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
            original = _read_page(path)
            kept: list[str] = []
            updated = update_markdown(original, render_table, kept)
            warnings += [f"{item} (the index has no value for it)" for item in kept]
            if updated != original:
                _write_page(path, updated)
            click.echo(f"{path}: {'updated' if updated != original else 'unchanged'}", err=True)
        elif table_id and opts.markers:
            click.echo(marker_block(table_id, render_table(table_id, None), lang), nl=False)
        elif table_id:
            click.echo(render_table(table_id, None), nl=False)
        else:
            raise click.UsageError("name a TABLE_ID, or use --update PATH or --list")
    except (CurationError, FileNotFoundError) as exc:
        raise CliError(str(exc)) from exc
    except StoreError as exc:
        raise config_error(exc) from exc
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)


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
    from .durations import human_duration
    from .search import search_inside, search_talks

    db, db_path = open_index(db_path)
    try:
        talks = [] if inside else search_talks(db, query, limit)
        hits = search_inside(db, query, limit)
    except sqlite3.OperationalError as exc:
        raise CliError(f"{db_path}: cannot search ({exc}); "
                       "run `gputalks refresh` to bring the index up to date") from exc
    if not inside:
        click.echo(f"talks matching {query!r}:" if talks else f"no talk matches {query!r}")
        for talk in talks:
            where = " · ".join(str(part) for part in (talk["series"] or talk["event"], talk["date"],
                                                        human_duration(talk["duration_s"]) if talk["duration_s"] else None) if part)
            click.echo(f"  {talk['title']}  ({where})\n    {talk['id']}")
        click.echo("")
    if not hits:
        click.echo(f"no chapter or transcript mentions {query!r}")
    for hit in hits:
        minutes, seconds = divmod(int(hit["start_s"] or 0), 60)
        chapter = f" / {hit['chapter']}" if hit["chapter"] else ""
        click.echo(f"{hit['talk']}{chapter}  [{minutes}:{seconds:02d}, {hit['kind']}]\n"
                   f"    {hit['snippet']}\n    {hit['deep_link']}")


@click.command()
@DB_OPTION
@click.option("--port", default=8001, show_default=True, type=click.IntRange(1, 65535), help="Port to listen on.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Server processes (default: one per core). Each serves any page; more processes "
                   "serve more readers at once.")
def serve(db_path, port, host, workers) -> None:
    """Serve the index with Datasette: read-only (immutable), faceted, searchable.

    Configured by metadata.json and the templates and plugins in datasette/. An index an older
    gputalks built is first brought up to date (the columns this one adds, on a copy swapped in).
    """
    from .serve import serve_command

    db_path = db_path_for(db_path, current_project(required=False))
    try:
        check_sqlite(db_path)
        bring_up_to_date(db_path)
        command, environment = serve_command(db_path, port=port, host=host, workers=workers)
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from exc
    except StoreError as exc:
        raise config_error(exc) from exc
    click.echo(f"serving {db_path} at http://{host}:{port}/ (Ctrl-C stops)")
    sys.stdout.flush()
    # uvicorn replaces this process: SIGTERM and Ctrl-C reach it directly and it stops its workers.
    os.execve(command[0], command, environment)


@click.command()
@click.argument("target", type=click.Choice(["fly", "cloudrun", "pages"]))
@DB_OPTION
@click.option("--app", help="Fly app or Cloud Run service name (default: the index file's name).")
@click.option("--install-from", metavar="URL",
              help="Where the container gets gputalks when this version is not on the package index: "
                   "a URL pip installs (git+https://github.com/OWNER/gputalks@v0.1.0). "
                   "Default: gputalks==THIS_VERSION.")
@click.option("--generate-dir", type=click.Path(file_okay=False),
              help="Write the deployable directory (Dockerfile, the index, fly.toml for Fly) here and stop.")
@click.option("--out", type=click.Path(file_okay=False), help="pages: the directory to write the static site into: "
              "a new or empty one, or one an earlier `publish pages` wrote (replaced whole).")
def publish(target, db_path, app, install_from, generate_dir, out) -> None:
    """Publish the index with `datasette publish fly|cloudrun`: gputalks installed in the
    container (its Datasette plugin, templates and metadata come with it), the index served
    immutable. Fly needs datasette-publish-fly and flyctl, Cloud Run gcloud (neither for
    --generate-dir).

    `publish pages --out DIR` writes a static site instead, for a docs site with no server: a
    page per talk, speaker, topic and series, and a search page whose search runs in the
    reader's browser (Pagefind). Its links are relative: it works under any sub-path.
    """
    from .outputs import OutputRefused, check_output_dir, replacing_dir
    from .publish import Publication, generate_cloudrun_dir, publish_command

    project = current_project(required=False)
    root = project.root if project else None
    try:
        for folder in filter(None, [out if target == "pages" else None, generate_dir]):
            check_output_dir(Path(folder), root)
    except OutputRefused as exc:
        raise config_error(exc) from exc
    db_path = db_path_for(db_path, project)
    if not db_path.exists():
        raise CliError(f"{db_path}: no index here; run `gputalks refresh` first")
    try:
        check_sqlite(db_path)
        bring_up_to_date(db_path)
    except StoreError as exc:
        raise config_error(exc) from exc
    if target == "pages":
        _publish_pages(db_path, out, root)
        return
    publication = Publication(target, db_path, app=app, install_from=install_from)
    if not generate_dir:
        sys.exit(subprocess.call(publish_command(publication)))
    try:
        with replacing_dir(Path(generate_dir), root) as work:
            publication = replace(publication, generate_dir=work)
            if target == "cloudrun":
                generate_cloudrun_dir(publication)
            elif subprocess.call(publish_command(publication)) != 0:
                raise CliError(f"datasette publish fly could not write {generate_dir}; it is unchanged")
    except OutputRefused as exc:
        raise config_error(exc) from exc
    except OSError as exc:
        raise CliError(f"cannot write {generate_dir}: {exc}; it is unchanged") from exc
    how = (f"gcloud run deploy --source {generate_dir}" if target == "cloudrun"
           else f"flyctl deploy from {generate_dir}")
    click.echo(f"wrote {generate_dir}: build and deploy it with `{how}`")


def _publish_pages(db_path: Path, out: str | None, project_root: Path | None) -> None:
    from .outputs import OutputRefused
    from .static_site import build_site

    if not out:
        raise click.UsageError("publish pages needs --out DIR")
    try:
        report = build_site(db_path, Path(out), project_root)
    except OutputRefused as exc:
        raise config_error(exc) from exc
    except (OSError, RuntimeError, sqlite3.Error) as exc:
        raise CliError(f"cannot write the pages into {out}: {exc}; it is unchanged") from exc
    click.echo(f"wrote {report.pages} pages ({report.talks} talks) and their search index into {report.out}")
