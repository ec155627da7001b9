"""What every `gputalks` command shares: the common options, one-line errors, finding the
project and its index. Light on purpose: every command imports it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from gputalks.exit_codes import EXIT_USAGE
from gputalks.project.files import NoProject, Project, ProjectError, load_project
from gputalks.project.settings import Settings, load_config, project_settings
from gputalks.project.validation import ConfigError

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

class CliError(click.ClickException):
    """What went wrong, one line each on stderr ("gputalks: ..."), never a
    traceback; exit 1 by default, 2 for a usage or configuration mistake."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code

    def show(self, file: Any = None) -> None:
        for line in self.format_message().splitlines():
            click.echo(f"gputalks: {line}", err=True)


def config_error(exc: Exception) -> CliError:
    return CliError(str(exc), EXIT_USAGE)



def current_project(required: bool = True) -> Project | None:
    """The current project; a one-line error when it is required and missing."""
    try:
        return load_project(click.get_current_context().obj)
    except ConfigError as exc:
        raise config_error(exc) from exc
    except NoProject as exc:
        if required:
            raise config_error(exc) from exc
        return None
    except ProjectError as exc:  # a project file that is there but wrong: always said
        raise config_error(exc) from exc


def db_path_for(db_path: str | None, project: Project | None) -> Path:
    if db_path:
        return Path(db_path)
    return project.db if project else Path("talks.db")


def settings_for(config_path: str | None, overrides_path: str | None) -> tuple[Settings, Project | None]:
    """The project's settings; with --config and no project, that file alone."""
    project = current_project(required=not config_path)
    try:
        if project is not None:
            return project_settings(project, config_path, overrides_path), project
        if overrides_path and not Path(overrides_path).is_file():
            raise ProjectError(f"{overrides_path}: overrides file not found (given with --overrides)")
        return Settings(load_config(config_path), Path(overrides_path) if overrides_path else None), None
    except (ProjectError, ConfigError) as exc:
        raise config_error(exc) from exc


def open_index(db_path: str | None):
    from gputalks.index.store import StoreError, open_db

    project = current_project(required=False)
    path = db_path_for(db_path, project)
    try:
        return open_db(path, create=False), path
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from exc
    except StoreError as exc:
        raise config_error(exc) from exc
