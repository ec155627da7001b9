"""The `gputalks` command: a thin Click layer. Each command reads its options,
finds the project, calls one function and prints the result. The commands for the docs and
the readers (export, search, serve, publish) are in cli_pages.py, what they share in
cli_common.py.
"""

from __future__ import annotations

from pathlib import Path

import click

from . import pipeline
from .cli_common import (CONFIG_OPTION, DB_OPTION, LENIENT_OPTION, OVERRIDES_OPTION, WAIT_OPTION, CliError,
                         db_path_for, open_index, run_with_progress, settings_for)
from .cli_pages import export, publish, search, serve
from .history import recent_changes
from .project import PROJECT_ENV, ProjectError, init_project
from .runs import index_status
from .store import IndexFiles, read_archive

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
    settings, project = settings_for(config_path, overrides_path)
    options = pipeline.RefreshOptions(sources=list(sources) or None, snapshot=snapshot, wait=wait, lenient=lenient)
    run_with_progress(lambda progress: pipeline.refresh(db_path_for(db_path, project), settings, options, progress))


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
    settings, project = settings_for(config_path, overrides_path)
    run_with_progress(lambda progress: pipeline.rebuild(db_path_for(db_path, project), settings, wait=wait, lenient=lenient,
                                           progress=progress))


@cli.command()
@DB_OPTION
@click.option("--all", "show_all", is_flag=True, help="List every problem, notes included.")
def status(db_path, show_all) -> None:
    """Counts per source, the last run, linked/unlinked counts and problems found."""
    db, path = open_index(db_path)
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
    db, _ = open_index(db_path)
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


for command in (export, search, serve, publish):
    cli.add_command(command)


if __name__ == "__main__":
    cli()
