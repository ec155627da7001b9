"""The `gputalks` command: a thin Click layer. Each command reads its options,
finds the project, calls one function and prints the result.

Over 300 lines because it holds every command's options and help text, the
user-facing documentation of the tool; no logic lives here.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from . import pipeline
from .config import Settings, load_config, project_settings
from .curation import CurationError, load_curation
from .history import recent_changes
from .project import PROJECT_ENV, Project, ProjectError, init_project, load_project
from .runs import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_LOCKED, EXIT_USAGE, RefreshLocked, RunReport, index_status
from .validation import ConfigError
from .store import IndexFiles, StoreError, check_sqlite, open_db, read_archive
from .worker import WorkerDied

DB_OPTION = click.option("--db", "db_path", type=click.Path(dir_okay=False),
                         help="The SQLite index (default: the project's, else talks.db here).")
CONFIG_OPTION = click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False),
                             help="Sources config to use instead of the project's gputalks.toml.")
OVERRIDES_OPTION = click.option("--overrides", "overrides_path", type=click.Path(dir_okay=False),
                                help="Manual link overrides (default: the project's overrides.toml).")
WAIT_OPTION = click.option("--wait", type=click.FloatRange(min=0), is_flag=False, flag_value=float("inf"), default=0.0,
                           metavar="[SECONDS]", help="Wait for a running refresh instead of refusing: "
                           "--wait for as long as it takes, --wait 600 for at most 600 s (then exit 4).")
LENIENT_OPTION = click.option("--lenient", is_flag=True, help="Overrides naming a talk or an item the index "
                              "does not hold are warnings instead of errors.")

err = Console(stderr=True, highlight=False)


class CliError(click.ClickException):
    """What went wrong, one line each on stderr ("gputalks: ..."), never a
    traceback; exit 1 by default, 2 for a usage or configuration mistake."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code

    def show(self, file: Any = None) -> None:
        for line in self.format_message().splitlines():
            click.echo(f"gputalks: {line}", err=True)


def _config_error(exc: Exception) -> CliError:
    return CliError(str(exc), EXIT_USAGE)


@click.group()
@click.version_option(package_name="gputalks")
@click.option("--project", "project_dir", envvar=PROJECT_ENV, type=click.Path(),
              help=f"The project directory (its gputalks.toml). Default: ${PROJECT_ENV}, else the nearest "
                   "gputalks.toml in this directory or a parent.")
@click.pass_context
def cli(ctx: click.Context, project_dir: str | None) -> None:
    """gputalks: a searchable index of GPU-programming talks.

    Pulls GPU MODE lectures (gpu-mode/lectures README and tree), YouTube
    playlists and videos (yt-dlp) and NVIDIA GTC sessions into one SQLite
    index, served by Datasette and exported as the docs' tables. Start a
    project in the docs' repository with `gputalks init`.
    """
    ctx.obj = project_dir


def _project(required: bool = True) -> Project | None:
    """The current project; a one-line error when it is required and missing."""
    try:
        return load_project(click.get_current_context().obj)
    except ConfigError as exc:
        raise _config_error(exc) from exc
    except ProjectError as exc:
        if required:
            raise _config_error(exc) from exc
        return None


def _db_path(db_path: str | None, project: Project | None) -> Path:
    if db_path:
        return Path(db_path)
    return project.db if project else Path("talks.db")


def _settings(config_path: str | None, overrides_path: str | None) -> tuple[Settings, Project | None]:
    """The project's settings; with --config and no project, that file alone."""
    project = _project(required=not config_path)
    try:
        if project is not None:
            return project_settings(project, config_path, overrides_path), project
        if overrides_path and not Path(overrides_path).is_file():
            raise ProjectError(f"{overrides_path}: overrides file not found (given with --overrides)")
        return Settings(load_config(config_path), Path(overrides_path) if overrides_path else None), None
    except (ProjectError, ConfigError) as exc:
        raise _config_error(exc) from exc


def _open(db_path: str | None):
    project = _project(required=False)
    path = _db_path(db_path, project)
    try:
        return open_db(path, create=False), path
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from exc
    except StoreError as exc:
        raise _config_error(exc) from exc


