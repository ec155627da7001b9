"""What every `gputalks` command shares: the common options, one-line errors, finding the
project and its index, and running a long job with progress, Ctrl-C and SIGTERM handled."""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from ..scraper.http import threads_waiting
from .build import Progress
from .config import Settings, load_config, project_settings
from .project import NoProject, Project, ProjectError, load_project
from .runs import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_LOCKED, EXIT_USAGE, RefreshLocked, RunReport
from .store import StoreError, open_db
from .validation import ConfigError
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
    project = current_project(required=False)
    path = db_path_for(db_path, project)
    try:
        return open_db(path, create=False), path
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from exc
    except StoreError as exc:
        raise config_error(exc) from exc


def print_report(report: RunReport) -> None:
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
    if message:
        click.echo(message, err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_with_progress(work) -> None:
    for stop in (signal.SIGTERM, signal.SIGHUP):  # a service manager's stop, a closed terminal
        signal.signal(stop, _stop)
    with err.status("starting") as spinner:
        try:
            report = work(Progress(lambda message: spinner.update(message),
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
            raise config_error(exc) from exc
        except (FileNotFoundError, ValueError) as exc:
            raise CliError(str(exc)) from exc
        except WorkerDied as exc:
            spinner.stop()
            raise CliError(f"{exc}; the last good index is unchanged", EXIT_FAILED) from exc
        except (sqlite3.Error, OSError) as exc:  # a full disk, an I/O error: the swap never happened
            spinner.stop()
            raise CliError(f"cannot write the index ({exc}); the last good index is unchanged",
                           EXIT_FAILED) from exc
    print_report(report)
    if report.exit_code:
        failed = "; ".join(f"{o.name}: {o.error or o.note}" for o in report.outcomes
                           if o.status in ("failed", "partial"))
        click.echo(f"gputalks: {report.status}: {failed or 'see gputalks status'}", err=True)  # one line
    if threads_waiting():  # a source abandoned at its deadline: its threads are not waited for
        _end_now("", report.exit_code)
    sys.exit(report.exit_code)
