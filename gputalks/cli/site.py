"""`gputalks serve` and `gputalks publish`: the index for readers, served by Datasette, deployed,
or written as a static site."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import click

from gputalks.cli.common import DB_OPTION, CliError, config_error, current_project, db_path_for
from gputalks.index.store import StoreError, bring_up_to_date, check_sqlite


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
    from gputalks.site.serve import serve_command

    db_path = db_path_for(db_path, current_project(required=False))
    if not db_path.exists():
        raise CliError(f"{db_path}: no index here; run `gputalks refresh` first")
    try:
        check_sqlite(db_path)
        bring_up_to_date(db_path)
        command, environment = serve_command(db_path, port=port, host=host, workers=workers)
    except (FileNotFoundError, RuntimeError) as exc:
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
    from gputalks.site.outputs import OutputRefused, check_output_dir, replacing_dir
    from gputalks.site.publish import Publication, generate_cloudrun_dir, publish_command

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
    from gputalks.site.outputs import OutputRefused
    from gputalks.site.static import build_site

    if not out:
        raise click.UsageError("publish pages needs --out DIR")
    try:
        report = build_site(db_path, Path(out), project_root)
    except OutputRefused as exc:
        raise config_error(exc) from exc
    except (OSError, RuntimeError, sqlite3.Error) as exc:
        raise CliError(f"cannot write the pages into {out}: {exc}; it is unchanged") from exc
    click.echo(f"wrote {report.pages} pages ({report.talks} talks) and their search index into {report.out}")