def _print_report(report: RunReport) -> None:
    for outcome in report.outcomes:
        line = f"{outcome.name:8} {outcome.status:7} {outcome.items:5} items  {outcome.documents:4} documents"
        if outcome.error or outcome.note:
            line += f"  {outcome.error or outcome.note}"
        click.echo(line)
    errors = [p for p in report.problems if p.severity == "error"]
    unlinked = [p for p in report.problems if p.severity == "unlinked"]
    kept = f", {report.stats.kept_values} known values kept (the sources gave none)" \
        if report.stats.kept_values else ""
    click.echo(f"run {report.run_id}: {report.status}; {report.stats.talks_written} talk rows written, "
               f"{report.stats.changes} changes ({report.stats.new} new, {report.stats.gone} gone){kept}, "
               f"{report.requests} requests; {len(errors)} item errors, {len(unlinked)} unlinked "
               "(see `gputalks status`)")


class Stopped(Exception):
    """SIGTERM or SIGHUP during a command: stop as Ctrl-C does, through every cleanup."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _stop(signum, frame) -> None:
    raise Stopped(signum)


def _end_now(message: str, code: int) -> None:
    """Exit at once after an interruption: every cleanup (the working copy, the lock) has run on
    the way here; threads still waiting on a host or a retry's backoff are not waited for."""
    click.echo(message, err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _run(work) -> None:
    for stop in (signal.SIGTERM, signal.SIGHUP):  # a service manager's stop, a closed terminal
        signal.signal(stop, _stop)
    with err.status("starting") as spinner:
        try:
            report = work(pipeline.Progress(lambda message: spinner.update(message),
                                            lambda url: spinner.update(f"fetching {url}"),
                                            lambda notice: err.print(f"gputalks: {notice}")))
        except RefreshLocked as exc:
            spinner.stop()
            click.echo(f"gputalks: {exc}", err=True)
            sys.exit(EXIT_LOCKED)
        except KeyboardInterrupt:
            spinner.stop()
            _end_now("gputalks: interrupted; the index is unchanged", EXIT_INTERRUPTED)
        except Stopped as exc:
            spinner.stop()
            _end_now(f"gputalks: stopped by {exc}; the index is unchanged", 128 + exc.signum)
        except (ConfigError, ProjectError, StoreError) as exc:
            spinner.stop()
            raise _config_error(exc) from exc
        except (FileNotFoundError, ValueError) as exc:
            raise CliError(str(exc)) from exc
        except WorkerDied as exc:
            spinner.stop()
            raise CliError(f"{exc}; the last good index is unchanged", EXIT_FAILED) from exc
        except (sqlite3.Error, OSError) as exc:  # a full disk, an I/O error: the swap never happened
            spinner.stop()
            raise CliError(f"cannot write the index ({exc}); the last good index is unchanged",
                           EXIT_FAILED) from exc
    _print_report(report)
    if report.exit_code:
        failed = "; ".join(f"{o.name}: {o.error or o.note}" for o in report.outcomes
                           if o.status in ("failed", "partial"))
        click.echo(f"gputalks: {report.status}: {failed or 'see gputalks status'}", err=True)  # one line
    sys.exit(report.exit_code)


@cli.command()
@click.argument("directory", default=".", type=click.Path(file_okay=False))
@click.option("--install-from", metavar="SPEC",
              help="What the nightly workflow installs when this version of gputalks is not on the package "
                   "index: a git URL (git+https://github.com/OWNER/gputalks@v0.1.0) or a path. "
                   "Default: gputalks==THIS_VERSION.")
def init(directory, install_from) -> None:
    """Start a project in DIRECTORY (default: here), e.g. the docs' repository.

    Writes gputalks.toml (the sources: the GPU MODE channel, the
    gpu-mode/lectures repo, GTC sessions), overrides.toml, curation/, a
    nightly workflow (.github/workflows/gputalks-nightly.yml) that installs
    this exact gputalks, and the lines of .gitignore that keep the index out
    of git. Existing files are never overwritten.
    """
    try:
        written = init_project(Path(directory), install_from)
    except (ProjectError, OSError) as exc:
        raise CliError(str(exc)) from exc
    for path in written:
        click.echo(f"wrote {path}")
    click.echo("next:\n"
               "  1. gputalks refresh                      # builds talks.db here (a few minutes)\n"
               "  2. mark a docs page's tables: gputalks export TABLE_ID --markers\n"
               "  3. gputalks export --update docs/PAGE.md\n"
               "  4. commit, push, then run the nightly workflow once by hand with first_run = true\n"
               "     (Actions > nightly refresh > Run workflow): it starts the saved state")


@cli.command()
@DB_OPTION
@click.option("--snapshot", type=click.Path(exists=True, file_okay=False),
              help="Replay a recorded refresh (a directory with manifest.json) instead of the network.")
@click.option("--source", "sources", multiple=True, type=click.Choice(list(pipeline.SOURCES)),
              help="Refresh only this source (repeatable); the others keep their last good data.")
@CONFIG_OPTION
@OVERRIDES_OPTION
@WAIT_OPTION
@LENIENT_OPTION
def refresh(db_path, snapshot, sources, config_path, overrides_path, wait, lenient) -> None:
    """Fetch the sources, archive the raw documents (in TALKS.archive.db beside
    the index), rebuild the index when anything changed.

    A source that fails keeps its last good data; the others still refresh.
    Exit codes: 0 every source ok or unchanged; 1 some source partial or
    failed; 2 usage or configuration error; 3 every source failed; 4 another
    refresh is running; 130 interrupted. The index is unchanged unless the
    run finished.
    """
    settings, project = _settings(config_path, overrides_path)
    options = pipeline.RefreshOptions(sources=list(sources) or None, snapshot=snapshot, wait=wait, lenient=lenient)
    _run(lambda progress: pipeline.refresh(_db_path(db_path, project), settings, options, progress))


@cli.command()
@DB_OPTION
@CONFIG_OPTION
@OVERRIDES_OPTION
@WAIT_OPTION
@LENIENT_OPTION
def rebuild(db_path, config_path, overrides_path, wait, lenient) -> None:
    """Re-parse the archived raw documents and rebuild the index (no network).

    Exit codes: 0 rebuilt; 3 the build failed and the index is unchanged (a
    source's archived documents no longer parse, or no longer give talks they
    gave: `gputalks status` says which and why; a full disk); 2 usage or
    configuration error; 4 a refresh is running; 130 interrupted."""
    settings, project = _settings(config_path, overrides_path)
    _run(lambda progress: pipeline.rebuild(_db_path(db_path, project), settings, wait=wait, lenient=lenient,
                                           progress=progress))


@cli.command()
@DB_OPTION
@click.option("--all", "show_all", is_flag=True, help="List every problem, notes included.")
def status(db_path, show_all) -> None:
    """Counts per source, the last run, linked/unlinked counts and problems found."""
    db, path = _open(db_path)
    try:
        found = index_status(db, read_archive(IndexFiles.of(path)))
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from exc
    if found is None:
        raise CliError(f"{path}: no finished refresh yet")
    run = found.run
    click.echo(f"last run {run['id']} ({run['mode']}): {run['status']}, started {run['started_at']}, "
               f"finished {run['finished_at']}, exit code {run['exit_code']}")
    if found.unfinished_after:
        click.echo(f"  {found.unfinished_after} later run(s) did not finish (killed or still running)")
    for name, info in found.sources.items():
        click.echo(f"  {name:8} {info['status']:7} {info['items']} items"
                   + (f"  {info['error']}" if info.get("error") else ""))
    click.echo(f"talks: {found.talks} ({found.gone} no longer seen)")
    click.echo("linked / unlinked per source:")
    for count in found.links:
        click.echo(f"  {count.source:8} {count.linked} linked to another source, "
                   f"{count.items - count.linked} on their own, of {count.items}")
    by_severity: dict[str, list] = {}
    for p in found.problems:
        by_severity.setdefault(p["severity"], []).append(p)
    for severity in ("error", "warning", "unlinked", "note"):
        listed = by_severity.get(severity, [])
        if not listed:
            continue
        click.echo(f"{severity}s: {len(listed)}")
        if severity == "note" and not show_all:
            click.echo("  (notes hidden; --all lists them)")
            continue
        for p in listed:
            click.echo(f"  {p['source']:8} {p['item'] or '-'}: {p['reason']}")


@cli.command()
@DB_OPTION
@click.option("--since", type=click.DateTime(formats=["%Y-%m-%d"]), metavar="YYYY-MM-DD",
              help="Only changes on or after this date.")
def changes(db_path, since) -> None:
    """What changed in the index, refresh by refresh."""
    since = since.strftime("%Y-%m-%d") if since else None
    db, _ = _open(db_path)
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

    project = None if curation_paths and db_path else _project()
    try:
        tables = load_curation([Path(p) for p in curation_paths] or project.curation_files)
        if opts.list_tables:
            for table in tables.values():
                click.echo(f"{table.id:16} {table.kind:5} {len(table.rows):3} rows  {table.source.name}")
            return
        db = open_db(_db_path(db_path, project), create=False)
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
        raise _config_error(exc) from exc
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)


