"""`gputalks export`: the docs' curated tables, printed or written into their marked regions."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from gputalks.cli.common import DB_OPTION, CliError, config_error, current_project, db_path_for
from gputalks.index.store import StoreError, open_db
from gputalks.tables.curation import CurationError, load_curation


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
    from gputalks.tables.export import ExportError, marker_block, render, update_markdown

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