@cli.command()
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

    db, db_path = _open(db_path)
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


@cli.command()
@DB_OPTION
@click.option("--port", default=8001, show_default=True, type=click.IntRange(1, 65535), help="Port to listen on.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Server processes (default: one per core). Each serves any page; more processes "
                   "serve more readers at once.")
def serve(db_path, port, host, workers) -> None:
    """Serve the index with Datasette: read-only (immutable), faceted, searchable.

    Configured by metadata.json and the templates and plugins in datasette/.
    """
    from .serve import serve_command

    db_path = _db_path(db_path, _project(required=False))
    try:
        check_sqlite(db_path)
        command, environment = serve_command(db_path, port=port, host=host, workers=workers)
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from exc
    except StoreError as exc:
        raise _config_error(exc) from exc
    click.echo(f"serving {db_path} at http://{host}:{port}/ (Ctrl-C stops)")
    sys.stdout.flush()
    # uvicorn replaces this process: SIGTERM and Ctrl-C reach it directly and it stops its workers.
    os.execve(command[0], command, environment)


@cli.command()
@click.argument("target", type=click.Choice(["fly", "cloudrun"]))
@DB_OPTION
@click.option("--app", help="Fly app or Cloud Run service name (default: the index file's name).")
@click.option("--install-from", metavar="URL",
              help="Where the container gets gputalks when this version is not on the package index: "
                   "a URL pip installs (git+https://github.com/OWNER/gputalks@v0.1.0). "
                   "Default: gputalks==THIS_VERSION.")
@click.option("--generate-dir", type=click.Path(file_okay=False),
              help="Write the deployable directory (Dockerfile, the index, fly.toml for Fly) here and stop.")
def publish(target, db_path, app, install_from, generate_dir) -> None:
    """Publish the index with `datasette publish fly|cloudrun`: gputalks installed in the
    container (its Datasette plugin, templates and metadata come with it), the index served
    immutable. Fly needs datasette-publish-fly and flyctl, Cloud Run gcloud (neither for
    --generate-dir).
    """
    from .publish import Publication, generate_cloudrun_dir, publish_command

    db_path = _db_path(db_path, _project(required=False))
    if not db_path.exists():
        raise CliError(f"{db_path}: no index here; run `gputalks refresh` first")
    try:
        check_sqlite(db_path)
    except StoreError as exc:
        raise _config_error(exc) from exc
    publication = Publication(target, db_path, app=app, install_from=install_from,
                              generate_dir=Path(generate_dir) if generate_dir else None)
    if target == "cloudrun" and generate_dir:
        try:
            written = generate_cloudrun_dir(publication)
        except (OSError, FileExistsError) as exc:
            raise CliError(f"cannot write {generate_dir}: {exc}") from exc
        click.echo(f"wrote {written}: build and deploy it with `gcloud run deploy --source {written}`")
        return
    sys.exit(subprocess.call(publish_command(publication)))


if __name__ == "__main__":
    cli()
